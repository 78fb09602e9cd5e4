package sched

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// nodesR is ranks lo-hi named node<rank>, each with cores 0..cores-1 and
// gpus 0..gpus-1.
func nodesR(t testing.TB, lo, hi uint, cores, gpus int) *rset.R {
	t.Helper()
	hl, err := hostlist.Parse(fmt.Sprintf("node[%d-%d]", lo, hi))
	if err != nil {
		t.Fatal(err)
	}
	var g idset.Set
	if gpus > 0 {
		g = idset.Range(0, uint(gpus-1))
	}
	r, err := rset.NewNodes(idset.Range(lo, hi), hl, idset.Range(0, uint(cores-1)), g)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustAlloc(t *testing.T, p *Pool, req Request) *Alloc {
	t.Helper()
	a, err := p.Allocate(&req, 0)
	if err != nil {
		t.Fatalf("allocate %s: %v", req.String(), err)
	}
	return a
}

func TestGrowAllocatesOnNewNodes(t *testing.T) {
	p := NewPool(nodesR(t, 0, 1, 2, 0))
	p.SetAvailable(idset.Range(0, 1), true)
	full := mustAlloc(t, p, Request{Slots: 4, SlotCores: 1})
	newProp := &jobspec.Constraint{Op: "properties", Values: []string{"new"}}
	// compiled before the growth: no node has it yet
	if err := p.Feasible(&Request{Slots: 1, SlotCores: 1, Constraint: newProp}); !errors.Is(err, ErrUnsatisfiable) {
		t.Fatalf("constraint before growth: %v", err)
	}
	if err := p.Feasible(&Request{Slots: 1, SlotCores: 4}); !errors.Is(err, ErrUnsatisfiable) {
		t.Fatalf("4 cores before growth: %v", err)
	}

	grown := nodesR(t, 2, 3, 4, 1)
	grown.SetProperty("new", idset.Range(2, 3))
	if err := p.Grow(grown); err != nil {
		t.Fatal(err)
	}
	if got := p.Inventory().Ranks().String(); got != "0-3" {
		t.Fatalf("inventory ranks %s", got)
	}
	if p.NumNodes() != 4 {
		t.Fatalf("%d nodes", p.NumNodes())
	}
	if cores, free, gpus, freeGPUs := p.Counts(); cores != 12 || free != 0 || gpus != 2 || freeGPUs != 0 {
		t.Fatalf("counts %d/%d cores %d/%d gpus", free, cores, freeGPUs, gpus)
	}
	if got := p.Unavailable().String(); got != "2-3" {
		t.Fatalf("unavailable %s: grown nodes start down", got)
	}
	if err := p.Feasible(&Request{Slots: 1, SlotCores: 4}); err != nil {
		t.Fatalf("4 cores after growth: %v", err)
	}
	if _, err := p.Allocate(&Request{Slots: 1, SlotCores: 1}, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("allocate on down grown nodes: %v", err)
	}
	if got := p.SetAvailable(idset.Range(2, 3), true).String(); got != "2-3" {
		t.Fatalf("up changed %s", got)
	}
	a := mustAlloc(t, p, Request{Slots: 1, SlotCores: 4})
	if got := p.Summary(a); got != "rank2/core[0-3]" {
		t.Fatalf("4-core slot on %s", got)
	}
	b := mustAlloc(t, p, Request{Slots: 1, SlotCores: 1, Constraint: newProp})
	if got := p.Summary(b); got != "rank3/core0" {
		t.Fatalf("constrained slot on %s", got)
	}
	R, err := rset.Parse(p.AppendR(nil, a))
	if err != nil {
		t.Fatal(err)
	}
	if got := R.Nodelist().String(); got != "node2" {
		t.Fatalf("nodelist %s", got)
	}
	for _, al := range []*Alloc{full, a} {
		if err := p.Free(al); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGrowRefusesPresentRank(t *testing.T) {
	p := testPool(t)
	err := p.Grow(nodesR(t, 3, 4, 4, 0))
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "rank 3") {
		t.Fatalf("grow over rank 3: %v", err)
	}
	if p.NumNodes() != 4 || p.Inventory().Ranks().String() != "0-3" {
		t.Fatalf("pool changed by a refused grow: %d nodes, %s", p.NumNodes(), p.Inventory().Ranks())
	}
}

func TestShrink(t *testing.T) {
	p := testPool(t)
	a := mustAlloc(t, p, Request{Slots: 1, SlotCores: 1, Constraint: &jobspec.Constraint{Op: "ranks", Values: []string{"3"}}})
	err := p.Shrink(idset.Range(2, 3))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "rank 3") {
		t.Fatalf("shrink of allocated rank 3: %v", err)
	}
	if err := p.Shrink(idset.New(7)); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "rank 7") {
		t.Fatalf("shrink of unknown rank 7: %v", err)
	}
	if p.NumNodes() != 4 {
		t.Fatalf("refused shrinks changed the pool: %d nodes", p.NumNodes())
	}
	// rank 1 goes while rank 3 above it is allocated: a placeholder
	if err := p.Shrink(idset.New(1)); err != nil {
		t.Fatal(err)
	}
	if p.NumNodes() != 3 || p.Inventory().Ranks().String() != "0,2-3" || p.Available().String() != "0,2-3" || p.Unavailable().String() != "" {
		t.Fatalf("after shrink: %d nodes, inventory %s, available %s, unavailable %s",
			p.NumNodes(), p.Inventory().Ranks(), p.Available(), p.Unavailable())
	}
	if cores, free, _, _ := p.Counts(); cores != 12 || free != 11 {
		t.Fatalf("counts %d/%d", free, cores)
	}
	if got := p.Summary(a); got != "rank3/core0" {
		t.Fatalf("allocation moved: %s", got)
	}
	// rank 1 comes back into its place; rank 2 cannot go under rank 3
	// while rank 3 is allocated, once it is gone
	if err := p.Grow(nodesR(t, 1, 1, 8, 0)); err != nil {
		t.Fatal(err)
	}
	p.SetAvailable(idset.New(1), true)
	b := mustAlloc(t, p, Request{Slots: 1, SlotCores: 8})
	if got := p.Summary(b); got != "rank1/core[0-7]" {
		t.Fatalf("8 cores on %s", got)
	}
	if err := p.Shrink(idset.New(2)); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	// rank 3 is idle now: a lower rank may be inserted under it
	if err := p.Shrink(idset.New(0)); err != nil {
		t.Fatal(err)
	}
	if got := p.Inventory().Ranks().String(); got != "1,3" {
		t.Fatalf("inventory %s", got)
	}
	c := mustAlloc(t, p, Request{Slots: 1, SlotCores: 2, SlotGPUs: 1})
	err = p.Grow(nodesR(t, 2, 2, 4, 0))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "rank 2") {
		t.Fatalf("grow under allocated rank 3: %v", err)
	}
	if err := p.Free(c); err != nil {
		t.Fatal(err)
	}
	if err := p.Grow(nodesR(t, 2, 2, 4, 0)); err != nil {
		t.Fatalf("grow under idle rank 3: %v", err)
	}
	if err := p.Free(b); err != nil {
		t.Fatal(err)
	}
	// rank 0's placeholder stays until the next change finds nothing
	// allocated above it
	if len(p.nodes) != 4 {
		t.Fatalf("%d node places for ranks %s", len(p.nodes), p.Inventory().Ranks())
	}
	if err := p.Shrink(idset.New(3)); err != nil {
		t.Fatal(err)
	}
	if len(p.nodes) != 2 || p.Inventory().Ranks().String() != "1-2" {
		t.Fatalf("%d node places for ranks %s", len(p.nodes), p.Inventory().Ranks())
	}
}

