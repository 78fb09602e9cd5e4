package sched

import (
	"slices"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Pool is the scheduler's view of the instance's resources: every node
// with its cores and GPUs, which of them are free, and which nodes may be
// used now. Nodes are kept in ascending rank order; "index" below means a
// node's position in that order.
//
// A Pool is not safe for concurrent use; the scheduler module owns it on
// one goroutine.
type Pool struct {
	inv    *rset.R
	nodes  []node
	byRank map[uint32]int32
	byHost map[string][]int32
	props  map[string]bitset // property name -> nodes that have it
	avail  bitset            // nodes that are up and not drained

	// Current free capacity of available nodes (0 for unavailable ones).
	freeCores, freeGPUs *maxTree
	// idle holds a node's core count while it is available and entirely
	// free, 0 otherwise: the index for node-exclusive requests.
	idle *maxTree
	// Static totals, for feasibility checks.
	totCores, totGPUs *maxTree

	nCores, nGPUs         int // totals over all nodes
	nFreeCores, nFreeGPUs int // free over available nodes
	expiration            float64

	masks map[string]*mask // compiled constraints, by their JSON

	scheduling []byte      // the inventory's "scheduling" value, copied into allocations
	fit        Fit         // how Allocate places requests
	uniform    bool        // every node has the same number of cores and of GPUs
	numa       int         // nodes with NUMA domains (numa.go)
	nics       int         // nodes where some domains have a fabric NIC and some not (nic.go)
	nicPrefer  bool        // the profile has the nic plugin (nic.go)
	gpuShare   int32       // the most allocations any node's GPU may be given to at once (gpushare.go; 0: 1)
	shares     GPUShares   // each node's share, by its properties (gpushare.go)
	profile    Profile     // the search's plugins (extension.go)
	asideBuf   []asidePick // the chooser's nodes set aside, reused (choose.go)
}

type node struct {
	rank  uint32
	host  string
	cores []uint32 // core ids, ascending; shared by nodes with the same list
	gpus  []uint32
	// free marks free cores and GPUs by position in cores and gpus.
	coreFree, gpuFree bitset
	nCores, nGPUs     int32 // free counts
	props             []string
	// doms is the node's NUMA domains (numa.go), nil without them.
	doms []domain
	// someNIC: some of doms have a fabric NIC, some not (nic.go).
	someNIC bool
	// share is how many allocations each of its GPUs may be given to
	// at once (gpushare.go; 1: not shared).
	share int32
	// gone marks the place of a node Shrink removed while an allocated
	// node above it kept its index (pool_grow.go): it has no resources
	// and is in no index.
	gone bool
}

// NewPool builds a pool from the instance inventory r. Every resource
// starts free and every node unavailable: mark nodes up with
// SetAvailable. The expiration of r becomes the pool's (see
// SetExpiration).
func NewPool(r *rset.R) *Pool { return newPool(r, GPUShares{Default: 1}) }

func newPool(r *rset.R, shares GPUShares) *Pool {
	p := &Pool{
		gpuShare: 1,
		shares:   shares,
		inv:      r,
		byRank:   make(map[uint32]int32),
		byHost:   make(map[string][]int32),
		props:    make(map[string]bitset),
		masks:    make(map[string]*mask),
	}
	p.scheduling = rset.SchedulingWithoutNUMA(r.Scheduling())
	defer func() {
		p.uniform = true
		for i := range p.nodes {
			if len(p.nodes[i].cores) != len(p.nodes[0].cores) || len(p.nodes[i].gpus) != len(p.nodes[0].gpus) {
				p.uniform = false
				break
			}
		}
	}()
	shared := make(map[string][]uint32)
	idList := func(s idset.Set) []uint32 {
		key := s.String()
		if l, ok := shared[key]; ok {
			return l
		}
		l := make([]uint32, 0, s.Count())
		for id := range s.All() {
			l = append(l, uint32(id))
		}
		shared[key] = l
		return l
	}
	// the nodes' properties, when shares depend on them
	var propsOf map[uint][]string
	if len(shares.Rules) > 0 {
		propsOf = make(map[uint][]string)
		for name, ranks := range r.Properties() {
			for rank := range ranks.All() {
				propsOf[rank] = append(propsOf[rank], name)
			}
		}
		for _, l := range propsOf {
			slices.Sort(l)
		}
	}
	words := 0
	for n := range r.All() {
		share := shares.of(propsOf[n.Rank])
		gpus := idList(n.GPUs)
		if share > 1 {
			gpus = gpuList(n.GPUs, share) // gpushare.go
			p.gpuShare = max(p.gpuShare, share)
		}
		nd := node{rank: uint32(n.Rank), host: n.Hostname, cores: idList(n.Cores), gpus: gpus, share: share}
		words += (len(nd.cores)+63)/64 + (len(nd.gpus)+63)/64
		p.byRank[nd.rank] = int32(len(p.nodes))
		if nd.host != "" {
			p.byHost[nd.host] = append(p.byHost[nd.host], int32(len(p.nodes)))
		}
		p.nodes = append(p.nodes, nd)
	}
	// one backing array for every node's free bits
	backing := make([]uint64, words)
	for i := range p.nodes {
		nd := &p.nodes[i]
		nd.coreFree, backing = carve(backing, len(nd.cores))
		nd.gpuFree, backing = carve(backing, len(nd.gpus))
		nd.coreFree.fill(len(nd.cores))
		nd.gpuFree.fill(len(nd.gpus))
		nd.nCores, nd.nGPUs = int32(len(nd.cores)), int32(len(nd.gpus))
		p.nCores += len(nd.cores)
		p.nGPUs += len(nd.gpus)
	}
	for name, ranks := range r.Properties() {
		b := newBitset(len(p.nodes))
		for rank := range ranks.All() {
			if i, ok := p.byRank[uint32(rank)]; ok {
				b.set(int(i))
				p.nodes[i].props = append(p.nodes[i].props, name)
			}
		}
		p.props[name] = b
	}
	for i := range p.nodes {
		slices.Sort(p.nodes[i].props)
	}
	n := len(p.nodes)
	p.avail = newBitset(n)
	p.freeCores, p.freeGPUs, p.idle = newMaxTree(n), newMaxTree(n), newMaxTree(n)
	p.totCores, p.totGPUs = newMaxTree(n), newMaxTree(n)
	for i := range p.nodes {
		p.totCores.set(i, int32(len(p.nodes[i].cores)))
		p.totGPUs.set(i, int32(len(p.nodes[i].gpus)))
	}
	p.setDomains(r)
	p.SetProfile(DefaultProfile())
	p.expiration = r.Expiration()
	return p
}

func carve(b []uint64, n int) (bitset, []uint64) {
	w := (n + 63) / 64
	return bitset(b[:w:w]), b[w:]
}

// Inventory returns the R the pool was built from, with the nodes Grow
// added and without those Shrink removed.
func (p *Pool) Inventory() *rset.R { return p.inv }

// NumNodes returns the number of nodes.
func (p *Pool) NumNodes() int { return len(p.byRank) }

// Counts returns the total and currently free (on available nodes)
// numbers of cores and GPUs.
func (p *Pool) Counts() (cores, freeCores, gpus, freeGPUs int) {
	return p.nCores, p.nFreeCores, p.nGPUs, p.nFreeGPUs
}

// Expiration returns the time after which no allocation may run, 0 for
// none.
func (p *Pool) Expiration() float64 { return p.expiration }

// SetExpiration changes the pool's expiration (resource.acquire reports
// updates of the instance's own expiration). Later allocations end no
// later than it.
func (p *Pool) SetExpiration(t float64) {
	p.expiration = t
	// the inventory (what flux resource R prints) ends then too
	if p.inv != nil && p.inv.SetTimes(p.inv.StartTime(), t) != nil {
		p.inv.SetTimes(0, t)
	}
}

// SetAvailable marks the nodes of ranks usable (up) or not (down or
// drained). Ranks not in the pool are ignored. It returns the ranks whose
// state changed.
func (p *Pool) SetAvailable(ranks idset.Set, up bool) idset.Set {
	var changed idset.Set
	for rank := range ranks.All() {
		i, ok := p.byRank[uint32(rank)]
		if !ok || p.avail.has(int(i)) == up {
			continue
		}
		nd := &p.nodes[i]
		if up {
			p.avail.set(int(i))
			p.nFreeCores += int(nd.nCores)
			p.nFreeGPUs += int(nd.nGPUs)
		} else {
			p.avail.clear(int(i))
			p.nFreeCores -= int(nd.nCores)
			p.nFreeGPUs -= int(nd.nGPUs)
		}
		p.update(int(i))
		changed.Add(rank)
	}
	return changed
}

// Available returns the ranks of the nodes that may be used now.
func (p *Pool) Available() idset.Set {
	var s idset.Set
	for i := p.avail.next(0); i >= 0; i = p.avail.next(i + 1) {
		s.Add(uint(p.nodes[i].rank))
	}
	return s
}

// Unavailable returns the ranks of the nodes that are down or drained.
func (p *Pool) Unavailable() idset.Set {
	var s idset.Set
	for i := range p.nodes {
		if !p.avail.has(i) && !p.nodes[i].gone {
			s.Add(uint(p.nodes[i].rank))
		}
	}
	return s
}

// update refreshes the indexes of node i after its free counts or
// availability changed.
func (p *Pool) update(i int) {
	nd := &p.nodes[i]
	if !p.avail.has(i) {
		p.freeCores.set(i, 0)
		p.freeGPUs.set(i, 0)
		p.idle.set(i, 0)
		return
	}
	p.freeCores.set(i, nd.nCores)
	p.freeGPUs.set(i, nd.nGPUs)
	var idle int32
	if int(nd.nCores) == len(nd.cores) && int(nd.nGPUs) == len(nd.gpus) {
		idle = int32(len(nd.cores))
	}
	p.idle.set(i, idle)
}
