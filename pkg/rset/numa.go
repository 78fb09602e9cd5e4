package rset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// NUMAKey is the key of R's "scheduling" object under which fluxgo
// records the NUMA domains of its nodes. RFC 20 leaves "scheduling" to
// the scheduler and R_lite has no level between a rank and its cores, so
// the domains live there:
//
//	"scheduling": {"fluxgo.numa": [
//	  {"ranks": "0-3", "domains": [{"cores": "0-23", "gpus": "0-3"},
//	                               {"cores": "24-47", "gpus": "4-7"}]}
//	]}
//
// One entry per group of ranks with identical domains; the core and GPU
// ids are R_lite's (logical, per rank). "gpus" is left out for a domain
// without GPUs. A rank in no entry has no domain information and is
// matched without it. Other keys of "scheduling" are kept as they are.
//
// A domain may also say which socket holds it and which network
// interfaces are local to it, when the source knows (hwloc's Package
// and network/OpenFabrics OS devices, sysfs, the configuration):
//
//	{"cores": "0-23", "gpus": "0-3", "socket": 0, "nics": ["mlx5_0", "hsi0"],
//	 "memory": 134734184448}
//
// "socket" is the socket's logical id on the node (0..n-1 in the
// node's order), left out when unknown; "nics" is left out when there
// are none; "memory" is the domain's local memory in bytes, left out
// when unknown. Readers ignore keys they do not know, so a record with these
// keys reads as before where they are not understood.
const NUMAKey = "fluxgo.numa"

// NUMADomain is one NUMA domain of a node: the cores and GPUs local to
// it, and where known the socket holding it and the network interfaces
// local to it.
type NUMADomain struct {
	Cores idset.Set
	GPUs  idset.Set
	// Socket is the logical id of the socket holding the domain, nil
	// when unknown.
	Socket *int
	// NICs are the names of the network interfaces local to the domain
	// (mlx5_0, hfi1_0, ib0, ...), in the order the source lists them.
	NICs []string
	// Memory is the domain's local memory in bytes, 0 when unknown.
	Memory uint64
}

// SocketID returns the domain's socket and whether it is known.
func (d NUMADomain) SocketID() (int, bool) {
	if d.Socket == nil {
		return 0, false
	}
	return *d.Socket, true
}

// WithSocket returns d with its socket set to id.
func (d NUMADomain) WithSocket(id int) NUMADomain {
	d.Socket = &id
	return d
}

// FabricNICs returns the domain's NICs that may carry a parallel job's
// traffic between nodes: all but Ethernet and wireless interfaces by
// their kernel names (en*, eth*, wl*, ww*: systemd's predictable names
// and the kernel's own), which on an HPC node are the management
// network. InfiniBand and RoCE devices (mlx5_0, hfi1_0, bnxt_re0),
// IP-over-InfiniBand (ib0, ibp94s0) and Slingshot interfaces (hsi0,
// hsn0, cxi0) are kept.
func (d NUMADomain) FabricNICs() []string {
	var out []string
	for _, n := range d.NICs {
		if IsFabricNIC(n) {
			out = append(out, n)
		}
	}
	return out
}

// IsFabricNIC reports whether the interface named name may carry a
// parallel job's traffic (see FabricNICs).
func IsFabricNIC(name string) bool {
	for _, p := range []string{"en", "eth", "wl", "ww"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return name != ""
}

// MaxDomainMemory bounds a domain's memory (1 EiB: sums over 16,384
// nodes still fit an int64).
const MaxDomainMemory = 1 << 60

// NUMAGroup is a set of ranks whose nodes have the same domains.
type NUMAGroup struct {
	Ranks   idset.Set
	Domains []NUMADomain
}

// the wire form of a NUMADomain (idset.Set has no "empty" for omitempty)
type numaDomainJSON struct {
	Cores  string   `json:"cores"`
	GPUs   string   `json:"gpus,omitempty"`
	Socket *int     `json:"socket,omitempty"`
	NICs   []string `json:"nics,omitempty"`
	Memory uint64   `json:"memory,omitempty"`
}

func (d NUMADomain) wire() numaDomainJSON {
	return numaDomainJSON{Cores: d.Cores.String(), GPUs: d.GPUs.String(), Socket: d.Socket, NICs: d.NICs, Memory: d.Memory}
}

type numaGroupJSON struct {
	Ranks   string           `json:"ranks"`
	Domains []numaDomainJSON `json:"domains"`
}

// MarshalJSON writes d in its wire form.
func (d NUMADomain) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.wire())
}

// UnmarshalJSON reads d from its wire form.
func (d *NUMADomain) UnmarshalJSON(b []byte) error {
	var w numaDomainJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	cores, err := idset.Parse(w.Cores)
	if err != nil {
		return fmt.Errorf("cores: %w", err)
	}
	gpus, err := idset.Parse(w.GPUs)
	if err != nil {
		return fmt.Errorf("gpus: %w", err)
	}
	if w.Socket != nil && *w.Socket < 0 {
		return fmt.Errorf("socket %d: want a logical id of 0 or more", *w.Socket)
	}
	if w.Memory > MaxDomainMemory {
		return fmt.Errorf("memory %d: want at most %d bytes", w.Memory, uint64(MaxDomainMemory))
	}
	*d = NUMADomain{Cores: cores, GPUs: gpus, Socket: w.Socket, NICs: w.NICs, Memory: w.Memory}
	return nil
}

