package content

import (
	"container/list"

	"github.com/fluxgo/fluxgo/internal/mapshrink"
)

// entry is one blob in the cache, keyed by its raw digest.
//
// An entry is valid once it holds the blob, and dirty while the blob is
// not yet durable at the next level: on rank 0 "not in the backing store",
// on other ranks "not acknowledged by the parent" (RFC 10). Invalid
// entries exist only while a load is pending.
type entry struct {
	key   string
	data  []byte
	valid bool
	dirty bool
	// seq orders dirty entries by when they became dirty, for barriers.
	seq uint64

	loadPending  bool // a load is in flight upstream
	storePending bool // a store is in flight upstream
	// read is set when a load found the entry, or a store repeated it,
	// while it was dirty: it stays cached once written (see
	// cache.dropWritten).
	read bool

	loadWaiters  []func(data []byte, err error)
	storeWaiters []func(err error)

	lruElem   *list.Element // in cache.lru while valid and clean
	dirtyElem *list.Element // in cache.dirty while dirty
	queueElem *list.Element // in cache.sendq while dirty and not being stored
}

// barrier is a callback waiting for every entry dirty at the time it was
// set (seq <= barrier.seq) to become clean.
type barrier struct {
	seq uint64
	fn  func(err error)
}

// cache is the content cache's bookkeeping: entries, the LRU of clean
// entries, the dirty entries in store order and the queue of those
// waiting to be written upstream. It makes no RPCs: the module drives it
// (load, store, next, stored) and it calls back the waiters it holds, so
// its policy is tested without a broker. Only the module's Serve
// goroutine uses it.
//
// Policy:
//   - Valid clean entries are kept in LRU order and evicted, least
//     recently used first, whenever the bytes held (data plus overhead
//     per entry) exceed limit.
//   - A blob that becomes clean because it was written upstream is one
//     its writer holds already (the KVS keeps what it wrote in its own
//     cache). With dropWritten (rank 0, whose upstream is the backing
//     store) it is dropped then, unless a load asked for it meanwhile;
//     otherwise it goes in at the cold end of the LRU. Either way a
//     stream of writes does not push out blobs that were loaded, and the
//     cache does not grow with what was merely written. A load or a
//     repeated store makes an entry recently used.
//   - Dirty and invalid entries are never evicted or dropped.
//   - At most batch stores are in flight upstream (0: no limit); the rest
//     wait in sendq, oldest first.
type cache struct {
	entries map[string]*entry
	peak    mapshrink.Peak // entries' high-water mark
	lru     *list.List     // of *entry, front = most recently used
	dirty   *list.List     // of *entry, front = oldest dirty
	sendq   *list.List     // of *entry, front = next to store

	limit     int64 // bytes held (see footprint) before clean entries are evicted
	overhead  int64 // bytes of bookkeeping counted per entry against limit
	batch     int   // stores in flight limit, 0 = unlimited
	size      int64 // bytes of data in valid entries
	dirtySize int64 // bytes of data in dirty entries
	inflight  int   // stores in flight
	seq       uint64
	barriers  []barrier

	// dropWritten drops an entry once it is written upstream unless it
	// was read while dirty.
	dropWritten bool

	evicted uint64 // entries evicted by the size limit (statistics)
}

func newCache(limit int64, batch int) *cache {
	return &cache{
		entries: make(map[string]*entry),
		lru:     list.New(),
		dirty:   list.New(),
		sendq:   list.New(),
		limit:   limit,
		batch:   batch,
	}
}

// get returns the blob stored under k if the cache holds it, marking the
// entry recently used.
func (c *cache) get(k string) ([]byte, bool) {
	e := c.entries[k]
	if e == nil || !e.valid {
		return nil, false
	}
	if e.lruElem != nil {
		c.lru.MoveToFront(e.lruElem)
	} else {
		e.read = true
	}
	return e.data, true
}

// park queues a waiter for the blob under k, which get did not find. It
// returns true when the caller must start a load upstream (none is in
// flight yet) and report its outcome with loaded.
func (c *cache) park(k string, fn func(data []byte, err error)) bool {
	e := c.entries[k]
	if e == nil {
		e = &entry{key: k}
		c.entries[k] = e
		c.peak.Note(len(c.entries))
	}
	if e.valid { // cannot happen after a get miss; answer anyway
		fn(e.data, nil)
		return false
	}
	e.loadWaiters = append(e.loadWaiters, fn)
	if e.loadPending {
		return false
	}
	e.loadPending = true
	return true
}

