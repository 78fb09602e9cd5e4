// Package memo is a map that keeps only the values put in it lately, and
// remembers what a pure function computed from a text, keyed by the
// text. Jobs submitted together repeat their jobspecs (a job array, a
// bulk submission, a throughput test): job-ingest checks each text once,
// job-exec reads its executor options once, job-list its listed fields,
// sched-simple its resource request; job-ingest also remembers the blobs
// it stored lately.
//
// A Cache is not safe for concurrent use: a module keeps one on its
// Serve goroutine.
package memo

// Cache holds up to a fixed number of keys: putting a new key when full
// forgets the oldest.
type Cache[V any] struct {
	m    map[string]V
	ring []string // keys in insertion order
	next int      // where the next new key goes
}

// New returns a cache of at most max keys (max >= 1).
func New[V any](max int) *Cache[V] {
	return &Cache[V]{m: make(map[string]V, max), ring: make([]string, max)}
}

// Lookup returns the value held under k.
func (c *Cache[V]) Lookup(k string) (V, bool) {
	v, ok := c.m[k]
	return v, ok
}

// LookupBytes is Lookup for a key held as bytes (without copying it).
func (c *Cache[V]) LookupBytes(k []byte) (V, bool) {
	v, ok := c.m[string(k)]
	return v, ok
}

// Put holds v under k (a key already held keeps its place).
func (c *Cache[V]) Put(k string, v V) {
	if _, ok := c.m[k]; !ok {
		if old := c.ring[c.next]; old != "" {
			delete(c.m, old)
		}
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
	}
	c.m[k] = v
}

// Get returns compute(text), computing it only if text is not held.
// compute must not keep text.
func (c *Cache[V]) Get(text []byte, compute func([]byte) V) V {
	if v, ok := c.m[string(text)]; ok {
		return v
	}
	v := compute(text)
	c.Put(string(text), v)
	return v
}

// Len returns the number of keys held.
func (c *Cache[V]) Len() int { return len(c.m) }