// MarshalJSON writes g in its wire form.
func (g NUMAGroup) MarshalJSON() ([]byte, error) {
	w := numaGroupJSON{Ranks: g.Ranks.String(), Domains: make([]numaDomainJSON, len(g.Domains))}
	for i, d := range g.Domains {
		w.Domains[i] = d.wire()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads g from its wire form.
func (g *NUMAGroup) UnmarshalJSON(b []byte) error {
	var w struct {
		Ranks   string       `json:"ranks"`
		Domains []NUMADomain `json:"domains"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	ranks, err := idset.Parse(w.Ranks)
	if err != nil {
		return fmt.Errorf("ranks: %w", err)
	}
	*g = NUMAGroup{Ranks: ranks, Domains: w.Domains}
	return nil
}

// NUMA returns the NUMA domains recorded in r's scheduling key (see
// NUMAKey), nil if there are none. It fails with ErrInvalid if the key
// is there but malformed.
func (r *R) NUMA() ([]NUMAGroup, error) {
	raw := numaRaw(r.scheduling)
	if raw == nil {
		return nil, nil
	}
	var groups []NUMAGroup
	if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, errorf(ErrInvalid, "scheduling.%s: %v", NUMAKey, err)
	}
	return groups, nil
}

// numaRaw returns the value of NUMAKey in a scheduling value, nil when
// there is none (or the value is not an object).
func numaRaw(sched json.RawMessage) json.RawMessage {
	if !bytes.Contains(sched, []byte(`"`+NUMAKey+`"`)) {
		return nil // the common case, without a decode
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(sched, &obj) != nil {
		return nil
	}
	return obj[NUMAKey]
}

// SetNUMA records groups in r's scheduling key, keeping its other keys;
// nil or empty groups remove the record. It fails with ErrInvalid if the
// scheduling value is there and is not a JSON object.
func (r *R) SetNUMA(groups []NUMAGroup) error {
	obj := make(map[string]json.RawMessage)
	if len(r.scheduling) > 0 {
		if err := json.Unmarshal(r.scheduling, &obj); err != nil || obj == nil {
			return errorf(ErrInvalid, "scheduling is not an object: cannot add %s", NUMAKey)
		}
	}
	if len(groups) == 0 {
		delete(obj, NUMAKey)
	} else {
		b, err := json.Marshal(groups)
		if err != nil {
			return errorf(ErrInvalid, "scheduling.%s: %v", NUMAKey, err)
		}
		obj[NUMAKey] = b
	}
	if len(obj) == 0 {
		r.scheduling = nil
		return nil
	}
	b, err := json.Marshal(obj) // keys sorted: the same R encodes the same
	if err != nil {
		return errorf(ErrInvalid, "scheduling: %v", err)
	}
	return r.SetScheduling(b)
}

// SchedulingWithoutNUMA returns a scheduling value without its NUMAKey
// (nil when nothing else is left); any other value is returned as it
// is. A job's R leaves the instance's domains out: their ranks are the
// instance's, not those of an instance the job may start.
func SchedulingWithoutNUMA(sched json.RawMessage) json.RawMessage {
	if numaRaw(sched) == nil {
		return sched
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(sched, &obj) != nil {
		return sched
	}
	delete(obj, NUMAKey)
	if len(obj) == 0 {
		return nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return sched
	}
	return b
}

// RestrictNUMA returns the part of groups on ranks: each group keeps
// only those of its ranks, and a group left without ranks is dropped.
func RestrictNUMA(groups []NUMAGroup, ranks idset.Set) []NUMAGroup {
	var out []NUMAGroup
	for _, g := range groups {
		if r := g.Ranks.Intersect(ranks); !r.Empty() {
			out = append(out, NUMAGroup{Ranks: r, Domains: g.Domains})
		}
	}
	return out
}

// MergeNUMA returns the groups of a with those of b over them: a rank
// b names has b's domains, the others keep a's. Groups with the same
// domains become one, in the order they first appear.
func MergeNUMA(a, b []NUMAGroup) []NUMAGroup {
	var inB idset.Set
	for _, g := range b {
		inB = inB.Union(g.Ranks)
	}
	var out []NUMAGroup
	byKey := make(map[string]int)
	add := func(g NUMAGroup) {
		if g.Ranks.Empty() {
			return
		}
		key := domainsKey(g.Domains)
		if i, ok := byKey[key]; ok {
			out[i].Ranks = out[i].Ranks.Union(g.Ranks)
			return
		}
		byKey[key] = len(out)
		out = append(out, NUMAGroup{Ranks: g.Ranks, Domains: g.Domains})
	}
	for _, g := range a {
		add(NUMAGroup{Ranks: g.Ranks.Difference(inB), Domains: g.Domains})
	}
	for _, g := range b {
		add(g)
	}
	return out
}

// domainsKey is a key equal for equal domain lists.
func domainsKey(doms []NUMADomain) string {
	w := make([]numaDomainJSON, len(doms))
	for i, d := range doms {
		w[i] = d.wire()
	}
	b, _ := json.Marshal(w)
	return string(b)
}

// NodeNUMA returns the NUMA domains r's scheduling key records for rank
// (nil when it records none, or the record does not parse).
func (r *R) NodeNUMA(rank uint) []NUMADomain {
	groups, err := r.NUMA()
	if err != nil {
		return nil
	}
	for _, g := range groups {
		if g.Ranks.Contains(rank) {
			return g.Domains
		}
	}
	return nil
}