// loaded records the outcome of a load started after park. A blob is
// cached as valid and clean (it came from a level that holds it); an
// error is passed to every waiter and the invalid entry forgotten.
func (c *cache) loaded(k string, data []byte, err error) {
	e := c.entries[k]
	if e == nil || !e.loadPending {
		return
	}
	e.loadPending = false
	if e.valid { // a store filled it meanwhile and answered the waiters
		return
	}
	waiters := e.loadWaiters
	e.loadWaiters = nil
	if err != nil {
		c.remove(e)
		for _, fn := range waiters {
			fn(nil, err)
		}
		return
	}
	e.data, e.valid = data, true
	c.size += int64(len(data))
	e.lruElem = c.lru.PushFront(e)
	for _, fn := range waiters {
		fn(data, nil)
	}
	c.evict()
}

// store puts blob data under k. It returns true when the entry is dirty
// afterwards (newly stored, or stored before and not yet durable
// upstream), false when the blob was already durable upstream and the
// store can be answered at once. Load waiters on the entry are answered.
func (c *cache) store(k string, data []byte) (dirty bool) {
	e := c.entries[k]
	if e == nil {
		e = &entry{key: k}
		c.entries[k] = e
		c.peak.Note(len(c.entries))
	}
	if e.valid {
		if e.lruElem != nil {
			c.lru.MoveToFront(e.lruElem)
		} else {
			e.read = true // stored again: likely to be stored again
		}
		return e.dirty
	}
	e.data, e.valid, e.dirty = data, true, true
	c.size += int64(len(data))
	c.dirtySize += int64(len(data))
	c.seq++
	e.seq = c.seq
	e.dirtyElem = c.dirty.PushBack(e)
	e.queueElem = c.sendq.PushBack(e)
	waiters := e.loadWaiters
	e.loadWaiters = nil
	for _, fn := range waiters {
		fn(data, nil)
	}
	c.evict()
	return true
}

// waitStored adds a callback run when the dirty entry k has been stored
// upstream (or the store failed). It returns false if k is not dirty.
func (c *cache) waitStored(k string, fn func(err error)) bool {
	e := c.entries[k]
	if e == nil || !e.dirty {
		return false
	}
	e.storeWaiters = append(e.storeWaiters, fn)
	return true
}

// next returns the next dirty entry to store upstream, or nil when none
// waits or the in-flight limit is reached. The caller must report the
// outcome with stored.
func (c *cache) next() *entry {
	if c.batch > 0 && c.inflight >= c.batch {
		return nil
	}
	el := c.sendq.Front()
	if el == nil {
		return nil
	}
	e := c.sendq.Remove(el).(*entry)
	e.queueElem = nil
	e.storePending = true
	c.inflight++
	return e
}

// stored records the outcome of a store started by next. On success the
// entry becomes clean, its store waiters are answered and barriers it
// held back are released. On failure the waiters and the barriers that
// covered the entry get err; then with drop the entry is forgotten (the
// requestors were told it failed), otherwise it goes back to the front of
// the queue to be retried.
func (c *cache) stored(k string, err error, drop bool) {
	e := c.entries[k]
	if e == nil || !e.storePending {
		return
	}
	e.storePending = false
	c.inflight--
	waiters := e.storeWaiters
	e.storeWaiters = nil
	if err == nil {
		c.clean(e)
		for _, fn := range waiters {
			fn(nil)
		}
		c.releaseBarriers()
		c.evict()
		return
	}
	for _, fn := range waiters {
		fn(err)
	}
	c.failBarriers(e.seq, err)
	if drop {
		c.dirty.Remove(e.dirtyElem)
		e.dirtyElem, e.dirty = nil, false
		c.dirtySize -= int64(len(e.data))
		c.remove(e)
		c.releaseBarriers()
		return
	}
	e.queueElem = c.sendq.PushFront(e)
}

