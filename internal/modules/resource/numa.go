package resource

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// NUMA domains from hwloc XML.
//
// hwloc 1.x puts cores under their NUMANode; hwloc 2.x hangs NUMANodes
// beside the cores as memory children of a Package or Group. Both give
// every object a CPU set, so a core belongs to the NUMA node whose CPU set
// holds its first CPU, whatever the tree. PCI devices have no CPU set:
// a GPU is local to the CPU set of its nearest ancestor that has one
// (the Package, Group or NUMANode its host bridge hangs under), and
// belongs to the NUMA node holding that set's first CPU. NUMA nodes
// without CPUs (GPU or high-bandwidth memory) are not domains. Network
// interfaces (OS devices of the network and OpenFabrics types: ib0,
// hsi0, mlx5_0, hfi1_0) are placed as GPUs are; a domain's socket is the
// Package (Socket in hwloc 1.x) holding its first CPU, numbered 0..n-1
// in document order; its memory is the NUMA node's local_memory.
//
// Cores are numbered as R numbers them, 0..n-1 in document order. A GPU's
// id is the number its device name ends with (cuda1, rsmi3, nvml0,
// opencl0d2) when the backend's names number its devices 0..n-1, else its
// place in document order: the ids CUDA_VISIBLE_DEVICES and
// ROCR_VISIBLE_DEVICES take.

// cpuset is an hwloc CPU set, 32 CPUs a word, lowest word first.
type cpuset []uint32

// parseCpuset reads hwloc's "0x000000ff,0xffff0000,,0x00ffffff" form:
// comma-separated 32-bit words, most significant first, empty for 0; a
// leading "0xf...f" (an infinite set) counts as 32 CPUs.
func parseCpuset(s string) (cpuset, error) {
	words := strings.Split(s, ",")
	c := make(cpuset, len(words))
	for i, w := range words {
		var v uint64
		switch w {
		case "", "0x0":
		case "0xf...f":
			v = 0xffffffff
		default:
			n, err := strconv.ParseUint(strings.TrimPrefix(w, "0x"), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("cpuset %q", s)
			}
			v = n
		}
		c[len(words)-1-i] = uint32(v)
	}
	return c, nil
}

func (c cpuset) empty() bool { return c.first() < 0 }

// first returns the lowest CPU of c, -1 for none.
func (c cpuset) first() int {
	for i, w := range c {
		for b := range 32 {
			if w&(1<<b) != 0 {
				return i*32 + b
			}
		}
	}
	return -1
}

func (c cpuset) has(cpu int) bool {
	return cpu >= 0 && cpu/32 < len(c) && c[cpu/32]&(1<<(cpu%32)) != 0
}

// gpuDev is a GPU (or network) OS device: its name and the CPU set it
// is local to.
type gpuDev struct {
	name string
	near cpuset
}

// locality returns the innermost CPU set among the open objects.
func locality(open []cpuset) cpuset {
	for i := len(open) - 1; i >= 0; i-- {
		if open[i] != nil {
			return open[i]
		}
	}
	return nil
}

// domainOf returns the NUMA node holding cpu, -1 for none.
func (t *hwlocTopology) domainOf(cpu int) int {
	for d, n := range t.numaSets {
		if n.has(cpu) {
			return d
		}
	}
	return -1
}

// domains returns the topology's NUMA domains, nil when it has fewer
// than two (one domain holds every slot: nothing to choose), or when a
// core lies outside every domain (the topology is not one this reading
// understands; matching then goes on without domains).
func (t hwlocTopology) domains() []rset.NUMADomain {
	if len(t.numaSets) < 2 {
		return nil
	}
	sets := t.coreSets
	if t.Cores == 0 {
		sets = t.puSets
	}
	doms := make([]rset.NUMADomain, len(t.numaSets))
	for id, c := range sets {
		d := t.domainOf(c.first())
		if d < 0 {
			return nil
		}
		doms[d].Cores.Add(uint(id))
	}
	// a GPU without a locality is in no domain: it is taken only by
	// slots that spread
	for id, dev := range t.gpuList() {
		if d := t.domainOf(dev.near.first()); d >= 0 {
			doms[d].GPUs.Add(uint(id))
		}
	}
	for _, nic := range t.nics {
		if d := t.domainOf(nic.near.first()); d >= 0 {
			doms[d].NICs = append(doms[d].NICs, nic.name)
		}
	}
	for d, n := range t.numaSets {
		doms[d].Memory = t.numaMemory[d]
		for s, p := range t.packageSets {
			if p.has(n.first()) {
				doms[d] = doms[d].WithSocket(s)
				break
			}
		}
	}
	return doms
}

// gpuList returns the GPUs of the backend local() counts (the most
// devices; the first name in order on a tie), by id.
func (t hwlocTopology) gpuList() []gpuDev {
	var best string
	for b, devs := range t.gpuDevs {
		if len(devs) > len(t.gpuDevs[best]) || len(devs) == len(t.gpuDevs[best]) && b < best {
			best = b
		}
	}
	devs := t.gpuDevs[best]
	// by the number the names end with, if they number 0..n-1
	byNum := make([]gpuDev, len(devs))
	seen := make([]bool, len(devs))
	for _, dev := range devs {
		end := len(dev.name)
		for end > 0 && dev.name[end-1] >= '0' && dev.name[end-1] <= '9' {
			end--
		}
		n, err := strconv.Atoi(dev.name[end:])
		if err != nil || n >= len(devs) || seen[n] {
			return devs
		}
		byNum[n], seen[n] = dev, true
	}
	return byNum
}

// numaGroups groups ranks whose domains are identical, for R's
// scheduling key; ranks without domains are left out. It returns nil
// when no rank has domains.
func numaGroups(reports map[uint32]helloPayload, ranks idset.Set) []rset.NUMAGroup {
	var groups []rset.NUMAGroup
	byKey := make(map[string]int)
	for rank := range ranks.All() {
		rep, ok := reports[uint32(rank)]
		if !ok || len(rep.NUMA) == 0 {
			continue
		}
		b, _ := json.Marshal(rep.NUMA)
		k, ok := byKey[string(b)]
		if !ok {
			k = len(groups)
			byKey[string(b)] = k
			groups = append(groups, rset.NUMAGroup{Domains: slices.Clone(rep.NUMA)})
		}
		groups[k].Ranks.Add(rank)
	}
	return groups
}

// setDiscoveredNUMA records the domains the ranks reported in R's
// scheduling key (merged with what is there).
func setDiscoveredNUMA(R *rset.R, reports map[uint32]helloPayload) error {
	groups := numaGroups(reports, R.Ranks())
	if groups == nil {
		return nil
	}
	if err := R.SetNUMA(groups); err != nil {
		return fmt.Errorf("recording NUMA domains: %w", err)
	}
	return nil
}

// keepNUMA fixes R's domains after its nodes changed: those of ranks R
// no longer has are dropped, and the domains added (the R of a grow, nil
// for none) brings for its own ranks are recorded over what R had for
// them. R's other scheduling keys are left as they are.
func keepNUMA(R, added *rset.R) error {
	groups, err := R.NUMA()
	if err != nil {
		return err
	}
	kept := rset.RestrictNUMA(groups, R.Ranks())
	if added != nil {
		more, err := added.NUMA()
		if err != nil {
			return fmt.Errorf("the added R: %w", err)
		}
		kept = rset.MergeNUMA(kept, rset.RestrictNUMA(more, added.Ranks()))
	}
	if len(kept) == 0 && len(groups) == 0 {
		return nil
	}
	return R.SetNUMA(kept)
}
