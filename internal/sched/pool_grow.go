package sched

import (
	"slices"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51): an instance's inventory gains and loses
// nodes while it runs, and the pool follows with Grow and Shrink.
//
// An Alloc names nodes by their index in the pool's rank order, so no
// allocated node may change index. Grow appends nodes above the highest
// rank (the usual case: new brokers take the next ranks), and puts a
// lower rank in the place of a removed node of the same rank or inserts
// it when no node above it is allocated. Shrink removes idle nodes; a
// removed node below an allocated one leaves a placeholder (node.gone)
// that holds nothing and is in no index until the nodes above it are
// idle again at a later Grow or Shrink. Placeholders only make the node
// counts in Feasible's explanations count them.

// Grow adds the nodes of r to the pool, all free and unavailable until
// SetAvailable marks them up. It fails, changing nothing, with
// ErrConflict if a rank of r is in the pool already, with ErrBusy if a
// rank of r is below an allocated node and cannot be placed without
// moving it, and with ErrInvalid if r does not combine with the
// inventory (a hostname conflict).
func (p *Pool) Grow(r *rset.R) error {
	if r == nil || r.Empty() {
		return nil
	}
	for n := range r.All() {
		if _, ok := p.byRank[uint32(n.Rank)]; ok {
			return errorf(ErrConflict, "rank %d is already in the pool", n.Rank)
		}
	}
	inv := r.Copy()
	if p.inv != nil {
		var err error
		if inv, err = p.inv.Append(r); err != nil {
			return errorf(ErrInvalid, "growing by %s: %v", r, err)
		}
	}
	added := make([]node, 0, r.NNodes())
	props := r.Properties()
	for n := range r.All() {
		nd := node{rank: uint32(n.Rank), host: n.Hostname, cores: idList(n.Cores)}
		for name, ranks := range props {
			if ranks.Contains(n.Rank) {
				nd.props = append(nd.props, name)
			}
		}
		slices.Sort(nd.props)
		nd.share = p.shares.of(nd.props) // gpushare.go
		p.gpuShare = max(p.gpuShare, nd.share)
		nd.gpus = gpuList(n.GPUs, nd.share)
		nd.coreFree, nd.gpuFree = newBitset(len(nd.cores)), newBitset(len(nd.gpus))
		nd.coreFree.fill(len(nd.cores))
		nd.gpuFree.fill(len(nd.gpus))
		nd.nCores, nd.nGPUs = int32(len(nd.cores)), int32(len(nd.gpus))
		added = append(added, nd)
	}
	slices.SortFunc(added, func(a, b node) int { return int(a.rank) - int(b.rank) })
	p.SetProfile(p.profile) // keeps the gpu-share filter if a grown node shares

	// merge by rank; a new node takes the place of a removed one of its
	// rank
	old, up := p.nodes, p.availList()
	nodes := make([]node, 0, len(old)+len(added))
	avail := make([]bool, 0, cap(nodes))
	i, k := 0, 0
	for i < len(old) || k < len(added) {
		switch {
		case k == len(added) || i < len(old) && old[i].rank < added[k].rank:
			nodes, avail = append(nodes, old[i]), append(avail, up[i])
			i++
		case i < len(old) && old[i].rank == added[k].rank: // old[i] is gone
			nodes, avail = append(nodes, added[k]), append(avail, false)
			i++
			k++
		default:
			nodes, avail = append(nodes, added[k]), append(avail, false)
			k++
		}
	}
	nodes, avail = compact(nodes, avail)
	for j := range nodes {
		if nodes[j].gone || nodes[j].idle() {
			continue
		}
		if j >= len(old) || old[j].rank != nodes[j].rank {
			return errorf(ErrBusy, "rank %d cannot be added below rank %d, which is allocated", added[0].rank, nodes[j].rank)
		}
	}
	p.nodes, p.inv = nodes, inv
	p.reindex(avail)
	p.setDomains(r) // the new nodes' domains, from r's scheduling key
	return nil
}

