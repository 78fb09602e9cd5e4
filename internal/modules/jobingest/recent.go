package jobingest

// recent is a map that keeps only the last n keys put in it: putting a
// new key when full forgets the oldest. job-ingest remembers jobspecs
// and stored blobs this way, since jobs submitted together repeat them.
type recent[V any] struct {
	m    map[string]V
	ring []string // keys in insertion order
	next int      // where the next new key goes
}

func newRecent[V any](n int) *recent[V] {
	return &recent[V]{m: make(map[string]V, n), ring: make([]string, n)}
}

func (r *recent[V]) get(k string) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}

// put remembers v under k (a key already held keeps its place).
func (r *recent[V]) put(k string, v V) {
	if _, ok := r.m[k]; !ok {
		if old := r.ring[r.next]; old != "" {
			delete(r.m, old)
		}
		r.ring[r.next] = k
		r.next = (r.next + 1) % len(r.ring)
	}
	r.m[k] = v
}

func (r *recent[V]) len() int { return len(r.m) }
