package sched

import (
	"math/bits"
	"slices"

	"github.com/fluxgo/fluxgo/pkg/rset"
)

// NUMA domains (issue 24): a node whose R carries its domains in the
// scheduling key (rset.NUMAKey, written by the resource module from hwloc)
// gets each slot's cores and GPUs from one domain when one has room:
//
//   - the node is chosen exactly as without domains (the pool's Fit over
//     free counts), so the search and its cost do not change;
//   - on the node, each slot goes to a domain with at least the slot's
//     free cores and free GPUs: the one with the fewest free cores (then
//     the fewest free GPUs) that fits, so big holes stay big; under
//     WorstFit, which spreads, the one with the most. Ties go to the
//     lowest domain. Within the domain the lowest free cores and GPUs are
//     taken;
//   - a slot no domain can hold (bigger than any domain, or the remainders
//     are too small) takes the node's lowest free cores and GPUs, as
//     without domains;
//   - a node-exclusive request takes the whole node, as always.
//
// A node without domains costs one length check in Allocate. The
// domains of the inventory are not copied into allocations' R (their
// ranks are the instance's, not those of an instance a job starts).

// domain is one NUMA domain of a node: its cores and GPUs by position
// in the node's lists. Nodes with the same layout share one slice.
type domain struct {
	cores, gpus bitset
	nic         bool // a fabric NIC is local to it (rset.NUMADomain.FabricNICs)
}

// setDomains reads the inventory's NUMA domains into the nodes. Ids a
// node does not have are ignored; a malformed record is ignored as a
// whole (the nodes are matched without domains).
func (p *Pool) setDomains(r *rset.R) {
	defer p.countNUMA()
	groups, err := r.NUMA()
	if err != nil || len(groups) == 0 {
		return
	}
	// nodes with the same lists share them (NewPool), so a list's first
	// element names it
	type layout struct {
		group       int
		cores, gpus *uint32
	}
	first := func(l []uint32) *uint32 {
		if len(l) == 0 {
			return nil
		}
		return &l[0]
	}
	shared := make(map[layout][]domain)
	for gi, g := range groups {
		if len(g.Domains) < 2 {
			continue // one domain holds every slot: nothing to choose
		}
		for rank := range g.Ranks.All() {
			i, ok := p.byRank[uint32(rank)]
			if !ok {
				continue
			}
			nd := &p.nodes[i]
			key := layout{gi, first(nd.cores), first(nd.gpus)}
			doms, ok := shared[key]
			if !ok {
				doms = domainsOf(nd, g.Domains)
				shared[key] = doms
			}
			nd.doms = doms
		}
	}
}

// countNUMA counts the nodes with domains (none: node choice ignores
// domains at no cost) and those where only some domains have a fabric
// NIC (none: the nic plugin costs nothing).
func (p *Pool) countNUMA() {
	p.numa, p.nics = 0, 0
	for i := range p.nodes {
		nd := &p.nodes[i]
		nd.someNIC = false
		if nd.doms == nil {
			continue
		}
		p.numa++
		with := 0
		for _, d := range nd.doms {
			if d.nic {
				with++
			}
		}
		if with > 0 && with < len(nd.doms) {
			nd.someNIC = true
			p.nics++
		}
	}
}

// domainsOf converts domains by id to positions in nd's lists.
func domainsOf(nd *node, in []rset.NUMADomain) []domain {
	out := make([]domain, len(in))
	for k, d := range in {
		out[k] = domain{cores: newBitset(len(nd.cores)), gpus: newBitset(len(nd.gpus)), nic: len(d.FabricNICs()) > 0}
		for id := range d.Cores.All() {
			if pos, ok := slices.BinarySearch(nd.cores, uint32(id)); ok {
				out[k].cores.set(pos)
			}
		}
		for id := range d.GPUs.All() {
			if pos, ok := slices.BinarySearch(nd.gpus, uint32(id)); ok {
				for ; pos < len(nd.gpus) && nd.gpus[pos] == uint32(id); pos++ {
					out[k].gpus.set(pos) // each share (gpushare.go)
				}
			}
		}
	}
	return out
}

// pickDomain returns the domain of nd that should hold a slot of c cores
// and g GPUs (see above) for an allocation holding the GPUs held (shares
// of them do not count, gpushare.go), nil if none can. With nic (a job
// spanning nodes under the nic plugin, nic.go) a domain with a fabric
// NIC is taken first when one fits.
func (p *Pool) pickDomain(nd *node, c, g int, held bitset, nic bool) *domain {
	if nic && nd.someNIC {
		if d := p.pickDomainOf(nd, c, g, held, true); d != nil {
			return d
		}
	}
	return p.pickDomainOf(nd, c, g, held, false)
}

