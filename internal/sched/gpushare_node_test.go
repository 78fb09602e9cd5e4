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

// queuePool is 4 nodes of 4 cores and 2 GPUs; ranks 0-1 have property
// "ml".
func queuePool(t *testing.T, s GPUShares) *Pool {
	t.Helper()
	hl, _ := hostlist.Parse("node[0-3]")
	r, err := rset.NewNodes(idset.Range(0, 3), hl, idset.MustParse("0-3"), idset.MustParse("0-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetProperty("ml", idset.Range(0, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := NewPoolShares(r, s)
	if err != nil {
		t.Fatal(err)
	}
	p.SetAvailable(idset.Range(0, 3), true)
	return p
}

// fill allocates 1-core 1-GPU jobs needing props until one does not fit
// and returns how many did, checking none holds two shares of a GPU.
func fill(t *testing.T, p *Pool, props ...string) int {
	t.Helper()
	n := 0
	for ; n < 100; n++ {
		req := &Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}
		req.RequireProperties(props)
		a, err := p.Allocate(req, 0)
		if errors.Is(err, ErrBusy) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if g := gpusOf(t, p, a); g.Count() != 1 {
			t.Fatalf("a 1-GPU job got GPUs %s", g)
		}
	}
	t.Fatal("no end to the jobs")
	return n
}

// TestGPUShareByQueue: the queue whose nodes share (ml, 2 jobs a GPU)
// runs 4 1-GPU jobs on each of its 2-GPU nodes; the other queue's
// nodes (batch, not shared) run 2; a node in both a shared and an
// unshared queue does not share; grown nodes take their queue's share.
func TestGPUShareByQueue(t *testing.T) {
	shares := GPUShares{Default: 1, Rules: []ShareRule{
		{Name: "queues.ml", Requires: []string{"ml"}, Share: 2},
		{Name: "queues.batch", Requires: []string{"^ml"}, Share: 1},
	}}
	p := queuePool(t, shares)
	for rank, want := range []int{2, 2, 1, 1} {
		if got := p.NodeGPUShare(uint32(rank)); got != want {
			t.Errorf("rank %d: share %d, want %d", rank, got, want)
		}
	}
	if p.GPUShare() != 2 || p.NumGPUs() != 8 {
		t.Errorf("pool share %d, GPUs %d; want 2 and 8", p.GPUShare(), p.NumGPUs())
	}
	if got := fill(t, p, "ml"); got != 8 {
		t.Errorf("ml (shared by 2): %d 1-GPU jobs on 2 nodes of 2 GPUs, want 8", got)
	}
	if got := fill(t, p, "^ml"); got != 4 {
		t.Errorf("batch (not shared): %d 1-GPU jobs on 2 nodes of 2 GPUs, want 4", got)
	}
	// feasibility counts GPUs on every node: a 3-GPU slot never fits
	if err := p.Feasible(&Request{Slots: 1, SlotCores: 1, SlotGPUs: 3}); !errors.Is(err, ErrUnsatisfiable) {
		t.Errorf("3 GPUs on 2-GPU nodes: %v", err)
	}

	// a queue over every node that does not share: no node shares
	both := GPUShares{Default: 2, Rules: []ShareRule{
		{Name: "queues.ml", Requires: []string{"ml"}, Share: 2},
		{Name: "queues.all", Share: 1},
	}}
	p = queuePool(t, both)
	if got := fill(t, p, "ml"); got != 4 {
		t.Errorf("ml nodes also in an unshared queue: %d 1-GPU jobs, want 4 (not shared)", got)
	}

	// grow: a new ml node shares, a new plain one does not
	p = queuePool(t, shares)
	hl, _ := hostlist.Parse("node[4-5]")
	r, err := rset.NewNodes(idset.Range(4, 5), hl, idset.MustParse("0-3"), idset.MustParse("0-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetProperty("ml", idset.New(4)); err != nil {
		t.Fatal(err)
	}
	if err := p.Grow(r); err != nil {
		t.Fatal(err)
	}
	if a, b := p.NodeGPUShare(4), p.NodeGPUShare(5); a != 2 || b != 1 {
		t.Errorf("grown nodes' shares %d and %d, want 2 (ml) and 1", a, b)
	}
}

// TestGPUSharesValidate: a share out of range is refused naming the rule.
func TestGPUSharesValidate(t *testing.T) {
	for _, s := range []GPUShares{
		{Default: 0},
		{Default: 1, Rules: []ShareRule{{Name: "queues.ml", Share: MaxGPUShare + 1}}},
		{Default: 1, Rules: []ShareRule{{Name: "queues.ml", Share: 0}}},
	} {
		_, err := NewPoolShares(rset.New(), s)
		if err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", s, err)
		}
		if len(s.Rules) > 0 && err != nil && !strings.Contains(err.Error(), fmt.Sprintf("queues.ml: gpu-share=%d", s.Rules[0].Share)) {
			t.Errorf("error %q does not name the rule", err)
		}
	}
}

// TestAllocatedShares: the status report (flux resource list) shows a
// shared GPU allocated only when every share of it is taken.
func TestAllocatedShares(t *testing.T) {
	p := sharedPool(t, 1, "0-3", "0-1", 2)
	summary := func() string { return p.Summary(p.Allocated()) }
	a := numaAlloc(t, p, Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}) // a share of GPU 0
	if got := summary(); got != "rank0/core0" {
		t.Errorf("one share of GPU 0 taken: allocated %q, want rank0/core0 (GPU 0 can still be given)", got)
	}
	b := numaAlloc(t, p, Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}) // GPU 0's second share
	c := numaAlloc(t, p, Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}) // a share of GPU 1
	if got := summary(); got != "rank0/core[0-2],gpu[0]" {
		t.Errorf("three shares of two GPUs: allocated %q, want rank0/core[0-2],gpu[0] (GPU 0 whole, GPU 1 has a share free)", got)
	}
	for _, x := range []*Alloc{a, b, c} {
		if err := p.Free(x); err != nil {
			t.Fatal(err)
		}
	}
	if got := summary(); got != "" {
		t.Errorf("all freed: allocated %q", got)
	}
}
