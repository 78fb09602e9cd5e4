package rset

import (
	"cmp"
	"slices"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// rng is an inclusive range of ranks.
type rng struct{ lo, hi uint }

// builder collects rank ranges per distinct children and turns them into
// groups. Callers guarantee that no rank is added twice.
type builder struct {
	idx    map[string]int
	chs    []children
	ranges [][]rng
}

// slot returns the index for children ch, adding it if new.
func (b *builder) slot(ch children) int {
	k := ch.key()
	if i, ok := b.idx[k]; ok {
		return i
	}
	if b.idx == nil {
		b.idx = make(map[string]int)
	}
	b.idx[k] = len(b.chs)
	b.chs = append(b.chs, ch)
	b.ranges = append(b.ranges, nil)
	return len(b.chs) - 1
}

func (b *builder) add(slot int, lo, hi uint) {
	rs := b.ranges[slot]
	if n := len(rs); n > 0 && rs[n-1].hi+1 == lo && rs[n-1].hi < lo {
		rs[n-1].hi = hi
		return
	}
	b.ranges[slot] = append(rs, rng{lo, hi})
}

func (b *builder) addSet(slot int, s idset.Set) {
	for _, r := range s.Ranges() {
		b.add(slot, r.Lo, r.Hi)
	}
}

// overlaps reports whether a rank was added twice (add merges only a
// range that starts just after the last one, so two ranges share a rank
// exactly when two added ranges did). It may sort each slot's ranges.
func (b *builder) overlaps() bool {
	var all []rng
	switch len(b.ranges) {
	case 0:
		return false
	case 1:
		all = b.ranges[0]
	default:
		n := 0
		for _, rs := range b.ranges {
			n += len(rs)
		}
		all = make([]rng, 0, n)
		for _, rs := range b.ranges {
			all = append(all, rs...)
		}
	}
	if !slices.IsSortedFunc(all, cmpRng) {
		slices.SortFunc(all, cmpRng)
	}
	for i := 1; i < len(all); i++ {
		if all[i].lo <= all[i-1].hi {
			return true
		}
	}
	return false
}

// build returns one group per children that received ranks.
func (b *builder) build() []group {
	gs := make([]group, 0, len(b.chs))
	for i, ch := range b.chs {
		rs := b.ranges[i]
		if len(rs) == 0 {
			continue
		}
		if !slices.IsSortedFunc(rs, cmpRng) {
			slices.SortFunc(rs, cmpRng)
		}
		var s idset.Set
		for _, r := range rs {
			s.AddRange(r.lo, r.hi)
		}
		gs = append(gs, group{ranks: s, ch: ch})
	}
	return gs
}

func cmpRng(a, b rng) int { return cmp.Compare(a.lo, b.lo) }

// spansOf returns the ranges of s as spans of group 0.
func spansOf(s idset.Set) []span {
	rs := s.Ranges()
	sp := make([]span, len(rs))
	for i, r := range rs {
		sp[i] = span{lo: r.Lo, hi: r.Hi}
	}
	return sp
}

// overlay walks two sorted, disjoint span lists together and calls emit
// for each run of ranks [lo, hi] that lies in one span of a (index ia, or
// -1) and one span of b (ib, or -1), in ascending order.
func overlay(a, b []span, emit func(lo, hi uint, ia, ib int)) {
	i, j := 0, 0
	var alo, blo uint
	if len(a) > 0 {
		alo = a[0].lo
	}
	if len(b) > 0 {
		blo = b[0].lo
	}
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].hi < blo):
			emit(alo, a[i].hi, i, -1)
			if i++; i < len(a) {
				alo = a[i].lo
			}
		case i == len(a) || b[j].hi < alo:
			emit(blo, b[j].hi, -1, j)
			if j++; j < len(b) {
				blo = b[j].lo
			}
		case alo < blo:
			emit(alo, blo-1, i, -1)
			alo = blo
		case blo < alo:
			emit(blo, alo-1, -1, j)
			blo = alo
		default:
			end := min(a[i].hi, b[j].hi)
			emit(alo, end, i, j)
			if a[i].hi == end {
				if i++; i < len(a) {
					alo = a[i].lo
				}
			} else {
				alo = end + 1
			}
			if b[j].hi == end {
				if j++; j < len(b) {
					blo = b[j].lo
				}
			} else {
				blo = end + 1
			}
		}
	}
}