// TestGrowShrinkRandom runs random grows, shrinks, availability changes,
// allocations and frees against a model of the nodes, checking that
// every allocation keeps its node, that refusals are the ones the model
// predicts and that the indexes agree with the nodes.
func TestGrowShrinkRandom(t *testing.T) {
	type live struct {
		a     *Alloc
		rank  uint
		cores int
	}
	rng := rand.New(rand.NewPCG(7, 51))
	model := map[uint]*mnode{}
	p := NewPool(rset.New())
	var allocs []live
	maxRank := func() int {
		m := -1
		for r := range model {
			m = max(m, int(r))
		}
		return m
	}
	for step := range 4000 {
		switch op := rng.IntN(10); {
		case op < 2: // grow
			rank := uint(maxRank() + 1 + rng.IntN(2))
			if rng.IntN(3) == 0 {
				rank = uint(rng.IntN(maxRank() + 3))
			}
			if model[rank] != nil {
				continue
			}
			cores := 1 + rng.IntN(4)
			err := p.Grow(nodesR(t, rank, rank, cores, 0))
			if err != nil {
				busyAbove := false
				for r, n := range model {
					busyAbove = busyAbove || r > rank && n.free < n.cores
				}
				if !errors.Is(err, ErrBusy) || !busyAbove {
					t.Fatalf("step %d: grow rank %d: %v", step, rank, err)
				}
				continue
			}
			model[rank] = &mnode{cores: cores, free: cores}
		case op < 4: // shrink
			rank := uint(rng.IntN(maxRank() + 2))
			err := p.Shrink(idset.New(rank))
			n := model[rank]
			switch {
			case n == nil:
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("step %d: shrink unknown rank %d: %v", step, rank, err)
				}
			case n.free < n.cores:
				if !errors.Is(err, ErrBusy) {
					t.Fatalf("step %d: shrink allocated rank %d: %v", step, rank, err)
				}
			case err != nil:
				t.Fatalf("step %d: shrink rank %d: %v", step, rank, err)
			default:
				delete(model, rank)
			}
		case op < 6: // up or down
			rank := uint(rng.IntN(maxRank() + 2))
			up := rng.IntN(3) != 0
			p.SetAvailable(idset.New(rank), up)
			if n := model[rank]; n != nil {
				n.up = up
			}
		case op < 8: // allocate one slot, first fit
			c := 1 + rng.IntN(3)
			a, err := p.Allocate(&Request{Slots: 1, SlotCores: c}, 0)
			want, found := uint(0), false
			for r, n := range model {
				if n.up && n.free >= c && (!found || r < want) {
					want, found = r, true
				}
			}
			switch {
			case !found:
				if !errors.Is(err, ErrBusy) {
					t.Fatalf("step %d: allocate %d cores: %v, want busy", step, c, err)
				}
			case err != nil:
				t.Fatalf("step %d: allocate %d cores: %v, want rank %d", step, c, err, want)
			case p.Ranks(a).String() != idset.New(want).String():
				t.Fatalf("step %d: %d cores on %s, want rank %d", step, c, p.Ranks(a), want)
			default:
				model[want].free -= c
				allocs = append(allocs, live{a, want, c})
			}
		default: // free
			if len(allocs) == 0 {
				continue
			}
			k := rng.IntN(len(allocs))
			l := allocs[k]
			if err := p.Free(l.a); err != nil {
				t.Fatalf("step %d: free: %v", step, err)
			}
			model[l.rank].free += l.cores
			allocs = slices.Delete(allocs, k, k+1)
		}
		checkModel(t, step, p, model)
		for _, l := range allocs {
			if got := p.Ranks(l.a).String(); got != idset.New(l.rank).String() || l.a.NCores() != l.cores {
				t.Fatalf("step %d: allocation of %d cores on rank %d is now %d on %s", step, l.cores, l.rank, l.a.NCores(), got)
			}
		}
	}
}

