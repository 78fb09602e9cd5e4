package sched

import (
	"slices"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Alloc is a set of resources taken from a Pool: per node, which cores and
// GPUs (by position in the node's lists). It is only meaningful with the
// Pool that made it.
type Alloc struct {
	Nodes []NodeAlloc // ascending node order
	// Start and Expiration are the validity window written to R
	// (seconds since the epoch; Expiration 0 for none).
	Start, Expiration float64
	// Slots is the number of slots the job asked for, written to R as
	// "nslots" as flux-core's sched-simple does (0: not written).
	Slots int

	// inline storage for the common one-node allocation of up to 64
	// cores and 64 GPUs: one heap object instead of three
	one   [1]NodeAlloc
	words [2]uint64
}

// NodeAlloc is the part of an Alloc on one node.
type NodeAlloc struct {
	node  int32
	cores bitset
	gpus  bitset // nil when no GPUs are taken
}

// NCores returns the number of cores in a.
func (a *Alloc) NCores() int {
	n := 0
	for _, na := range a.Nodes {
		n += na.cores.count()
	}
	return n
}

// NGPUs returns the number of GPUs in a.
func (a *Alloc) NGPUs() int {
	n := 0
	for _, na := range a.Nodes {
		if na.gpus != nil {
			n += na.gpus.count()
		}
	}
	return n
}

// Empty reports whether a holds nothing.
func (a *Alloc) Empty() bool { return len(a.Nodes) == 0 }

// Ranks returns the ranks a spans.
func (p *Pool) Ranks(a *Alloc) idset.Set {
	var s idset.Set
	for _, na := range a.Nodes {
		s.Add(uint(p.nodes[na.node].rank))
	}
	return s
}

// Remove takes the resources of b out of a (after a partial release);
// nodes left with nothing are dropped.
func (a *Alloc) Remove(b *Alloc) {
	j := 0
	out := a.Nodes[:0]
	for _, na := range a.Nodes {
		for j < len(b.Nodes) && b.Nodes[j].node < na.node {
			j++
		}
		if j < len(b.Nodes) && b.Nodes[j].node == na.node {
			bn := b.Nodes[j]
			for w := range na.cores {
				na.cores[w] &^= bn.cores[w]
			}
			if na.gpus != nil && bn.gpus != nil {
				for w := range na.gpus {
					na.gpus[w] &^= bn.gpus[w]
				}
			}
			if na.cores.count() == 0 && (na.gpus == nil || na.gpus.count() == 0) {
				continue
			}
		}
		out = append(out, na)
	}
	a.Nodes = out
}

// newAlloc returns an Alloc with room for n nodes.
func newAlloc(n int) *Alloc {
	a := &Alloc{}
	if n == 1 {
		a.Nodes = a.one[:]
	} else {
		a.Nodes = make([]NodeAlloc, n)
	}
	return a
}

// take moves k cores (and g GPUs) of node i, the lowest free ones, into
// a.Nodes[slot]; all of them when whole is set.
func (p *Pool) take(a *Alloc, slot int, i int, k, g int, whole bool) {
	nd := &p.nodes[i]
	if whole {
		k, g = len(nd.cores), len(nd.gpus)
	}
	na := p.prepare(a, slot, i, g > 0)
	var cores int
	if p.fit == HighID {
		cores = nd.coreFree.takeHighest(na.cores, k) // the highest ids, as the highest ranks
	} else {
		cores = nd.coreFree.takeLowest(na.cores, k)
	}
	gpus := 0
	if g > 0 {
		if whole {
			gpus = nd.gpuFree.takeLowest(na.gpus, g) // every share
		} else {
			gpus = p.takeGPUs(nd, na.gpus, g, nil)
		}
	}
	p.taken(i, cores, gpus)
}

// prepare points a.Nodes[slot] at node i with empty core (and, with
// gpus, GPU) sets to take into.
func (p *Pool) prepare(a *Alloc, slot int, i int, gpus bool) *NodeAlloc {
	nd := &p.nodes[i]
	na := &a.Nodes[slot]
	na.node = int32(i)
	inline := len(a.Nodes) == 1 && len(nd.cores) <= 64 && len(nd.gpus) <= 64
	if inline {
		na.cores = bitset(a.words[0:1:1])
	} else {
		na.cores = newBitset(len(nd.cores))
	}
	if gpus {
		if inline {
			na.gpus = bitset(a.words[1:2:2])
		} else {
			na.gpus = newBitset(len(nd.gpus))
		}
	}
	return na
}

// taken accounts for cores and GPUs just taken from node i.
func (p *Pool) taken(i int, cores, gpus int) {
	nd := &p.nodes[i]
	nd.nCores -= int32(cores)
	nd.nGPUs -= int32(gpus)
	if p.avail.has(i) {
		p.nFreeCores -= cores
		p.nFreeGPUs -= gpus
	}
	p.update(i)
}

// Free gives the resources of a back to the pool. It fails with
// ErrConflict, changing nothing, if some of them are not allocated.
func (p *Pool) Free(a *Alloc) error {
	for _, na := range a.Nodes {
		nd := &p.nodes[na.node]
		if w, ok := overlap(nd.coreFree, na.cores); ok {
			return errorf(ErrConflict, "rank %d core %d is not allocated", nd.rank, nd.cores[w])
		}
		if w, ok := overlap(nd.gpuFree, na.gpus); ok {
			return errorf(ErrConflict, "rank %d gpu %d is not allocated", nd.rank, nd.gpus[w])
		}
	}
	for k := range a.Nodes {
		p.update(p.giveBack(&a.Nodes[k]))
	}
	return nil
}

// Claim marks the resources of a allocated (a scheduler restarting learns
// running jobs' R from the job manager). It fails with ErrConflict,
// changing nothing, if some of them are already allocated.
func (p *Pool) Claim(a *Alloc) error {
	for _, na := range a.Nodes {
		nd := &p.nodes[na.node]
		if w, ok := missing(nd.coreFree, na.cores); ok {
			return errorf(ErrConflict, "rank %d core %d is already allocated", nd.rank, nd.cores[w])
		}
		if w, ok := missing(nd.gpuFree, na.gpus); ok {
			return errorf(ErrConflict, "rank %d gpu %d is already allocated", nd.rank, nd.gpus[w])
		}
	}
	for _, na := range a.Nodes {
		i := int(na.node)
		nd := &p.nodes[i]
		c := na.cores.count()
		for w := range na.cores {
			nd.coreFree[w] &^= na.cores[w]
		}
		nd.nCores -= int32(c)
		g := 0
		if na.gpus != nil {
			g = na.gpus.count()
			for w := range na.gpus {
				nd.gpuFree[w] &^= na.gpus[w]
			}
			nd.nGPUs -= int32(g)
		}
		if p.avail.has(i) {
			p.nFreeCores -= c
			p.nFreeGPUs -= g
		}
		p.update(i)
	}
	return nil
}

// overlap returns the first position set in both a and b.
func overlap(a, b bitset) (int, bool) {
	for w := range b {
		if x := a[w] & b[w]; x != 0 {
			return w*64 + trailingZeros(x), true
		}
	}
	return 0, false
}

// missing returns the first position set in b but not in a.
func missing(a, b bitset) (int, bool) {
	for w := range b {
		if x := b[w] &^ a[w]; x != 0 {
			return w*64 + trailingZeros(x), true
		}
	}
	return 0, false
}

// AllocFromR converts an R (a job's, from the job manager) into an Alloc
// of this pool, with R's starttime and expiration. It fails with
// ErrNotFound if R names a rank, core or GPU the pool does not have.
func (p *Pool) AllocFromR(r *rset.R) (*Alloc, error) {
	// shared GPUs: a free share of each (what Claim takes)
	return p.allocFromR(r, func(nd *node, _ int32, pos int) bool { return nd.gpuFree.has(pos) })
}

// AllocWithin is AllocFromR for part of held (a job's allocation): with
// shared GPUs, R's GPUs are the shares held has (for freeing part of a
// job, or checking that it holds what it names).
func (p *Pool) AllocWithin(r *rset.R, held *Alloc) (*Alloc, error) {
	if held == nil || p.share() == 1 {
		return p.AllocFromR(r)
	}
	byNode := make(map[int32]bitset, len(held.Nodes))
	for _, na := range held.Nodes {
		byNode[na.node] = na.gpus
	}
	return p.allocFromR(r, func(_ *node, i int32, pos int) bool {
		g := byNode[i]
		return g != nil && g.has(pos)
	})
}

// AllocHeld is AllocFromR for resources to be freed when the allocation
// they came from is not known: with shared GPUs, an allocated share of
// each.
func (p *Pool) AllocHeld(r *rset.R) (*Alloc, error) {
	return p.allocFromR(r, func(nd *node, _ int32, pos int) bool { return !nd.gpuFree.has(pos) })
}

// allocFromR converts r; want chooses among a GPU's shares.
func (p *Pool) allocFromR(r *rset.R, want func(nd *node, i int32, pos int) bool) (*Alloc, error) {
	a := &Alloc{Start: r.StartTime(), Expiration: r.Expiration()}
	for n := range r.All() {
		i, ok := p.byRank[uint32(n.Rank)]
		if !ok {
			return nil, errorf(ErrNotFound, "rank %d is not in the instance", n.Rank)
		}
		nd := &p.nodes[i]
		na := NodeAlloc{node: i, cores: newBitset(len(nd.cores))}
		for id := range n.Cores.All() {
			pos, ok := slices.BinarySearch(nd.cores, uint32(id))
			if !ok {
				return nil, errorf(ErrNotFound, "rank %d has no core %d", n.Rank, id)
			}
			na.cores.set(pos)
		}
		if !n.GPUs.Empty() {
			na.gpus = newBitset(len(nd.gpus))
			for id := range n.GPUs.All() {
				pos, ok := p.gpuPlace(nd, uint32(id), func(pos int) bool { return want(nd, i, pos) })
				if !ok {
					return nil, errorf(ErrNotFound, "rank %d has no gpu %d", n.Rank, id)
				}
				na.gpus.set(pos)
			}
		}
		a.Nodes = append(a.Nodes, na)
	}
	return a, nil
}

// Allocated returns every allocated resource of the pool as one Alloc
// (for status reports: flux resource list). A shared GPU (gpushare.go)
// is allocated only when every share of it is taken: one with a share
// free can still be given to a job, so it shows as free. It visits
// every node.
func (p *Pool) Allocated() *Alloc {
	a := &Alloc{}
	for i := range p.nodes {
		nd := &p.nodes[i]
		if int(nd.nCores) == len(nd.cores) && int(nd.nGPUs) == len(nd.gpus) {
			continue
		}
		na := NodeAlloc{node: int32(i), cores: nd.coreFree.clone()}
		na.cores.not(len(nd.cores))
		if int(nd.nGPUs) != len(nd.gpus) {
			na.gpus = nd.gpuFree.clone()
			na.gpus.not(len(nd.gpus))
			if nd.share > 1 {
				na.gpus = wholeGPUs(na.gpus, len(nd.gpus), int(nd.share))
			}
		}
		if na.cores.count() == 0 && na.gpus == nil {
			continue // only shares of GPUs that have more free
		}
		a.Nodes = append(a.Nodes, na)
	}
	return a
}

// wholeGPUs keeps the GPUs of taken (n places, share a GPU) whose
// every share is taken; nil when none is.
func wholeGPUs(taken bitset, n, share int) bitset {
	out := newBitset(n)
	some := false
	for base := 0; base+share <= n; base += share {
		all := true
		for pos := base; pos < base+share && all; pos++ {
			all = taken.has(pos)
		}
		if all {
			for pos := base; pos < base+share; pos++ {
				out.set(pos)
			}
			some = true
		}
	}
	if !some {
		return nil
	}
	return out
}

// Merge adds the resources of b to a (a job growing, RFC 51); nodes stay
// in ascending order.
func (a *Alloc) Merge(b *Alloc) {
	out := make([]NodeAlloc, 0, len(a.Nodes)+len(b.Nodes))
	i, k := 0, 0
	for i < len(a.Nodes) || k < len(b.Nodes) {
		switch {
		case k == len(b.Nodes) || i < len(a.Nodes) && a.Nodes[i].node < b.Nodes[k].node:
			out = append(out, a.Nodes[i])
			i++
		case i == len(a.Nodes) || b.Nodes[k].node < a.Nodes[i].node:
			out = append(out, b.Nodes[k])
			k++
		default:
			na := a.Nodes[i]
			na.cores = na.cores.clone()
			na.cores.or(b.Nodes[k].cores)
			if g := b.Nodes[k].gpus; g != nil {
				if na.gpus == nil {
					na.gpus = g.clone()
				} else {
					na.gpus = na.gpus.clone()
					na.gpus.or(g)
				}
			}
			out = append(out, na)
			i++
			k++
		}
	}
	a.Nodes = out
}

// Tail returns the part of a on its last n nodes (a copy).
func (a *Alloc) Tail(n int) *Alloc {
	t := &Alloc{Start: a.Start, Expiration: a.Expiration}
	for _, na := range a.Nodes[len(a.Nodes)-n:] {
		c := NodeAlloc{node: na.node, cores: na.cores.clone()}
		if na.gpus != nil {
			c.gpus = na.gpus.clone()
		}
		t.Nodes = append(t.Nodes, c)
	}
	return t
}

// Contains reports whether every resource of b is in a.
func (a *Alloc) Contains(b *Alloc) bool {
	i := 0
	for _, nb := range b.Nodes {
		for i < len(a.Nodes) && a.Nodes[i].node < nb.node {
			i++
		}
		if i == len(a.Nodes) || a.Nodes[i].node != nb.node {
			return false
		}
		if _, ok := missing(a.Nodes[i].cores, nb.cores); ok {
			return false
		}
		if nb.gpus != nil {
			if a.Nodes[i].gpus == nil {
				if nb.gpus.count() > 0 {
					return false
				}
			} else if _, ok := missing(a.Nodes[i].gpus, nb.gpus); ok {
				return false
			}
		}
	}
	return true
}

// giveBack marks na's cores and GPUs free again and counts them, without
// refreshing the node's indexes (the caller does, now or in a batch); it
// returns the node's index.
func (p *Pool) giveBack(na *NodeAlloc) int {
	i := int(na.node)
	nd := &p.nodes[i]
	c := na.cores.count()
	nd.coreFree.or(na.cores)
	nd.nCores += int32(c)
	g := 0
	if na.gpus != nil {
		g = na.gpus.count()
		nd.gpuFree.or(na.gpus)
		nd.nGPUs += int32(g)
	}
	if p.avail.has(i) {
		p.nFreeCores += c
		p.nFreeGPUs += g
	}
	return i
}
