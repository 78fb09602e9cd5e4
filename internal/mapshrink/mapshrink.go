// Package mapshrink gives back the memory of Go maps that grew in a burst.
//
// A Go map never shrinks: once a burst of work has put 100,000 entries in
// a cache's map, its tables stay allocated after the entries are deleted,
// for as long as the process lives. A Peak follows a map's high-water
// mark, and Shrink copies the map into one sized for what it holds once
// it has emptied to a small fraction of that mark. The copy costs
// O(entries left), paid at most once per (peak - entries left) deletions.
package mapshrink

// minPeak is the smallest high-water mark worth shrinking from: below
// it the tables are too small to matter.
const minPeak = 4096

// fraction: a map is copied once it holds no more than 1/fraction of
// its high-water mark.
const fraction = 8

// Peak is the high-water mark of one map's length. The zero value is
// ready to use.
type Peak struct{ n int }

// Note records the map's current length; call it after inserting.
func (p *Peak) Note(n int) {
	if n > p.n {
		p.n = n
	}
}

// Shrink returns m, or a copy of m sized for its entries when m has
// emptied to a fraction of its high-water mark (which then restarts from
// the copy's length). Call it after deleting; use the returned map.
func Shrink[K comparable, V any](p *Peak, m map[K]V) map[K]V {
	n := len(m)
	if p.n < minPeak || n > p.n/fraction {
		return m
	}
	c := make(map[K]V, n)
	for k, v := range m {
		c[k] = v
	}
	p.n = n
	return c
}