// mnode is a node of TestGrowShrinkRandom's model.
type mnode struct {
	cores, free int
	up          bool
}

// checkModel compares the pool with the model's nodes.
func checkModel(t *testing.T, step int, p *Pool, model map[uint]*mnode) {
	t.Helper()
	var ranks, up idset.Set
	var cores, free, largest int
	for r, n := range model {
		ranks.Add(r)
		cores += n.cores
		largest = max(largest, n.cores)
		if n.up {
			up.Add(r)
			free += n.free
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d: "+format, append([]any{step}, args...)...)
	}
	if p.NumNodes() != ranks.Count() || p.Inventory().Ranks().String() != ranks.String() {
		fail("pool has %d nodes, inventory %s; model %s", p.NumNodes(), p.Inventory().Ranks(), ranks)
	}
	if gotCores, gotFree, _, _ := p.Counts(); gotCores != cores || gotFree != free {
		fail("counts %d/%d cores, model %d/%d", gotFree, gotCores, free, cores)
	}
	if p.Available().String() != up.String() || p.Unavailable().String() != ranks.Difference(up).String() {
		fail("available %s unavailable %s, model up %s of %s", p.Available(), p.Unavailable(), up, ranks)
	}
	last := -1
	for i := range p.nodes {
		nd := &p.nodes[i]
		if int(nd.rank) <= last {
			fail("node %d: rank %d after rank %d", i, nd.rank, last)
		}
		last = int(nd.rank)
		want := nd.nCores
		if nd.gone || !p.avail.has(i) {
			want = 0
		}
		if p.freeCores.get(i) != want || (nd.gone && p.totCores.get(i) != 0) || int(nd.nCores) != nd.coreFree.count() {
			fail("node %d (rank %d) index out of date", i, nd.rank)
		}
	}
	if largest > 0 {
		if err := p.Feasible(&Request{Slots: 1, SlotCores: largest}); err != nil {
			fail("largest node: %v", err)
		}
	}
	if err := p.Feasible(&Request{Slots: 1, SlotCores: largest + 1}); !errors.Is(err, ErrUnsatisfiable) {
		fail("beyond the largest node: %v", err)
	}
}
