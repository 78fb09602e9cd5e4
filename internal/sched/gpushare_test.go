package sched

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func sharedPool(t *testing.T, nodes int, cores, gpus string, share int) *Pool {
	t.Helper()
	hl, _ := hostlist.Parse(fmt.Sprintf("node[0-%d]", nodes-1))
	r, err := rset.NewNodes(idset.Range(0, uint(nodes-1)), hl, idset.MustParse(cores), idset.MustParse(gpus))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPoolShared(r, share)
	if err != nil {
		t.Fatal(err)
	}
	p.SetAvailable(idset.Range(0, uint(nodes-1)), true)
	return p
}

// gpusOf returns the GPU ids of a's R.
func gpusOf(t *testing.T, p *Pool, a *Alloc) idset.Set {
	t.Helper()
	r, err := rset.Parse(p.AppendR(nil, a))
	if err != nil {
		t.Fatal(err)
	}
	var g idset.Set
	for n := range r.All() {
		g = g.Union(n.GPUs)
	}
	return g
}

// TestGPUShare: with gpu-share=2 each GPU goes to two jobs at once,
// never more, and never twice to one job; without it, to one.
func TestGPUShare(t *testing.T) {
	for _, share := range []int{1, 2, 3} {
		p := sharedPool(t, 1, "0-15", "0-3", share)
		uses := map[uint]int{}
		var got []*Alloc
		for {
			a, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}, 0)
			if err != nil {
				if !errors.Is(err, ErrBusy) {
					t.Fatal(err)
				}
				break
			}
			for id := range gpusOf(t, p, a).All() {
				uses[id]++
			}
			got = append(got, a)
		}
		if len(got) != 4*share {
			t.Errorf("share %d: %d one-GPU jobs fit, want %d", share, len(got), 4*share)
		}
		for id, n := range uses {
			if n != share {
				t.Errorf("share %d: GPU %d given to %d jobs", share, id, n)
			}
		}
		// everything back
		for _, a := range got {
			if err := p.Free(a); err != nil {
				t.Fatal(err)
			}
		}
		// a slot of 3 GPUs gets 3 different ones, share after share
		for range share {
			a, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 3}, 0)
			if err != nil {
				t.Fatalf("share %d: 3-GPU slot: %v", share, err)
			}
			if g := gpusOf(t, p, a); g.Count() != 3 {
				t.Errorf("share %d: a 3-GPU slot got GPUs %s", share, g)
			}
		}
		// left: share free shares of GPU 3 only, not 2 different GPUs
		if _, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 2}, 0); !errors.Is(err, ErrBusy) {
			t.Errorf("share %d: a 2-GPU slot with one GPU's shares free: %v", share, err)
		}
		// feasibility counts GPUs, not shares
		if err := p.Feasible(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 5}); !errors.Is(err, ErrUnsatisfiable) ||
			!strings.Contains(err.Error(), "requested 5 GPUs per slot but the largest node of the instance has 4") {
			t.Errorf("share %d: a 5-GPU slot on a 4-GPU node: %v", share, err)
		}
		if err := p.Feasible(&Request{Nodes: 1, Slots: 1, SlotCores: 1, SlotGPUs: 5, Exclusive: true}); !errors.Is(err, ErrUnsatisfiable) {
			t.Errorf("share %d: an exclusive 5-GPU node: %v", share, err)
		}
	}
}

// TestGPUShareExclusive: a node-exclusive job takes every share, and a
// node with a share taken is not idle.
func TestGPUShareExclusive(t *testing.T) {
	p := sharedPool(t, 2, "0-3", "0-1", 2)
	x, err := p.Allocate(&Request{Nodes: 1, Slots: 1, SlotCores: 4, SlotGPUs: 2, Exclusive: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g := gpusOf(t, p, x); g.String() != "0-1" {
		t.Errorf("exclusive node's GPUs %s", g)
	}
	// R lists each GPU once (QA found "0,0-1,1")
	if R := string(p.AppendR(nil, x)); !strings.Contains(R, `"gpu":"0-1"`) {
		t.Errorf("exclusive node's R: %s", R)
	}
	one, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Ranks(one).Equal(p.Ranks(x)) {
		t.Fatal("a share of the exclusive node's GPU was given out")
	}
	if _, err := p.Allocate(&Request{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}, 0); !errors.Is(err, ErrBusy) {
		t.Errorf("a node with a GPU share taken given exclusively: %v", err)
	}
}

// TestGPUShareFromR: jobs restored from their R (a restart) claim a
// share each of the GPUs they name; freeing part of a job releases its
// own shares.
func TestGPUShareFromR(t *testing.T) {
	p := sharedPool(t, 1, "0-3", "0-1", 2)
	R := func(core, gpus string) *rset.R {
		hl, _ := hostlist.Parse("node0")
		r, err := rset.NewNodes(idset.Range(0, 0), hl, idset.MustParse(core), idset.MustParse(gpus))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var held []*Alloc
	for _, core := range []string{"0", "1"} {
		a, err := p.AllocFromR(R(core, "0-1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Claim(a); err != nil {
			t.Fatalf("two jobs on GPUs 0-1 with share 2: %v", err)
		}
		held = append(held, a)
	}
	a, _ := p.AllocFromR(R("2", "0"))
	if err := p.Claim(a); !errors.Is(err, ErrConflict) {
		t.Errorf("a third share of GPU 0: %v", err)
	}
	// the second job gives back GPU 1: its share, not the first job's
	part, err := p.AllocWithin(R("1", "1"), held[1])
	if err != nil || !held[1].Contains(part) {
		t.Fatalf("part of the second job: %v", err)
	}
	if err := p.Free(part); err != nil {
		t.Fatal(err)
	}
	held[1].Remove(part)
	for _, a := range held {
		if err := p.Free(a); err != nil {
			t.Fatal(err)
		}
	}
	if _, free, _, gfree := p.Counts(); free != 4 || gfree != 4 {
		t.Errorf("after freeing everything: %d cores, %d GPU shares free", free, gfree)
	}
}

// TestGPUShareNUMA: shared GPUs keep a slot's cores and GPU in one
// domain.
func TestGPUShareNUMA(t *testing.T) {
	tp := topologies[0] // corona
	p0, doms := numaPool(t, 1, tp.cores, tp.gpus, tp.domains)
	r := p0.Inventory()
	p, err := NewPoolShared(r, 2)
	if err != nil {
		t.Fatal(err)
	}
	p.SetAvailable(idset.Range(0, 0), true)
	for range 16 { // 8 GPUs x 2 shares
		a := numaAlloc(t, p, Request{Slots: 1, SlotCores: 2, SlotGPUs: 1})
		if _, _, in := placed(t, p, a, doms); len(in) != 1 {
			t.Fatalf("a -c2 -g1 slot in domains %v", in)
		}
	}
	if _, err := p.Allocate(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}, 0); !errors.Is(err, ErrBusy) {
		t.Errorf("a 17th share of 8 GPUs: %v", err)
	}
}

func TestGPUShareInvalid(t *testing.T) {
	for _, n := range []int{0, -1, MaxGPUShare + 1} {
		if _, err := NewPoolShared(rset.New(), n); !errors.Is(err, ErrInvalid) {
			t.Errorf("share %d: %v", n, err)
		}
	}
}
