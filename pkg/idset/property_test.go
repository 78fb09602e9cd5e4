package idset

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the obvious map-based set the Set operations are checked
// against.
type model map[uint]bool

func (m model) sorted() []uint {
	var ids []uint
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// randomSet returns a Set built from random ranges and removals, and the
// model holding the same ids. Ids stay below 200 so that sets overlap.
func randomSet(r *rand.Rand) (Set, model) {
	var s Set
	m := model{}
	for range r.IntN(8) {
		lo := uint(r.IntN(200))
		hi := lo + uint(r.IntN(20))
		if r.IntN(4) == 0 {
			s.RemoveRange(lo, hi)
			for id := lo; id <= hi; id++ {
				delete(m, id)
			}
		} else {
			s.AddRange(lo, hi)
			for id := lo; id <= hi; id++ {
				m[id] = true
			}
		}
	}
	return s, m
}

func TestPropertiesAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a, ma := randomSet(r)
		b, mb := randomSet(r)
		checkModel := func(op string, got Set, want model) {
			t.Helper()
			checkInvariant(t, got)
			if g, w := slices.Collect(got.All()), want.sorted(); !slices.Equal(g, w) {
				t.Fatalf("case %d: %s: a=%q b=%q: got %v, want %v", i, op, a, b, g, w)
			}
			if got.Count() != len(want) {
				t.Fatalf("case %d: %s: Count() = %d, want %d", i, op, got.Count(), len(want))
			}
		}
		union, inter, diff := model{}, model{}, model{}
		for id := range ma {
			union[id] = true
			if mb[id] {
				inter[id] = true
			} else {
				diff[id] = true
			}
		}
		for id := range mb {
			union[id] = true
		}
		checkModel("a", a, ma)
		checkModel("Union", a.Union(b), union)
		checkModel("Intersect", a.Intersect(b), inter)
		checkModel("Difference", a.Difference(b), diff)

		// Laws.
		if !a.Union(b).Equal(b.Union(a)) {
			t.Fatalf("case %d: union does not commute", i)
		}
		if !a.Intersect(b).Equal(b.Intersect(a)) {
			t.Fatalf("case %d: intersection does not commute", i)
		}
		if !a.Difference(b).Union(a.Intersect(b)).Equal(a) {
			t.Fatalf("case %d: (a-b) | (a&b) != a", i)
		}
		if !a.Difference(b).Intersect(b).Empty() {
			t.Fatalf("case %d: (a-b) & b is not empty", i)
		}
		if !a.Union(b).Difference(b).Equal(a.Difference(b)) {
			t.Fatalf("case %d: (a|b)-b != a-b", i)
		}

		// Queries.
		ids := ma.sorted()
		for n, id := range ids {
			if got, ok := a.Nth(n); !ok || got != id {
				t.Fatalf("case %d: Nth(%d) = %d, %v; want %d", i, n, got, ok, id)
			}
		}
		for id := uint(0); id < 230; id++ {
			if a.Contains(id) != ma[id] {
				t.Fatalf("case %d: Contains(%d) = %v", i, id, !ma[id])
			}
		}
		// Round trip through the string form, and New from the ids.
		if p := MustParse(a.String()); !p.Equal(a) {
			t.Fatalf("case %d: Parse(%q) = %q", i, a, p)
		}
		if n := New(ids...); !n.Equal(a) {
			t.Fatalf("case %d: New(%v) = %q, want %q", i, ids, n, a)
		}
	}
}
