package content

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// recorder collects waiter callbacks.
type recorder struct{ got []string }

func (r *recorder) load(name string) func([]byte, error) {
	return func(b []byte, err error) { r.got = append(r.got, fmt.Sprintf("%s:%q:%v", name, b, err)) }
}

func (r *recorder) done(name string) func(error) {
	return func(err error) { r.got = append(r.got, fmt.Sprintf("%s:%v", name, err)) }
}

func (r *recorder) take() []string { g := r.got; r.got = nil; return g }

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestCacheLoad(t *testing.T) {
	t.Run("miss coalesces and fills", func(t *testing.T) {
		c := newCache(1<<20, 0)
		var r recorder
		if _, ok := c.get("k"); ok {
			t.Fatal("hit in empty cache")
		}
		if !c.park("k", r.load("a")) {
			t.Fatal("first park must start a load")
		}
		if c.park("k", r.load("b")) {
			t.Fatal("second park must not start another load")
		}
		c.loaded("k", []byte("xy"), nil)
		eq(t, r.take(), []string{`a:"xy":<nil>`, `b:"xy":<nil>`})
		if b, ok := c.get("k"); !ok || string(b) != "xy" {
			t.Fatalf("get after load = %q %v", b, ok)
		}
		if n, v, d := c.counts(); n != 1 || v != 1 || d != 0 || c.size != 2 {
			t.Fatalf("counts %d %d %d size %d", n, v, d, c.size)
		}
	})
	t.Run("error forgets the entry", func(t *testing.T) {
		c := newCache(1<<20, 0)
		var r recorder
		c.park("k", r.load("a"))
		c.loaded("k", nil, syscall.ENOENT)
		eq(t, r.take(), []string{`a:"":no such file or directory`})
		if n, _, _ := c.counts(); n != 0 {
			t.Fatalf("%d entries after failed load", n)
		}
		if !c.park("k", r.load("b")) {
			t.Fatal("a new miss must start a new load")
		}
	})
	t.Run("store answers pending loads", func(t *testing.T) {
		c := newCache(1<<20, 0)
		var r recorder
		c.park("k", r.load("a"))
		if !c.store("k", []byte("v")) {
			t.Fatal("store of a new blob must be dirty")
		}
		eq(t, r.take(), []string{`a:"v":<nil>`})
		c.loaded("k", []byte("v"), nil) // late load response is ignored
		if _, _, d := c.counts(); d != 1 || c.size != 1 {
			t.Fatalf("dirty %d size %d", d, c.size)
		}
	})
}

func TestCacheStoreWriteThrough(t *testing.T) {
	c := newCache(1<<20, 0)
	var r recorder
	if !c.store("k", []byte("v")) {
		t.Fatal("new store not dirty")
	}
	c.waitStored("k", r.done("s1"))
	if !c.store("k", []byte("v")) {
		t.Fatal("store of a dirty blob must report dirty")
	}
	c.waitStored("k", r.done("s2"))
	e := c.next()
	if e == nil || e.key != "k" || c.next() != nil {
		t.Fatal("next must return the entry once")
	}
	c.stored("k", nil, true)
	eq(t, r.take(), []string{"s1:<nil>", "s2:<nil>"})
	if c.store("k", []byte("v")) {
		t.Fatal("store of a clean blob must be squashed")
	}
	if c.waitStored("k", r.done("x")) {
		t.Fatal("waitStored on a clean entry")
	}
}

func TestCacheStoreFailure(t *testing.T) {
	t.Run("drop (ranks > 0)", func(t *testing.T) {
		c := newCache(1<<20, 0)
		var r recorder
		c.store("k", []byte("v"))
		c.waitStored("k", r.done("s"))
		c.barrier(r.done("flush"))
		c.next()
		c.stored("k", syscall.EIO, true)
		eq(t, r.take(), []string{"s:input/output error", "flush:input/output error"})
		if n, _, d := c.counts(); n != 0 || d != 0 || c.size != 0 {
			t.Fatalf("entry kept: n=%d dirty=%d size=%d", n, d, c.size)
		}
		if !c.store("k", []byte("v")) {
			t.Fatal("re-store after failure must be dirty again")
		}
	})
	t.Run("retry (rank 0)", func(t *testing.T) {
		c := newCache(1<<20, 1)
		var r recorder
		c.store("a", []byte("1"))
		c.store("b", []byte("2"))
		c.barrier(r.done("flush"))
		if e := c.next(); e.key != "a" {
			t.Fatalf("next = %s", e.key)
		}
		c.stored("a", syscall.ENOSPC, false)
		eq(t, r.take(), []string{"flush:no space left on device"})
		if e := c.next(); e == nil || e.key != "a" {
			t.Fatal("failed entry must be retried first")
		}
		if _, _, d := c.counts(); d != 2 {
			t.Fatalf("dirty = %d", d)
		}
	})
}

