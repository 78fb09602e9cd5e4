// Package idset reads, writes and combines sets of non-negative integer
// ids in the RFC 22 idset form ("0-3,5,7-8"), which Flux uses for broker
// ranks, task ranks and resource indices.
//
// A [Set] is kept as a sorted list of disjoint, non-adjacent ranges and is
// never expanded: the set 0-999999 is one range, and every operation costs
// time in proportion to the number of ranges, not the number of ids.
//
// The zero Set is the empty set. A Set is a small value holding a slice,
// like a slice itself: after b := a the two share storage, so calling a
// mutating method (Add, AddRange, Remove, RemoveRange, UnmarshalJSON) on
// one may change the other. Use [Set.Clone] for an independent copy. The
// methods with value receivers never modify their receiver, and the Sets
// they return never share storage with their operands.
package idset

import (
	"iter"
	"math"
	"sort"
)

// Interval is one range of consecutive ids, Lo through Hi inclusive.
type Interval struct {
	Lo, Hi uint
}

// Set is a set of non-negative integer ids. See the package comment for
// its value semantics.
type Set struct {
	// r holds sorted, disjoint, non-adjacent ranges:
	// r[i].Lo <= r[i].Hi and r[i].Hi+1 < r[i+1].Lo.
	r []Interval
}

// New returns the set of the given ids, in any order, duplicates allowed.
func New(ids ...uint) Set {
	var s Set
	sorted := sort.SliceIsSorted(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if !sorted {
		ids = append([]uint(nil), ids...)
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	for _, id := range ids {
		s.appendRange(id, id)
	}
	return s
}

// Range returns the set of ids lo through hi inclusive, or the empty set
// when hi < lo.
func Range(lo, hi uint) Set {
	if hi < lo {
		return Set{}
	}
	return Set{r: []Interval{{lo, hi}}}
}

// appendRange adds [lo,hi] to s, which must not start before the last
// range of s starts. It merges with the last range when they touch.
func (s *Set) appendRange(lo, hi uint) {
	if n := len(s.r); n > 0 {
		last := &s.r[n-1]
		if last.Hi == math.MaxUint || lo <= last.Hi+1 {
			if hi > last.Hi {
				last.Hi = hi
			}
			return
		}
	}
	s.r = append(s.r, Interval{lo, hi})
}

// Count returns the number of ids in s. It saturates at math.MaxInt for
// sets too large to count in an int.
func (s Set) Count() int {
	var n uint64
	for _, iv := range s.r {
		w := uint64(iv.Hi - iv.Lo)
		if w >= math.MaxInt-n {
			return math.MaxInt
		}
		n += w + 1
	}
	return int(n)
}

// Empty reports whether s has no ids.
func (s Set) Empty() bool { return len(s.r) == 0 }

// search returns the index of the first range whose Hi is >= id.
func (s Set) search(id uint) int {
	return sort.Search(len(s.r), func(i int) bool { return s.r[i].Hi >= id })
}

// Contains reports whether id is in s.
func (s Set) Contains(id uint) bool {
	i := s.search(id)
	return i < len(s.r) && s.r[i].Lo <= id
}

// First returns the smallest id of s; ok is false when s is empty.
func (s Set) First() (id uint, ok bool) {
	if len(s.r) == 0 {
		return 0, false
	}
	return s.r[0].Lo, true
}

// Last returns the largest id of s; ok is false when s is empty.
func (s Set) Last() (id uint, ok bool) {
	if len(s.r) == 0 {
		return 0, false
	}
	return s.r[len(s.r)-1].Hi, true
}

// Nth returns the n-th smallest id of s, counting from 0; ok is false
// when n is negative or s has no more than n ids.
func (s Set) Nth(n int) (id uint, ok bool) {
	if n < 0 {
		return 0, false
	}
	k := uint(n)
	for _, iv := range s.r {
		w := iv.Hi - iv.Lo
		if k <= w {
			return iv.Lo + k, true
		}
		k -= w + 1
	}
	return 0, false
}

// All returns an iterator over the ids of s in ascending order.
func (s Set) All() iter.Seq[uint] {
	return func(yield func(uint) bool) {
		for _, iv := range s.r {
			for id := iv.Lo; ; id++ {
				if !yield(id) {
					return
				}
				if id == iv.Hi {
					break
				}
			}
		}
	}
}

// Ranges returns the ranges of s in ascending order. The slice is a copy.
func (s Set) Ranges() []Interval {
	if len(s.r) == 0 {
		return nil
	}
	return append([]Interval(nil), s.r...)
}

// NumRanges returns the number of ranges of s (the length of Ranges).
func (s Set) NumRanges() int { return len(s.r) }

// AllRanges yields the ranges of s in ascending order, without copying
// them as Ranges does.
func (s Set) AllRanges() iter.Seq[Interval] {
	return func(yield func(Interval) bool) {
		for _, iv := range s.r {
			if !yield(iv) {
				return
			}
		}
	}
}

// Clone returns a copy of s that shares no storage with it.
func (s Set) Clone() Set {
	return Set{r: s.Ranges()}
}

// Equal reports whether s and o hold the same ids.
func (s Set) Equal(o Set) bool {
	if len(s.r) != len(o.r) {
		return false
	}
	for i := range s.r {
		if s.r[i] != o.r[i] {
			return false
		}
	}
	return true
}
