package sched

import "slices"

// The node search's extension points, in the shape of the Kubernetes
// scheduler framework's (filter, score, reserve), so a matching policy
// is a plugin at a named point rather than code inside the search:
//
//   - capacity: the pool's indexes offer the nodes with enough free cores
//     and GPUs (and, for a constraint, the nodes it allows: constraint.go)
//     - the search itself, not a plugin, as it is what keeps a pass cheap
//     on 16,384 nodes;
//   - filter (NodeFilter): may an offered node hold its share of the
//     request? A node a filter refuses is not used;
//   - prefer (NodePreference): would an offered node hold its share
//     badly? Such nodes are set aside (up to domainSkip a request) and
//     used only when the request cannot be met otherwise. Preferences
//     are in order of weight: a node the first sets aside is used after
//     one only a later one set aside;
//   - order (the Fit: first-fit, worst-fit, best-fit; fit.go): in what
//     order nodes are offered;
//   - reserve (the queue Policy: FCFS, EASY, hybrid, conservative;
//     policy.go, backfill.go): which blocked jobs get a reservation.
//
// The plugins a pool runs are its Profile; the built-in ones are named
// in matchPlugins. A plugin must be cheap when it does not apply (one
// comparison), as it runs for every node offered.

// NodeFilter is a filter plugin.
type NodeFilter interface {
	Name() string
	// Filter returns how many of want slots of req node i may hold in
	// v (want: all of them; 0: none).
	Filter(p *Pool, v view, req *Request, i, want int) int
}

// NodePreference is a prefer plugin.
type NodePreference interface {
	Name() string
	// Prefer returns how many of want slots of req node i holds well;
	// the rest are set aside.
	Prefer(p *Pool, v view, req *Request, i, want int) int
}

// Profile is the plugins a pool's search runs, in order.
type Profile struct {
	Filters     []NodeFilter
	Preferences []NodePreference
}

// matchPlugins are the built-in plugins by name.
var matchPlugins = map[string]any{
	"gpu-share": gpuShareFilter{},
	"numa":      numaPreference{},
	"nic":       nicPreference{},
}

// DefaultProfile is every pool's: shared GPUs counted as GPUs, slots
// kept in one NUMA domain, and those of jobs spanning nodes near a
// fabric NIC (nic.go).
func DefaultProfile() Profile {
	return Profile{
		Filters: []NodeFilter{matchPlugins["gpu-share"].(NodeFilter)},
		Preferences: []NodePreference{matchPlugins["numa"].(NodePreference),
			matchPlugins["nic"].(NodePreference)},
	}
}

// WithoutPreference returns pr without the prefer plugin named name.
func (pr Profile) WithoutPreference(name string) Profile {
	pr.Preferences = slices.DeleteFunc(slices.Clone(pr.Preferences), func(f NodePreference) bool { return f.Name() == name })
	return pr
}

// Names lists the profile's plugins as point:name.
func (pr Profile) Names() []string {
	var out []string
	for _, f := range pr.Filters {
		out = append(out, "filter:"+f.Name())
	}
	for _, f := range pr.Preferences {
		out = append(out, "prefer:"+f.Name())
	}
	return out
}

// Profile returns the pool's plugins.
func (p *Pool) Profile() Profile { return p.profile }

// SetProfile sets the pool's plugins. The gpu-share filter is kept
// whatever pr says when GPUs are shared: without it a job could be given
// two shares of one GPU.
func (p *Pool) SetProfile(pr Profile) {
	if p.share() > 1 && !slices.ContainsFunc(pr.Filters, func(f NodeFilter) bool { return f.Name() == "gpu-share" }) {
		pr.Filters = append([]NodeFilter{gpuShareFilter{}}, pr.Filters...)
	}
	p.profile = pr
	p.nicPrefer = slices.ContainsFunc(pr.Preferences, func(f NodePreference) bool { return f.Name() == "nic" })
}

// gpuShareFilter: with shared GPUs (gpushare.go) the capacity index
// counts shares; a node holds only as many slots as it has different
// GPUs with a free share for.
type gpuShareFilter struct{}

func (gpuShareFilter) Name() string { return "gpu-share" }

func (gpuShareFilter) Filter(p *Pool, v view, req *Request, i, want int) int {
	if req.SlotGPUs == 0 || p.share() == 1 {
		return want
	}
	return min(want, p.gpuRoom(v, i)/req.SlotGPUs)
}

// numaPreference: a node that would split a slot across NUMA domains
// (numa.go) is set aside for the slots it cannot hold whole.
type numaPreference struct{}

func (numaPreference) Name() string { return "numa" }

func (numaPreference) Prefer(p *Pool, v view, req *Request, i, want int) int {
	if !v.live || p.numa == 0 || req.Exclusive {
		return want
	}
	return p.domainSlotCap(i, want, int32(req.SlotCores), int32(req.SlotGPUs))
}
