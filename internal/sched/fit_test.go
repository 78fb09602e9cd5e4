package sched

import (
	"strings"
	"testing"
)

// TestFit: the order in which each Fit places jobs, flux-core's
// sched-simple order for worst-fit (t2300-sched-simple).
func TestFit(t *testing.T) {
	alloc := func(p *Pool, req Request) string {
		t.Helper()
		a, err := p.Allocate(&req, 0)
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		return p.Summary(a)
	}
	one := Request{Slots: 1, SlotCores: 1}
	tests := []struct {
		fit  Fit
		reqs []Request
		want []string
	}{
		// 2 nodes of 2 cores: worst-fit alternates, first-fit packs
		{WorstFit, []Request{one, one, one, one}, []string{"rank0/core0", "rank1/core0", "rank0/core1", "rank1/core1"}},
		{FirstFit, []Request{one, one, one, one}, []string{"rank0/core0", "rank0/core1", "rank1/core0", "rank1/core1"}},
		// best-fit fills the fullest node that fits first
		{BestFit, []Request{one, one, one}, []string{"rank0/core0", "rank0/core1", "rank1/core0"}},
		// worst-fit takes a multi-slot job from the emptiest node first
		{WorstFit, []Request{one, {Slots: 3, SlotCores: 1}}, []string{"rank0/core0", "rank1/core[0-1] rank0/core1"}},
		// high-id packs from the last node down, whole nodes too
		{HighID, []Request{one, one, {Slots: 2, SlotCores: 1}}, []string{"rank1/core1", "rank1/core0", "rank0/core[0-1]"}},
		{HighID, []Request{{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}}, []string{"rank1/core[0-1]"}},
		// whole nodes on a uniform pool: rank order
		{WorstFit, []Request{{Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}, {Nodes: 1, Slots: 1, SlotCores: 1, Exclusive: true}},
			[]string{"rank0/core[0-1]", "rank1/core[0-1]"}},
	}
	for _, tc := range tests {
		p := bigPool(t, 2, 2)
		p.SetFit(tc.fit)
		var got []string
		for _, r := range tc.reqs {
			got = append(got, alloc(p, r))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: %q, want %q", tc.fit, got, tc.want)
		}
	}
	// GPUs break a tie in worst-fit; a GPU request goes where GPUs are
	p := testPool(t)
	p.SetFit(WorstFit)
	if got := alloc(p, one); got != "rank2/core0" {
		t.Errorf("worst-fit with GPUs as tie-break: %s, want rank2/core0", got)
	}
	if got := alloc(p, Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}); got != "rank3/core0,gpu0" {
		t.Errorf("worst-fit GPU request: %s, want rank3/core0,gpu0", got)
	}
	for name, want := range map[string]Fit{"low": FirstFit, "lonode": FirstFit, "first": FirstFit, "high": HighID, "hinode": HighID, "locality": BestFit} {
		if f, err := ParseFit(name); err != nil || f != want {
			t.Errorf("ParseFit(%s) = %v, %v; want %v", name, f, err, want)
		}
	}
	for _, s := range []string{"worst-fit", "first-fit", "best-fit", "high-id"} {
		if f, err := ParseFit(s); err != nil || f.String() != s {
			t.Errorf("ParseFit(%s) = %v, %v", s, f, err)
		}
	}
	if _, err := ParseFit("random"); err == nil {
		t.Error("ParseFit(random) accepted")
	}
}

// TestTakeHighest: high-id placement takes the highest free ids, across
// words, within a mask when given.
func TestTakeHighest(t *testing.T) {
	b := newBitset(70)
	b.fill(70)
	b.clear(69)
	dst := newBitset(70)
	if n := b.takeHighest(dst, 3); n != 3 || !dst.has(68) || !dst.has(67) || !dst.has(66) || dst.has(69) {
		t.Errorf("took %d: %v", n, dst)
	}
	mask := newBitset(70)
	mask.set(1)
	mask.set(64)
	dst = newBitset(70)
	if n := b.takeHighestIn(dst, mask, 5); n != 2 || !dst.has(64) || !dst.has(1) {
		t.Errorf("within the mask took %d: %v", n, dst)
	}
	if b.has(64) || b.has(1) || !b.has(0) {
		t.Error("the taken bits are still free, or others were taken")
	}
}
