package idset

import (
	"math"
	"slices"
	"sort"
)

// Add adds id to s.
func (s *Set) Add(id uint) { s.AddRange(id, id) }

// AddRange adds the ids lo through hi inclusive to s. It does nothing when
// hi < lo.
func (s *Set) AddRange(lo, hi uint) {
	if hi < lo {
		return
	}
	// i: first range that touches or follows [lo,hi] (its Hi+1 >= lo).
	i := sort.Search(len(s.r), func(k int) bool { return lo == 0 || s.r[k].Hi >= lo-1 })
	// j: first range that starts past hi+1, so cannot merge.
	j := len(s.r)
	if hi != math.MaxUint {
		j = i + sort.Search(len(s.r)-i, func(k int) bool { return s.r[i+k].Lo > hi+1 })
	}
	if i < j {
		lo = min(lo, s.r[i].Lo)
		hi = max(hi, s.r[j-1].Hi)
	}
	s.r = slices.Replace(s.r, i, j, Interval{lo, hi})
}

// Remove removes id from s; it is not an error if id is absent.
func (s *Set) Remove(id uint) { s.RemoveRange(id, id) }

// RemoveRange removes the ids lo through hi inclusive from s. It does
// nothing when hi < lo.
func (s *Set) RemoveRange(lo, hi uint) {
	if hi < lo {
		return
	}
	i := s.search(lo)
	j := i + sort.Search(len(s.r)-i, func(k int) bool { return s.r[i+k].Lo > hi })
	if i == j {
		return
	}
	var keep [2]Interval
	n := 0
	if first := s.r[i]; first.Lo < lo {
		keep[n] = Interval{first.Lo, lo - 1}
		n++
	}
	if last := s.r[j-1]; last.Hi > hi {
		keep[n] = Interval{hi + 1, last.Hi}
		n++
	}
	s.r = slices.Replace(s.r, i, j, keep[:n]...)
	if len(s.r) == 0 {
		s.r = nil
	}
}

// Union returns the ids that are in s or in o.
func (s Set) Union(o Set) Set {
	out := Set{r: make([]Interval, 0, len(s.r)+len(o.r))}
	i, j := 0, 0
	for i < len(s.r) || j < len(o.r) {
		var next Interval
		if j == len(o.r) || (i < len(s.r) && s.r[i].Lo <= o.r[j].Lo) {
			next = s.r[i]
			i++
		} else {
			next = o.r[j]
			j++
		}
		out.appendRange(next.Lo, next.Hi)
	}
	return out.trim()
}

// Intersect returns the ids that are in both s and o.
func (s Set) Intersect(o Set) Set {
	var out Set
	i, j := 0, 0
	for i < len(s.r) && j < len(o.r) {
		a, b := s.r[i], o.r[j]
		if lo, hi := max(a.Lo, b.Lo), min(a.Hi, b.Hi); lo <= hi {
			out.r = append(out.r, Interval{lo, hi})
		}
		if a.Hi < b.Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// Difference returns the ids that are in s but not in o.
func (s Set) Difference(o Set) Set {
	var out Set
	j := 0
	for _, a := range s.r {
		lo := a.Lo
		// Skip ranges of o that end before this range starts.
		for j < len(o.r) && o.r[j].Hi < lo {
			j++
		}
		done := false
		for k := j; k < len(o.r) && o.r[k].Lo <= a.Hi; k++ {
			b := o.r[k]
			if b.Lo > lo {
				out.r = append(out.r, Interval{lo, b.Lo - 1})
			}
			if b.Hi >= a.Hi {
				done = true
				break
			}
			lo = b.Hi + 1
		}
		if !done {
			out.r = append(out.r, Interval{lo, a.Hi})
		}
	}
	return out
}

// trim makes the empty set nil so that zero-valued and computed empty sets
// look the same.
func (s Set) trim() Set {
	if len(s.r) == 0 {
		return Set{}
	}
	return s
}
