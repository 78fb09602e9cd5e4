package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// GPU sharing (issue 24, seed 003: "users have asked for the ability to
// oversubscribe GPUs"): with a share of N, each GPU can be given to N
// allocations at once. A node's GPU list then holds each id N times in a
// row (gpu-major: 0,0,1,1,... for N=2), each place a share of that GPU,
// and the free bits, counts and indexes count shares. What sharing does
// not change:
//
//   - an allocation holds at most one share of a GPU on a node, so a
//     slot of g GPUs gets g different GPUs, and R (which names GPUs by
//     id) says exactly what the job may use;
//   - a node-exclusive request takes every share of the node's GPUs;
//   - feasibility counts GPUs, not shares (a node of 4 GPUs never holds
//     a 5-GPU slot, however they are shared).
//
// The share is set per node when the pool is made (NewPoolShared for
// every node, NewPoolShares by node properties: a queue's nodes); a node
// whose share is 1 has its GPUs' ids once, as without sharing, and
// without sharing anywhere nothing here costs anything.

// MaxGPUShare bounds the share (the lists grow by it).
const MaxGPUShare = 64

// NewPoolShared is NewPool with each GPU given to up to share
// allocations at once (1: not shared).
func NewPoolShared(r *rset.R, share int) (*Pool, error) {
	return NewPoolShares(r, GPUShares{Default: share})
}

// GPUShares is how many allocations each node's GPUs may be given to at
// once: a node's share is the smallest of the rules it matches (a
// node in two queues shares only as much as both allow: never where
// one of them does not), Default where it matches none.
type GPUShares struct {
	Default int
	Rules   []ShareRule
}

// ShareRule gives the nodes with every one of Requires (node
// properties; "^name": without name, as a queue's requires) a share.
type ShareRule struct {
	Name     string // what the rule is for (a queue), for errors
	Requires []string
	Share    int
}

// Validate checks every share.
func (s GPUShares) Validate() error {
	if s.Default < 1 || s.Default > MaxGPUShare {
		return fmt.Errorf("%w: gpu-share=%d: want 1 to %d", ErrInvalid, s.Default, MaxGPUShare)
	}
	for _, r := range s.Rules {
		if r.Share < 1 || r.Share > MaxGPUShare {
			return fmt.Errorf("%w: %s: gpu-share=%d: want 1 to %d", ErrInvalid, r.Name, r.Share, MaxGPUShare)
		}
	}
	return nil
}

// of is the share of a node with the (sorted) properties props.
func (s GPUShares) of(props []string) int32 {
	share, matched := MaxGPUShare, false
	for _, r := range s.Rules {
		if r.matches(props) {
			share, matched = min(share, r.Share), true
		}
	}
	if !matched {
		share = s.Default
	}
	return int32(max(share, 1))
}

func (r ShareRule) matches(props []string) bool {
	for _, req := range r.Requires {
		name, not := strings.CutPrefix(req, "^")
		if _, has := slices.BinarySearch(props, name); has == not {
			return false
		}
	}
	return true
}

// NewPoolShares is NewPool with each node's GPUs shared as s says.
func NewPoolShares(r *rset.R, s GPUShares) (*Pool, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return newPool(r, s), nil
}

// GPUShare returns the largest GPU share of the pool's nodes (1: no GPU
// is shared).
func (p *Pool) GPUShare() int { return int(p.share()) }

// NodeGPUShare returns the GPU share of the node of rank (0 if the pool
// has no such node).
func (p *Pool) NodeGPUShare(rank uint32) int {
	i, ok := p.byRank[rank]
	if !ok {
		return 0
	}
	return int(p.nodes[i].share)
}

// NumGPUs returns the number of GPUs of the pool's nodes (not shares).
func (p *Pool) NumGPUs() int {
	n := 0
	for i := range p.nodes {
		n += p.physGPUs(&p.nodes[i])
	}
	return n
}

// share is the largest share of any node.
func (p *Pool) share() int32 { return max(p.gpuShare, 1) }

// gpuList is the node's GPU places for ids: each id share times.
func gpuList(ids idset.Set, share int32) []uint32 {
	if share <= 1 {
		return idList(ids)
	}
	l := make([]uint32, 0, ids.Count()*int(share))
	for id := range ids.All() {
		for range share {
			l = append(l, uint32(id))
		}
	}
	return l
}

// physGPUs is the number of GPUs of nd (not shares).
func (p *Pool) physGPUs(nd *node) int { return len(nd.gpus) / int(max(nd.share, 1)) }

// distinctFree is how many different GPUs of nd (within mask, when not
// nil) an allocation holding held (nil: nothing yet) could still get a
// share of.
func (p *Pool) distinctFree(nd *node, mask, held bitset) int {
	s := int(max(nd.share, 1))
	if s == 1 {
		if mask == nil {
			return int(nd.nGPUs)
		}
		return countAnd(nd.gpuFree, mask)
	}
	n := 0
	for base := 0; base < len(nd.gpus); base += s {
		free := false
		for pos := base; pos < base+s; pos++ {
			if held != nil && held.has(pos) {
				free = false
				break
			}
			free = free || nd.gpuFree.has(pos) && (mask == nil || mask.has(pos))
		}
		if free {
			n++
		}
	}
	return n
}

// gpuRoom is how many different GPUs node i offers one allocation in v
// (shares counted once; the whole node's for the static totals).
func (p *Pool) gpuRoom(v view, i int) int {
	nd := &p.nodes[i]
	if !v.live {
		return p.physGPUs(nd)
	}
	return p.distinctFree(nd, nil, nil)
}

// takeGPUs moves g GPUs of nd (within mask, when not nil) into dst:
// the lowest free ones; shared, one free share each of the lowest GPUs
// dst holds no share of. It returns how many it moved.
func (p *Pool) takeGPUs(nd *node, dst bitset, g int, mask bitset) int {
	s := int(max(nd.share, 1))
	if s == 1 {
		if mask == nil {
			return nd.gpuFree.takeLowest(dst, g)
		}
		return nd.gpuFree.takeLowestIn(dst, mask, g)
	}
	moved := 0
	for base := 0; base < len(nd.gpus) && moved < g; base += s {
		free := -1
		for pos := base; pos < base+s; pos++ {
			if dst.has(pos) {
				free = -1
				break
			}
			if free < 0 && nd.gpuFree.has(pos) && (mask == nil || mask.has(pos)) {
				free = pos
			}
		}
		if free >= 0 {
			nd.gpuFree.clear(free)
			dst.set(free)
			moved++
		}
	}
	return moved
}

// gpuPlace finds the place of GPU id on nd for an Alloc made from R:
// the first share with want(pos) true, or the first share if none is.
func (p *Pool) gpuPlace(nd *node, id uint32, want func(pos int) bool) (int, bool) {
	pos, ok := slices.BinarySearch(nd.gpus, id)
	if !ok || nd.share <= 1 || want == nil {
		return pos, ok
	}
	for k := pos; k < pos+int(nd.share) && k < len(nd.gpus); k++ {
		if want(k) {
			return k, true
		}
	}
	return pos, true
}
