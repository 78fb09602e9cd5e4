package sched

import (
	"fmt"
	"slices"
)

// Fit is how Allocate chooses among the nodes that can hold a request.
type Fit uint8

const (
	// FirstFit takes the lowest ranks that can hold the request,
	// packing jobs onto the first nodes. The package's default.
	FirstFit Fit = iota
	// WorstFit takes the nodes with the most free cores first (then the
	// most free GPUs, then the lowest rank), spreading jobs over the
	// nodes: flux-core's sched-simple default, and fluxgo's.
	WorstFit
	// BestFit takes the nodes with the fewest free cores that still
	// hold the request first (then the lowest rank), keeping whole nodes
	// free for larger jobs.
	BestFit
	// HighID takes the highest ranks that can hold the request, packing
	// jobs onto the last nodes and, on a node, its highest core ids (Fluxion's "high" match policy), so that
	// jobs placed low-first and high-first meet in the middle.
	HighID
)

// fitNames are the alloc-mode names: sched-simple's, then Fluxion's
// match-policy names for the same orders ("low"/"lonode" and "first"
// are first-fit, "high"/"hinode" high-id, "locality", which packs jobs
// into the fewest free resources, best-fit).
var fitNames = map[string]Fit{
	"worst-fit": WorstFit, "first-fit": FirstFit, "best-fit": BestFit, "high-id": HighID,
	"first": FirstFit, "low": FirstFit, "lonode": FirstFit, "high": HighID, "hinode": HighID, "locality": BestFit,
}

// ParseFit reads an alloc-mode name (fitNames).
func ParseFit(s string) (Fit, error) {
	if f, ok := fitNames[s]; ok {
		return f, nil
	}
	return 0, fmt.Errorf("%w: alloc-mode %q: want worst-fit, first-fit, best-fit or high-id (or Fluxion's first, low, lonode, high, hinode, locality)", ErrInvalid, s)
}

func (f Fit) String() string {
	return [...]string{"first-fit", "worst-fit", "best-fit", "high-id"}[f]
}

// SetFit sets how Allocate places requests (FirstFit by default).
// Feasibility does not depend on it.
func (p *Pool) SetFit(f Fit) { p.fit = f }

// findFit is find for the free resources under the pool's Fit.
func (p *Pool) findFit(v view, req *Request, m *mask, picks []pick) []pick {
	if p.fit == FirstFit {
		return p.find(v, req, m, picks)
	}
	c, g := int32(req.SlotCores), int32(req.SlotGPUs)
	switch {
	case req.Exclusive && p.uniform && p.fit != HighID:
		// whole idle nodes that are all alike: every order but rank's
		// is a tie
		return p.find(v, req, m, picks)
	case p.fit == WorstFit && req.Nodes == 0 && req.Slots == 1 && g == 0 && p.nGPUs == 0 && m == nil:
		// one slot: the leftmost node with the most free cores
		best := v.cores.max()
		if best < c {
			return nil
		}
		i := v.cores.first(0, best)
		if i < 0 {
			return nil
		}
		return append(picks[:0], pick{i, 1})
	}
	// the nodes that can hold one pick, in the Fit's order
	per := int32(1)
	if req.Nodes > 0 {
		per = int32(req.Slots / req.Nodes)
	}
	var cand []int
	for i := p.next(v, 0, per*c, per*g, req.Exclusive, m); i >= 0; i = p.next(v, i+1, per*c, per*g, req.Exclusive, m) {
		cand = append(cand, i)
	}
	if p.fit == HighID {
		// the highest ranks first
		slices.Reverse(cand)
		ch := p.chooser(v, req, picks)
		for _, i := range cand {
			if ch.offer(v, i) {
				break
			}
		}
		return ch.finish()
	}
	key := func(i int) (int32, int32) {
		if req.Exclusive {
			return int32(len(p.nodes[i].cores)), int32(len(p.nodes[i].gpus))
		}
		return v.cores.get(i), v.gpus.get(i)
	}
	slices.SortStableFunc(cand, func(a, b int) int {
		ca, ga := key(a)
		cb, gb := key(b)
		if p.fit == BestFit {
			ca, ga, cb, gb = cb, gb, ca, ga
		}
		switch {
		case ca != cb:
			return int(cb - ca)
		case ga != gb:
			return int(gb - ga)
		}
		return a - b
	})
	ch := p.chooser(v, req, picks)
	for _, i := range cand {
		if ch.offer(v, i) {
			break
		}
	}
	return ch.finish()
}
