package cli

import (
	"math"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// The topology fields of flux resource list and info, from the NUMA
// domains the inventory records in R's scheduling key (rset.NUMAKey):
//
//	nnuma     NUMA domains holding some of the line's cores or GPUs
//	nsockets  sockets holding such domains
//	nnics     network interfaces local to such domains
//	memory    those domains' memory ("256G"; "-" when the record has
//	          none for them)
//
// A node without a record counts none of them (its layout is not
// known), so the counts are 0 on an instance without domains.

// numaIndex is the inventory's domains by rank.
type numaIndex map[uint][]rset.NUMADomain

// newNUMAIndex reads R's domains; a malformed record reads as none.
func newNUMAIndex(R *rset.R) numaIndex {
	if R == nil {
		return nil
	}
	groups, err := R.NUMA()
	if err != nil || len(groups) == 0 {
		return nil
	}
	x := make(numaIndex)
	for _, g := range groups {
		for rank := range g.Ranks.All() {
			x[rank] = g.Domains
		}
	}
	return x
}

// numaCounts is what numaIndex.count counts.
type numaCounts struct {
	domains, sockets, nics int
	memory                 uint64 // bytes
}

// memoryString writes the memory counted as flux's sizes read ("-"
// for none).
func (c numaCounts) memoryString() string {
	if c.memory == 0 {
		return "-"
	}
	return size.Format(int64(min(c.memory, math.MaxInt64)))
}

// count counts the domains of set's nodes that hold some of set's cores
// or GPUs there, their sockets and their NICs.
func (x numaIndex) count(set *rset.R) numaCounts {
	var c numaCounts
	if len(x) == 0 || set == nil {
		return c
	}
	for n := range set.All() {
		doms := x[n.Rank]
		if len(doms) == 0 {
			continue
		}
		sockets := make(map[int]bool)
		nics := make(map[string]bool)
		for _, d := range doms {
			if d.Cores.Intersect(n.Cores).Empty() && d.GPUs.Intersect(n.GPUs).Empty() {
				continue
			}
			c.domains++
			if c.memory += d.Memory; c.memory < d.Memory {
				c.memory = math.MaxUint64 // saturated
			}
			if s, ok := d.SocketID(); ok {
				sockets[s] = true
			}
			for _, nic := range d.NICs {
				nics[nic] = true
			}
		}
		c.sockets += len(sockets)
		c.nics += len(nics)
	}
	return c
}