func TestCacheBatchLimit(t *testing.T) {
	c := newCache(1<<20, 2)
	for _, k := range []string{"a", "b", "c"} {
		c.store(k, []byte(k))
	}
	var order []string
	for e := c.next(); e != nil; e = c.next() {
		order = append(order, e.key)
	}
	eq(t, order, []string{"a", "b"})
	c.stored("b", nil, false)
	if e := c.next(); e == nil || e.key != "c" {
		t.Fatal("a finished store must free a slot")
	}
	if c.inflight != 2 {
		t.Fatalf("inflight = %d", c.inflight)
	}
}

func TestCacheBarrier(t *testing.T) {
	c := newCache(1<<20, 0)
	var r recorder
	c.barrier(r.done("empty"))
	eq(t, r.take(), []string{"empty:<nil>"})

	c.store("a", []byte("a"))
	c.store("b", []byte("b"))
	c.barrier(r.done("b1"))
	c.store("c", []byte("c"))
	c.barrier(r.done("b2"))
	for c.next() != nil {
	}
	c.stored("b", nil, false)
	eq(t, r.take(), nil)
	c.stored("a", nil, false)
	eq(t, r.take(), []string{"b1:<nil>"}) // c, stored after b1, doesn't hold it
	c.stored("c", nil, false)
	eq(t, r.take(), []string{"b2:<nil>"})
}

func TestCacheEviction(t *testing.T) {
	c := newCache(10, 0)
	for _, k := range []string{"a", "b"} {
		c.park(k, func([]byte, error) {})
		c.loaded(k, []byte("1234"), nil)
	}
	c.get("a") // a is now more recent than b
	c.park("c", func([]byte, error) {})
	c.loaded("c", []byte("1234"), nil)
	if _, ok := c.get("b"); ok {
		t.Fatal("least recently used entry b survived")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Fatalf("%s evicted", k)
		}
	}
	if c.size != 8 || c.evicted != 1 {
		t.Fatalf("size %d evicted %d", c.size, c.evicted)
	}

	// dirty entries are never evicted, even far over the limit
	d := newCache(0, 0)
	d.store("x", []byte("xxxx"))
	d.store("y", []byte("yyyy"))
	if n, _, dirty := d.counts(); n != 2 || dirty != 2 {
		t.Fatalf("dirty entries evicted: n=%d dirty=%d", n, dirty)
	}
	d.next()
	d.stored("x", nil, false) // clean now, and over the limit: evicted
	if _, ok := d.get("x"); ok {
		t.Fatal("clean entry over the limit kept")
	}
	if _, ok := d.get("y"); !ok {
		t.Fatal("dirty entry evicted")
	}
}

func TestCacheDropcache(t *testing.T) {
	c := newCache(1<<20, 0)
	c.park("clean", func([]byte, error) {})
	c.loaded("clean", []byte("c"), nil)
	c.store("dirty", []byte("d"))
	c.park("pending", func([]byte, error) {})
	if n := c.dropcache(); n != 1 {
		t.Fatalf("dropped %d, want 1", n)
	}
	if n, v, d := c.counts(); n != 2 || v != 1 || d != 1 {
		t.Fatalf("after dropcache: n=%d valid=%d dirty=%d", n, v, d)
	}
}

