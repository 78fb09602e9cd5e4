package kvs

import (
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/mapshrink"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// entry is one content blob known to this KVS: a decoded directory, the
// raw bytes of a value blob, or a load in progress.
type entry struct {
	dir     *treeobj.Object // decoded dir (blobs reached through a dirref)
	data    []byte          // raw blob (blobs reached through a valref)
	stored  bool            // known to be in the content store
	lastUse time.Time
	// superseded is when a commit replaced this directory in the current
	// tree; unless used since, it goes at the next sweep after a grace
	// period instead of after the full cache expiry.
	superseded time.Time

	loading bool
	waiters []func(error)
}

func (e *entry) valid() bool { return e.dir != nil || e.data != nil }

// cache maps blobrefs to entries. It belongs to the module's Serve
// goroutine. Every object in it is immutable.
type cache struct {
	h        *flux.Handle
	hashName string
	m        map[string]*entry
	peak     mapshrink.Peak // m's high-water mark
	now      time.Time      // refreshed once per operation by touchClock
	// supersededQ lists entries marked superseded, oldest first: each
	// expiry tick drops those past the grace period without scanning
	// the whole cache, which it does only every half expiry period.
	supersededQ []supersededRef
	lastScan    time.Time

	faults int // loads sent, for stats
}

// supersededRef is an entry marked superseded at a time.
type supersededRef struct {
	ref string
	at  time.Time
}

func newCache(h *flux.Handle, hashName string) *cache {
	return &cache{h: h, hashName: hashName, m: make(map[string]*entry), now: time.Now()}
}

func (c *cache) touchClock() { c.now = time.Now() }

// getDir returns the decoded dir named by ref, or ok=false when it is not
// in the cache. A blob that is not a dir is an error.
func (c *cache) getDir(ref string) (*treeobj.Object, bool, error) {
	e := c.m[ref]
	if e == nil {
		return nil, false, nil
	}
	e.lastUse = c.now
	if e.dir != nil {
		return e.dir, true, nil
	}
	if e.data == nil {
		return nil, false, nil
	}
	o, err := treeobj.Decode(e.data)
	if err != nil {
		return nil, true, fmt.Errorf("blob %s is not a tree object: %v: %w", ref, err, syscall.ENOTRECOVERABLE)
	}
	if o.Type != treeobj.Dir {
		return nil, true, fmt.Errorf("dirref %s points to a %s object: %w", ref, o.Type, syscall.ENOTRECOVERABLE)
	}
	e.dir, e.data = o, nil
	return o, true, nil
}

// getData returns the raw blob named by ref, or ok=false when it is not
// in the cache as raw data.
func (c *cache) getData(ref string) ([]byte, bool) {
	e := c.m[ref]
	if e == nil || e.data == nil {
		return nil, false
	}
	e.lastUse = c.now
	return e.data, true
}

// isStored reports whether ref is known to be in the content store.
func (c *cache) isStored(ref string) bool {
	e := c.m[ref]
	return e != nil && e.stored
}

// forget drops the entries of blobs whose store failed (entries that
// are stored are kept).
func (c *cache) forget(blobs []blob) {
	for _, b := range blobs {
		if e := c.m[b.ref]; e != nil && !e.stored && !e.loading {
			delete(c.m, b.ref)
		}
	}
	c.m = mapshrink.Shrink(&c.peak, c.m)
}

// putDir records a dir created by a commit (not yet stored).
func (c *cache) putDir(ref string, dir *treeobj.Object) *entry {
	e := c.m[ref]
	if e == nil {
		e = &entry{}
		c.m[ref] = e
		c.peak.Note(len(c.m))
	}
	if e.dir == nil {
		e.dir, e.data = dir, nil
	}
	e.lastUse = c.now
	return e
}

// putData records a value blob created by a commit (not yet stored).
func (c *cache) putData(ref string, data []byte) *entry {
	e := c.m[ref]
	if e == nil {
		e = &entry{}
		c.m[ref] = e
		c.peak.Note(len(c.m))
	}
	if e.data == nil && e.dir == nil {
		if data == nil {
			data = []byte{} // an empty blob is still a valid entry
		}
		e.data = data
	}
	e.lastUse = c.now
	return e
}

// load faults ref in from the content service and calls done when it is
// in the cache (or failed). Concurrent loads of one blob share one RPC.
// asDir says whether the blob is expected to be a dir (decoded on
// arrival) or a value blob (kept raw).
func (c *cache) load(ref string, done func(error)) {
	e := c.m[ref]
	if e == nil {
		e = &entry{}
		c.m[ref] = e
		c.peak.Note(len(c.m))
	}
	if e.valid() && !e.loading {
		c.h.Post(func() { done(nil) })
		return
	}
	e.waiters = append(e.waiters, done)
	if e.loading {
		return
	}
	e.loading = true
	c.faults++
	_, digest, err := content.Parse(ref)
	if err != nil {
		c.loaded(ref, e, nil, err)
		return
	}
	f, err := content.SendLoad(c.h, digest, 0)
	if err != nil {
		c.loaded(ref, e, nil, err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		data, err := content.LoadResult(m, err)
		if err == nil {
			if got, herr := content.Blobref(c.hashName, data); herr != nil || got != ref {
				err = fmt.Errorf("content load %s returned a blob hashing to %s: %w", ref, got, syscall.EPROTO)
			}
		}
		c.loaded(ref, e, data, err)
	})
}

func (c *cache) loaded(ref string, e *entry, data []byte, err error) {
	e.loading = false
	if err == nil {
		if e.data == nil && e.dir == nil {
			e.data = append(make([]byte, 0, len(data)), data...) // never nil
		}
		e.stored = true
		e.lastUse = time.Now()
	} else if !e.valid() {
		delete(c.m, ref)
		c.m = mapshrink.Shrink(&c.peak, c.m)
		err = fmt.Errorf("load %s: %w", ref, err)
	}
	w := e.waiters
	e.waiters = nil
	for _, fn := range w {
		fn(err)
	}
}

// loadAll loads every ref and calls done once with the first error.
func (c *cache) loadAll(refs []string, done func(error)) {
	if len(refs) == 0 {
		c.h.Post(func() { done(nil) })
		return
	}
	n := len(refs)
	var first error
	for _, ref := range refs {
		c.load(ref, func(err error) {
			if err != nil && first == nil {
				first = err
			}
			if n--; n == 0 {
				done(first)
			}
		})
	}
}

// supersededGrace is how long a directory replaced by a commit stays
// cached when nothing uses it (lookups of recent roots, as kvs-watch
// makes, still find it).
const supersededGrace = 250 * time.Millisecond

// supersede marks directories a commit replaced.
func (c *cache) supersede(refs []string) {
	for _, ref := range refs {
		if e := c.m[ref]; e != nil {
			c.markSuperseded(ref, e)
		}
	}
}

// markSuperseded marks e (cached under ref) superseded now.
func (c *cache) markSuperseded(ref string, e *entry) {
	e.superseded = c.now
	c.supersededQ = append(c.supersededQ, supersededRef{ref, c.now})
}

// pinned reports whether an entry must stay: a blob not yet stored, a
// load in progress, or a root in keep.
func pinned(ref string, e *entry, keep map[string]bool) bool {
	return e.loading || !e.stored || keep[ref]
}

// expire drops entries not used for maxAge, and superseded directories
// not used since, except those pinned. Superseded entries go from the
// queue at every call; the whole cache is scanned only every maxAge/2
// (and always when maxAge is 0: everything unpinned goes).
func (c *cache) expire(maxAge time.Duration, keep map[string]bool) int {
	n := c.expireSuperseded(keep)
	if maxAge > 0 && c.now.Sub(c.lastScan) < maxAge/2 {
		return n
	}
	c.lastScan = c.now
	for ref, e := range c.m {
		if pinned(ref, e, keep) {
			continue
		}
		if maxAge > 0 && c.now.Sub(e.lastUse) < maxAge && !c.stale(e) {
			continue
		}
		delete(c.m, ref)
		n++
	}
	c.m = mapshrink.Shrink(&c.peak, c.m)
	return n
}

// stale reports whether e was superseded more than the grace period ago
// and not used since.
func (c *cache) stale(e *entry) bool {
	return !e.superseded.IsZero() && !e.lastUse.After(e.superseded) &&
		c.now.Sub(e.superseded) >= supersededGrace
}

// expireSuperseded drops the queued superseded entries past their grace
// period. One still pinned (its store not answered yet) is queued again.
func (c *cache) expireSuperseded(keep map[string]bool) int {
	n, i := 0, 0
	var again []supersededRef
	for ; i < len(c.supersededQ); i++ {
		q := c.supersededQ[i]
		if c.now.Sub(q.at) < supersededGrace {
			break
		}
		e := c.m[q.ref]
		if e == nil || !e.superseded.Equal(q.at) || !c.stale(e) {
			continue // gone, marked again later, or used since
		}
		if pinned(q.ref, e, keep) {
			again = append(again, q)
			continue
		}
		delete(c.m, q.ref)
		n++
	}
	clear(c.supersededQ[:i]) // the array must not keep the refs
	rest := c.supersededQ[i:]
	if len(again) > 0 {
		rest = append(again, rest...)
	}
	if len(rest) == 0 {
		c.supersededQ = nil // let the array go
	} else {
		c.supersededQ = rest
	}
	return n
}

// stats summarizes the cache for kvs.stats-get.
func (c *cache) stats() (count, size, incomplete, dirty int) {
	for _, e := range c.m {
		count++
		switch {
		case e.loading && !e.valid():
			incomplete++
		case !e.stored:
			dirty++
		}
		size += len(e.data)
	}
	return
}
