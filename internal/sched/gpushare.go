package sched

import (
	"fmt"
	"slices"

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
// The share is set when the pool is made (NewPoolShared) and is the same
// for every node; without it (1) nothing here costs anything.

// MaxGPUShare bounds the share (the lists grow by it).
const MaxGPUShare = 64

// NewPoolShared is NewPool with each GPU given to up to share
// allocations at once (1: not shared).
func NewPoolShared(r *rset.R, share int) (*Pool, error) {
	if share < 1 || share > MaxGPUShare {
		return nil, fmt.Errorf("%w: gpu-share=%d: want 1 to %d", ErrInvalid, share, MaxGPUShare)
	}
	return newPool(r, int32(share)), nil
}

// GPUShare returns the pool's GPU share (1: not shared).
func (p *Pool) GPUShare() int { return int(p.share()) }

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
func (p *Pool) physGPUs(nd *node) int { return len(nd.gpus) / int(p.share()) }

// distinctFree is how many different GPUs of nd (within mask, when not
// nil) an allocation holding held (nil: nothing yet) could still get a
// share of.
func (p *Pool) distinctFree(nd *node, mask, held bitset) int {
	s := int(p.share())
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
	s := int(p.share())
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
	if !ok || p.share() == 1 || want == nil {
		return pos, ok
	}
	for k := pos; k < pos+int(p.share()) && k < len(nd.gpus); k++ {
		if want(k) {
			return k, true
		}
	}
	return pos, true
}