// pickDomainOf is pickDomain among nd's domains with a fabric NIC
// (onlyNIC) or all of them.
func (p *Pool) pickDomainOf(nd *node, c, g int, held bitset, onlyNIC bool) *domain {
	var best *domain
	var bestC, bestG int
	for k := range nd.doms {
		d := &nd.doms[k]
		if onlyNIC && !d.nic {
			continue
		}
		fc := countAnd(nd.coreFree, d.cores)
		if fc < c {
			continue
		}
		fg := 0
		if g > 0 {
			if fg = p.distinctFree(nd, d.gpus, held); fg < g {
				continue
			}
		}
		better := best == nil
		if !better && p.fit == WorstFit {
			better = fc > bestC || fc == bestC && fg > bestG
		} else if !better {
			better = fc < bestC || fc == bestC && fg < bestG
		}
		if better {
			best, bestC, bestG = d, fc, fg
		}
	}
	return best
}

// takeDomains is take for a node with domains: slots slots of c cores
// and g GPUs each, each from one domain when one has room (one with a
// fabric NIC first, with nic).
func (p *Pool) takeDomains(a *Alloc, slot int, i int, slots, c, g int, nic bool) {
	nd := &p.nodes[i]
	na := p.prepare(a, slot, i, g > 0)
	cores, gpus := 0, 0
	for range slots {
		if d := p.pickDomain(nd, c, g, na.gpus, nic); d != nil {
			if p.fit == HighID {
				cores += nd.coreFree.takeHighestIn(na.cores, d.cores, c)
			} else {
				cores += nd.coreFree.takeLowestIn(na.cores, d.cores, c)
			}
			if g > 0 {
				gpus += p.takeGPUs(nd, na.gpus, g, d.gpus)
			}
			continue
		}
		if p.fit == HighID {
			cores += nd.coreFree.takeHighest(na.cores, c)
		} else {
			cores += nd.coreFree.takeLowest(na.cores, c)
		}
		if g > 0 {
			gpus += p.takeGPUs(nd, na.gpus, g, nil)
		}
	}
	p.taken(i, cores, gpus)
}

// countAnd returns the number of members of both a and b.
func countAnd(a, b bitset) int {
	n := 0
	for w := range b {
		n += bits.OnesCount64(a[w] & b[w])
	}
	return n
}

// Node choice (issue 24): a node whose free cores and GPUs are in
// different domains can hold a slot only by splitting it, while another
// node may have a domain with room. The search prefers nodes that can
// hold their slots in single domains: it passes over up to
// domainSkip nodes that would split, and takes them only when the
// request cannot be met otherwise (as before). Nodes without domains,
// node-exclusive requests and slots bigger than any of a node's domains
// are matched on counts alone.

// domainSkip bounds the nodes the search passes over for splitting, so
// a pass costs at most that many extra index steps per request.
const domainSkip = 256

// splits reports whether node i would have to split one of k slots of c
// cores and g GPUs across domains, though a slot could fit in one of its
// domains. It is false for a node without domains.
func (p *Pool) splits(i int, k int, c, g int32) bool {
	nd := &p.nodes[i]
	if nd.doms == nil || k <= 0 {
		return false
	}
	n, fitsOne := 0, false
	for d := range nd.doms {
		dom := &nd.doms[d]
		if int32(dom.cores.count()) < c || int32(dom.gpus.count())/max(nd.share, 1) < g {
			continue // this domain never holds a slot
		}
		fitsOne = true
		s := int32(countAnd(nd.coreFree, dom.cores))
		if c > 0 {
			s /= c
		} else {
			s = int32(k)
		}
		if g > 0 {
			s = min(s, int32(p.distinctFree(nd, dom.gpus, nil))/g)
		}
		if n += int(s); n >= k {
			return false
		}
	}
	return fitsOne
}

// domainSlotCap is how many slots of c cores and g GPUs node i holds
// without splitting one (0 when it would split the first; the count
// capacity when it has no domains or no domain can hold a slot).
func (p *Pool) domainSlotCap(i int, max int, c, g int32) int {
	lo, hi := 0, max
	if !p.splits(i, hi, c, g) {
		return hi
	}
	// the largest k that does not split, by bisection (splits is
	// monotone in k)
	for lo < hi-1 {
		mid := (lo + hi) / 2
		if p.splits(i, mid, c, g) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}
