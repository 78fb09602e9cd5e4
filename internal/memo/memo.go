// Package memo remembers what a pure function computed from a text,
// keyed by the text. Several modules decode each job's jobspec (job-exec
// its executor options, job-list the fields it lists, sched-simple the
// resource request); the jobs of an array or of one bulk submission
// share one jobspec, which is then decoded once per module.
//
// A Cache is not safe for concurrent use: a module keeps one on its
// Serve goroutine.
package memo

// Cache holds up to a fixed number of results; when full it starts over
// (jobspecs come in runs, so recency matters more than frequency).
type Cache[V any] struct {
	m   map[string]V
	max int
}

// New returns a cache of at most max results.
func New[V any](max int) *Cache[V] {
	return &Cache[V]{m: make(map[string]V), max: max}
}

// Get returns compute(text), computing it only if text has not been
// seen since the cache last started over. compute must not keep text.
func (c *Cache[V]) Get(text []byte, compute func([]byte) V) V {
	if v, ok := c.m[string(text)]; ok {
		return v
	}
	v := compute(text)
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[string(text)] = v
	return v
}

// Len returns the number of results held.
func (c *Cache[V]) Len() int { return len(c.m) }
