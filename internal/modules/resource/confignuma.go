package resource

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// NUMA domains from the configuration, for hosts declared without
// their hardware ([[resource.config]] entries, often with
// resource.noverify or monitor-force-up):
//
//	[[resource.config]]
//	hosts = "node[0-15]"
//	cores = "0-47"
//	gpus = "0-7"
//	numa = [
//	  { cores = "0-23", gpus = "0-3", socket = 0, nics = ["mlx5_0"], memory = "128G" },
//	  { cores = "24-47", gpus = "4-7", socket = 1, memory = "128G" },
//	]
//
// Each domain needs cores; gpus, socket (a logical id, 0 or more), nics
// (interface names) and memory (bytes, or a size such as "128G") are
// optional. A domain's ids must be among the
// entry's own cores and GPUs, and no core or GPU may be in two domains
// of a host, whether one entry or several declare them. Cores in no
// domain are allowed: a slot that takes them is matched as without
// domains. The domains go into R's scheduling key (rset.NUMAKey) as
// discovered ones do.

// ConfigDomain is one NUMA domain of a [[resource.config]] entry.
type ConfigDomain struct {
	Cores  string   `json:"cores" toml:"cores"`
	GPUs   string   `json:"gpus,omitempty" toml:"gpus"`
	Socket *int     `json:"socket,omitempty" toml:"socket"`
	NICs   []string `json:"nics,omitempty" toml:"nics"`
	// Memory is bytes (a number) or a size ("128G"); nil: unknown.
	Memory any `json:"memory,omitempty" toml:"memory"`
}

// entryDomains checks and converts the domains of entry i, whose cores
// and GPUs are given.
func entryDomains(i int, e ConfigEntry, cores, gpus idset.Set) ([]rset.NUMADomain, error) {
	var doms []rset.NUMADomain
	var seenCores, seenGPUs idset.Set
	for j, d := range e.NUMA {
		key := fmt.Sprintf("resource.config[%d].numa[%d]", i, j)
		if d.Cores == "" {
			return nil, fmt.Errorf("%w: %s.cores is required (the domain's core ids)", ErrConfig, key)
		}
		dc, err := idset.Parse(d.Cores)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.cores %q: %v", ErrConfig, key, d.Cores, err)
		}
		var dg idset.Set
		if d.GPUs != "" {
			if dg, err = idset.Parse(d.GPUs); err != nil {
				return nil, fmt.Errorf("%w: %s.gpus %q: %v", ErrConfig, key, d.GPUs, err)
			}
		}
		if out := dc.Difference(cores); !out.Empty() {
			return nil, fmt.Errorf("%w: %s.cores %q: core %s is not among the entry's cores (%s)", ErrConfig, key, d.Cores, out, orNone(cores))
		}
		if out := dg.Difference(gpus); !out.Empty() {
			return nil, fmt.Errorf("%w: %s.gpus %q: gpu %s is not among the entry's gpus (%s)", ErrConfig, key, d.GPUs, out, orNone(gpus))
		}
		if x := dc.Intersect(seenCores); !x.Empty() {
			return nil, fmt.Errorf("%w: %s.cores %q: core %s is in an earlier domain too", ErrConfig, key, d.Cores, x)
		}
		if x := dg.Intersect(seenGPUs); !x.Empty() {
			return nil, fmt.Errorf("%w: %s.gpus %q: gpu %s is in an earlier domain too", ErrConfig, key, d.GPUs, x)
		}
		if d.Socket != nil && *d.Socket < 0 {
			return nil, fmt.Errorf("%w: %s.socket %d: want a socket id of 0 or more", ErrConfig, key, *d.Socket)
		}
		if d.Socket != nil && *d.Socket >= len(e.NUMA) {
			// logical ids, 0 to n-1, and a socket holds a domain or more
			return nil, fmt.Errorf("%w: %s.socket %d: want a logical socket id below %d (the entry declares %d domains, and a socket holds one or more)",
				ErrConfig, key, *d.Socket, len(e.NUMA), len(e.NUMA))
		}
		for _, nic := range d.NICs {
			if nic == "" {
				return nil, fmt.Errorf("%w: %s.nics: an empty interface name", ErrConfig, key)
			}
		}
		var mem uint64
		if d.Memory != nil {
			b, err := size.Parse(d.Memory)
			if err == nil && b > rset.MaxDomainMemory {
				err = fmt.Errorf("above %s", size.Format(rset.MaxDomainMemory))
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %s.memory %v: %v", ErrConfig, key, jsonValue(d.Memory), err)
			}
			mem = uint64(b)
		}
		seenCores, seenGPUs = seenCores.Union(dc), seenGPUs.Union(dg)
		dom := rset.NUMADomain{Cores: dc, GPUs: dg, NICs: d.NICs, Memory: mem}
		if d.Socket != nil {
			dom = dom.WithSocket(*d.Socket)
		}
		doms = append(doms, dom)
	}
	return doms, nil
}

// addDomains gives host the domains of entry i, refusing ids another
// entry's domains gave it already.
func (he *hostEntry) addDomains(host string, i int, doms []rset.NUMADomain) error {
	for j, d := range doms {
		for k, old := range he.numa {
			if x := d.Cores.Intersect(old.Cores); !x.Empty() {
				return fmt.Errorf("%w: resource.config[%d].numa[%d].cores %q: core %s of host %s is in a domain of resource.config[%d] too",
					ErrConfig, i, j, d.Cores, x, host, he.numaFrom[k])
			}
			if x := d.GPUs.Intersect(old.GPUs); !x.Empty() {
				return fmt.Errorf("%w: resource.config[%d].numa[%d].gpus %q: gpu %s of host %s is in a domain of resource.config[%d] too",
					ErrConfig, i, j, d.GPUs, x, host, he.numaFrom[k])
			}
		}
	}
	for range doms {
		he.numaFrom = append(he.numaFrom, i)
	}
	he.numa = append(he.numa, doms...)
	return nil
}

// setConfigNUMA records the hosts' declared domains in R's scheduling
// key; order gives the hosts by rank.
func setConfigNUMA(R *rset.R, order []string, hosts map[string]*hostEntry) error {
	var groups []rset.NUMAGroup
	for rank, h := range order {
		if doms := hosts[h].numa; len(doms) > 0 {
			groups = append(groups, rset.NUMAGroup{Ranks: idset.New(uint(rank)), Domains: doms})
		}
	}
	if len(groups) == 0 {
		return nil
	}
	if err := R.SetNUMA(rset.MergeNUMA(nil, groups)); err != nil {
		return fmt.Errorf("%w: resource.config: recording NUMA domains: %v", ErrConfig, err)
	}
	return nil
}

// jsonValue writes a configuration value as it was given ("lots", 12).
func jsonValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