// requeue puts back at the front of the queue the entries of a store
// that was not attempted (its request was refused as unknown), with no
// failure reported to anyone. Keys must be in the order next returned
// them.
func (c *cache) requeue(keys []string) {
	for i := len(keys) - 1; i >= 0; i-- {
		e := c.entries[keys[i]]
		if e == nil || !e.storePending {
			continue
		}
		e.storePending = false
		c.inflight--
		e.queueElem = c.sendq.PushFront(e)
	}
}

// clean takes an entry written upstream off the dirty list and drops it
// or puts it in the LRU, at the front if it was used while dirty and at
// the cold end if not (see the policy above).
func (c *cache) clean(e *entry) {
	if !e.dirty {
		return
	}
	c.dirty.Remove(e.dirtyElem)
	e.dirtyElem, e.dirty = nil, false
	c.dirtySize -= int64(len(e.data))
	switch {
	case e.read:
		e.lruElem = c.lru.PushFront(e)
	case c.dropWritten:
		c.remove(e)
	default:
		e.lruElem = c.lru.PushBack(e)
	}
	e.read = false
}

// barrier calls fn once every entry dirty now has been stored upstream:
// at once if none is dirty. Entries dirtied later do not hold it back.
func (c *cache) barrier(fn func(err error)) {
	if c.dirty.Len() == 0 {
		fn(nil)
		return
	}
	c.barriers = append(c.barriers, barrier{seq: c.seq, fn: fn})
}

// releaseBarriers runs the barriers whose dirty entries are all clean.
func (c *cache) releaseBarriers() {
	if len(c.barriers) == 0 {
		return
	}
	oldest := ^uint64(0)
	if el := c.dirty.Front(); el != nil {
		oldest = el.Value.(*entry).seq
	}
	keep := c.barriers[:0]
	var ready []barrier
	for _, b := range c.barriers {
		if b.seq < oldest {
			ready = append(ready, b)
		} else {
			keep = append(keep, b)
		}
	}
	c.barriers = keep
	for _, b := range ready {
		b.fn(nil)
	}
}

// failBarriers fails the barriers waiting on an entry with sequence seq.
func (c *cache) failBarriers(seq uint64, err error) {
	keep := c.barriers[:0]
	var failed []barrier
	for _, b := range c.barriers {
		if b.seq >= seq {
			failed = append(failed, b)
		} else {
			keep = append(keep, b)
		}
	}
	c.barriers = keep
	for _, b := range failed {
		b.fn(err)
	}
}

// failAllBarriers fails every waiting barrier (the backing store went
// away).
func (c *cache) failAllBarriers(err error) {
	bs := c.barriers
	c.barriers = nil
	for _, b := range bs {
		b.fn(err)
	}
}

// remove forgets an entry that is not dirty.
func (c *cache) remove(e *entry) {
	if e.lruElem != nil {
		c.lru.Remove(e.lruElem)
		e.lruElem = nil
	}
	if e.valid {
		c.size -= int64(len(e.data))
	}
	delete(c.entries, e.key)
	c.entries = mapshrink.Shrink(&c.peak, c.entries)
}

// entryOverhead approximates what an entry costs besides its data: the
// entry, its map slot, key and list element. Charging it keeps a cache of
// many small blobs (KVS appends are a few hundred bytes) within limit.
const entryOverhead = 256

// footprint is what the cache holds as charged against limit.
func (c *cache) footprint() int64 { return c.size + c.overhead*int64(len(c.entries)) }

// evict drops least recently used clean entries while over the limit.
func (c *cache) evict() {
	for c.footprint() > c.limit {
		el := c.lru.Back()
		if el == nil {
			return
		}
		c.remove(el.Value.(*entry))
		c.evicted++
	}
}

// dropcache forgets every clean entry and returns how many.
func (c *cache) dropcache() int {
	n := 0
	for el := c.lru.Back(); el != nil; el = c.lru.Back() {
		c.remove(el.Value.(*entry))
		n++
	}
	return n
}

// counts returns entries, valid entries and dirty entries.
func (c *cache) counts() (count, valid, dirty int) {
	valid = c.lru.Len() + c.dirty.Len()
	return len(c.entries), valid, c.dirty.Len()
}