// Shrink removes the nodes of ranks from the pool. It fails, changing
// nothing, with ErrNotFound if a rank is not in the pool and with
// ErrBusy if some of a node's resources are allocated.
func (p *Pool) Shrink(ranks idset.Set) error {
	for rank := range ranks.All() {
		i, ok := p.byRank[uint32(rank)]
		if !ok {
			return errorf(ErrNotFound, "rank %d is not in the pool", rank)
		}
		if !p.nodes[i].idle() {
			return errorf(ErrBusy, "rank %d is allocated", rank)
		}
	}
	if ranks.Empty() {
		return nil
	}
	nodes, avail := slices.Clone(p.nodes), p.availList()
	for rank := range ranks.All() {
		i := p.byRank[uint32(rank)]
		nodes[i] = node{rank: uint32(rank), gone: true}
		avail[i] = false
	}
	p.nodes, avail = compact(nodes, avail)
	if p.inv != nil {
		p.inv = p.inv.ExcludeRanks(ranks)
	}
	p.reindex(avail)
	p.countNUMA()
	return nil
}

// idle reports whether none of the node's resources are allocated: no
// Alloc refers to it.
func (nd *node) idle() bool {
	return int(nd.nCores) == len(nd.cores) && int(nd.nGPUs) == len(nd.gpus)
}

// availList returns, per node index, whether the node is available.
func (p *Pool) availList() []bool {
	out := make([]bool, len(p.nodes))
	for i := range p.nodes {
		out[i] = p.avail.has(i)
	}
	return out
}

// compact drops the placeholders of removed nodes that no allocated
// node sits above: only idle nodes move, and no Alloc refers to those.
func compact(nodes []node, avail []bool) ([]node, []bool) {
	top := -1 // the highest allocated node
	for i := range nodes {
		if !nodes[i].gone && !nodes[i].idle() {
			top = i
		}
	}
	j := top + 1
	for i := top + 1; i < len(nodes); i++ {
		if nodes[i].gone {
			continue
		}
		nodes[j], avail[j] = nodes[i], avail[i]
		j++
	}
	clear(nodes[j:])
	return nodes[:j], avail[:j]
}

// reindex rebuilds every index of the pool from its nodes after Grow or
// Shrink changed them: avail gives each node's availability.
func (p *Pool) reindex(avail []bool) {
	n := len(p.nodes)
	p.byRank = make(map[uint32]int32, n)
	p.byHost = make(map[string][]int32)
	p.props = make(map[string]bitset)
	p.masks = make(map[string]*mask) // compiled over the old nodes
	p.avail = newBitset(n)
	p.freeCores, p.freeGPUs, p.idle = newMaxTree(n), newMaxTree(n), newMaxTree(n)
	p.totCores, p.totGPUs = newMaxTree(n), newMaxTree(n)
	p.nCores, p.nGPUs, p.nFreeCores, p.nFreeGPUs = 0, 0, 0, 0
	p.uniform = true
	first := -1
	for i := range p.nodes {
		nd := &p.nodes[i]
		if nd.gone {
			continue
		}
		p.byRank[nd.rank] = int32(i)
		if nd.host != "" {
			p.byHost[nd.host] = append(p.byHost[nd.host], int32(i))
		}
		for _, name := range nd.props {
			b, ok := p.props[name]
			if !ok {
				b = newBitset(n)
				p.props[name] = b
			}
			b.set(i)
		}
		p.totCores.set(i, int32(len(nd.cores)))
		p.totGPUs.set(i, int32(len(nd.gpus)))
		p.nCores += len(nd.cores)
		p.nGPUs += len(nd.gpus)
		if avail[i] {
			p.avail.set(i)
			p.nFreeCores += int(nd.nCores)
			p.nFreeGPUs += int(nd.nGPUs)
		}
		p.update(i)
		if first < 0 {
			first = i
		} else if len(nd.cores) != len(p.nodes[first].cores) || len(nd.gpus) != len(p.nodes[first].gpus) {
			p.uniform = false
		}
	}
}

// idList returns the ids of s in ascending order.
func idList(s idset.Set) []uint32 {
	l := make([]uint32, 0, s.Count())
	for id := range s.All() {
		l = append(l, uint32(id))
	}
	return l
}
