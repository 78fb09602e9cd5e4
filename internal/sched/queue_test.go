package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestQueueOrder(t *testing.T) {
	q := NewQueue()
	add := func(id uint64, prio int64, ts float64) {
		if err := q.Add(&Job{ID: id, Priority: prio, TSubmit: ts}); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 16, 3)
	add(2, 16, 1)
	add(3, 20, 5)
	add(4, 16, 1) // same time as 2: lower id first
	add(5, 0, 0)
	if err := q.Add(&Job{ID: 3}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	order := func() []uint64 {
		var ids []uint64
		for j := range q.All() {
			ids = append(ids, j.ID)
		}
		return ids
	}
	if got := order(); !slices.Equal(got, []uint64{3, 2, 4, 1, 5}) {
		t.Fatalf("order %v", got)
	}
	q.SetPriority(5, 30)
	if q.Remove(2) == nil || q.Remove(2) != nil {
		t.Fatal("remove")
	}
	if got := order(); !slices.Equal(got, []uint64{5, 3, 4, 1}) || q.Len() != 4 {
		t.Fatalf("order %v", got)
	}
	if q.Position(4, 10) != 2 || q.Position(1, 2) != -1 {
		t.Fatal("position")
	}
}

// TestQueueRandom checks the skip list against a sorted slice.
func TestQueueRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	q := NewQueue()
	var ref []*Job
	for i := 0; i < 20000; i++ {
		switch op := rng.IntN(10); {
		case op < 5 || len(ref) == 0:
			j := &Job{ID: uint64(i), Priority: int64(rng.IntN(5)), TSubmit: float64(rng.IntN(100))}
			q.Add(j)
			ref = append(ref, j)
		case op < 8:
			k := rng.IntN(len(ref))
			q.Remove(ref[k].ID)
			ref = append(ref[:k], ref[k+1:]...)
		default:
			k := rng.IntN(len(ref))
			q.SetPriority(ref[k].ID, int64(rng.IntN(5)))
		}
	}
	slices.SortFunc(ref, func(a, b *Job) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	k := 0
	for j := range q.All() {
		if j != ref[k] {
			t.Fatalf("position %d: job %d, want %d", k, j.ID, ref[k].ID)
		}
		k++
	}
	if k != len(ref) || q.Len() != len(ref) {
		t.Fatalf("%d jobs, want %d", k, len(ref))
	}
}

func TestMaxTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 300
	m := newMaxTree(n)
	vals := make([]int32, n)
	for iter := 0; iter < 20000; iter++ {
		i := rng.IntN(n)
		vals[i] = int32(rng.IntN(10))
		m.set(i, vals[i])
		from, need := rng.IntN(n+5), int32(rng.IntN(11))
		want := -1
		for k := from; k < n; k++ {
			if vals[k] >= need {
				want = k
				break
			}
		}
		if got := m.first(from, need); got != want {
			t.Fatalf("first(%d, %d) = %d, want %d", from, need, got, want)
		}
	}
}

func TestBitset(t *testing.T) {
	b := newBitset(130)
	b.fill(130)
	if b.count() != 130 || b.next(129) != 129 || b.next(130) != -1 {
		t.Fatal("fill")
	}
	b.not(130)
	if b.count() != 0 || b.next(0) != -1 {
		t.Fatal("not")
	}
	b.set(70)
	b.set(3)
	dst := newBitset(130)
	if b.takeLowest(dst, 5) != 2 || dst.next(0) != 3 || dst.next(4) != 70 || b.count() != 0 {
		t.Fatal("takeLowest")
	}
}