// TestCacheWrittenBlobs checks that blobs only written do not displace
// blobs that were read: they go to the cold end of the LRU, or with
// dropWritten (rank 0) are dropped once written, unless a load asked for
// them while they were dirty.
func TestCacheWrittenBlobs(t *testing.T) {
	t.Run("cold end", func(t *testing.T) {
		c := newCache(12, 0)
		c.park("r", func([]byte, error) {})
		c.loaded("r", []byte("rrrr"), nil)
		for _, k := range []string{"w1", "w2"} {
			c.store(k, []byte("wwww"))
			c.next()
			c.stored(k, nil, true)
		}
		c.store("x", []byte("xxxx")) // over the limit: a written blob goes
		if _, ok := c.get("r"); !ok {
			t.Fatal("blob that was read evicted before blobs only written")
		}
		if _, ok := c.get("w2"); ok {
			t.Fatal("the last written blob must be the coldest")
		}
		if _, ok := c.get("w1"); !ok {
			t.Fatal("w1 evicted although the cache was within its limit without w2")
		}
	})
	t.Run("dropWritten", func(t *testing.T) {
		c := newCache(1<<20, 0)
		c.dropWritten = true
		var r recorder
		c.store("w", []byte("w"))
		c.store("rd", []byte("r"))
		c.store("twice", []byte("t"))
		c.waitStored("w", r.done("w"))
		if b, ok := c.get("rd"); !ok || string(b) != "r" {
			t.Fatal("dirty blob not readable")
		}
		if !c.store("twice", []byte("t")) {
			t.Fatal("a dirty blob stored again must stay dirty")
		}
		for e := c.next(); e != nil; e = c.next() {
			c.stored(e.key, nil, false)
		}
		eq(t, r.take(), []string{"w:<nil>"})
		if _, ok := c.get("w"); ok {
			t.Fatal("blob only written kept after write-back")
		}
		if _, ok := c.get("rd"); !ok {
			t.Fatal("blob read while dirty dropped after write-back")
		}
		if c.store("twice", []byte("t")) {
			t.Fatal("blob stored twice while dirty dropped after write-back")
		}
		if n, v, d := c.counts(); n != 2 || v != 2 || d != 0 || c.size != 2 {
			t.Fatalf("counts %d %d %d size %d", n, v, d, c.size)
		}
		if !c.store("w", []byte("w")) {
			t.Fatal("a dropped blob stored again must be written again")
		}
	})
	t.Run("overhead", func(t *testing.T) {
		c := newCache(1000, 0)
		c.overhead = 300
		for _, k := range []string{"a", "b", "c", "d"} {
			c.park(k, func([]byte, error) {})
			c.loaded(k, []byte(k), nil)
		}
		if n, _, _ := c.counts(); n != 3 || c.footprint() > c.limit {
			t.Fatalf("%d entries, footprint %d over limit %d", n, c.footprint(), c.limit)
		}
	})
}

// TestCacheInvariants drives a random sequence of operations and checks
// the accounting after each step, for each write policy.
func TestCacheInvariants(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("dropWritten=%v", drop), func(t *testing.T) {
			c := newCache(16, 3)
			c.dropWritten = drop
			checkInvariants(t, c)
		})
	}
}

func checkInvariants(t *testing.T, c *cache) {
	seed := uint32(1)
	rnd := func(n int) int { seed = seed*1664525 + 1013904223; return int(seed>>8) % n }
	pending := map[string]bool{}
	for i := 0; i < 5000; i++ {
		k := fmt.Sprintf("k%d", rnd(12))
		switch rnd(6) {
		case 0:
			c.store(k, []byte(k))
		case 1:
			if _, ok := c.get(k); !ok && c.park(k, func([]byte, error) {}) {
				pending[k] = true
			}
		case 2:
			if pending[k] {
				delete(pending, k)
				var err error
				if rnd(3) == 0 {
					err = errors.New("x")
				}
				c.loaded(k, []byte(k), err)
			}
		case 3:
			if e := c.next(); e != nil {
				var err error
				if rnd(4) == 0 {
					err = errors.New("x")
				}
				c.stored(e.key, err, rnd(2) == 0)
			}
		case 4:
			c.dropcache()
		case 5:
			c.barrier(func(error) {})
		}
		var size, dirtySize int64
		valid, dirty := 0, 0
		for _, e := range c.entries {
			if e.valid {
				valid++
				size += int64(len(e.data))
			}
			if e.dirty {
				dirty++
				dirtySize += int64(len(e.data))
				if e.lruElem != nil || e.dirtyElem == nil {
					t.Fatalf("step %d: dirty entry %s in wrong lists", i, e.key)
				}
			}
			if e.valid && !e.dirty && e.lruElem == nil {
				t.Fatalf("step %d: clean entry %s not in LRU", i, e.key)
			}
		}
		_, v, d := c.counts()
		if dirtySize != c.dirtySize {
			t.Fatalf("step %d: dirty size %d, entries hold %d", i, c.dirtySize, dirtySize)
		}
		if size != c.size || v != valid || d != dirty {
			t.Fatalf("step %d: size %d/%d valid %d/%d dirty %d/%d", i, c.size, size, v, valid, c.dirty.Len(), dirty)
		}
		if c.size > c.limit && c.lru.Len() > 0 {
			t.Fatalf("step %d: %d bytes held over the %d limit with clean entries left", i, c.size, c.limit)
		}
		if c.inflight < 0 || c.inflight > 3 {
			t.Fatalf("step %d: inflight %d", i, c.inflight)
		}
	}
}
