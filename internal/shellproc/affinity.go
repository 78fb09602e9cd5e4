package shellproc

import (
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// The cpu-affinity and gpu-affinity shell options (shell/affinity.go),
// and the node's NUMA domains they need to place each task's CPUs near
// its GPUs and to tell the tasks of a job spanning nodes their NICs. The job's R does not carry the domains (the scheduler leaves
// the instance's out of it); the instance's inventory (its R's
// scheduling key) does, whichever source they came from: hwloc XML
// given to the instance, sysfs, or the configuration. The shell asks
// the resource module for its node's (resource.numa), which answers any
// user, so a guest's shell places its tasks as the owner's does.

// affinity holds a job's parsed binding options.
type affinity struct {
	cpu shell.CPUAffinity
	gpu shell.GPUAffinity
	// warnings are flux-core's for values that are not strings
	warnings []string
}

// parseAffinity reads the job's binding options.
func parseAffinity(opts map[string]any) (affinity, error) {
	var a affinity
	var warn string
	var err error
	if a.cpu, warn, err = shell.ParseCPUAffinity(opts["cpu-affinity"]); err != nil {
		return a, err
	}
	if warn != "" {
		a.warnings = append(a.warnings, warn)
	}
	if a.gpu, warn, err = shell.ParseGPUAffinity(opts["gpu-affinity"]); err != nil {
		return a, err
	}
	if warn != "" {
		a.warnings = append(a.warnings, warn)
	}
	return a, nil
}

// wantsDomains says whether this node's tasks depend on the node's NUMA
// domains: the job spans nodes (its tasks are told the NICs near their
// CPUs, shell/affinity_nic.go), or a binds CPUs per task and GPUs per
// task or by map, with more than one task to place.
func (a affinity) wantsDomains(plan *shell.Plan, idx int) bool {
	if len(plan.Ranks) > 1 && plan.Counts[idx] > 0 {
		return true
	}
	if a.cpu.Mode != shell.AffinityPerTask || plan.Counts[idx] < 2 {
		return false
	}
	switch a.gpu.Mode {
	case shell.AffinityPerTask:
		return plan.GPUs[idx].Count() > 0
	case shell.AffinityMap:
		return true
	}
	return false
}

// domainLookup is a job's lookup of the node's domains, under way.
type domainLookup struct {
	signal syscall.Signal // the first signal the job got meanwhile
}

// lookupDomains asks for the node's NUMA domains (resource.numa) and
// then launches the job. A lookup that fails (an instance without the
// resource module) leaves the job without domains: its tasks are bound
// per task in order.
func (j *job) lookupDomains() error {
	x := j.x
	j.domainsLooked = true
	f, err := x.h.RPC("resource.numa", flux.NodeidAny, wire.ResourceNUMA{Rank: x.rank}, 0)
	if err != nil {
		return j.launch()
	}
	wait := &domainLookup{}
	j.lookup = wait
	f.Then(func(m *flux.Message, err error) {
		j.lookup = nil
		if j.ctx.Err() != nil {
			return // the job was abandoned meanwhile
		}
		if wait.signal != 0 {
			j.abandon()
			j.startFailed(fmt.Errorf("interrupted: the job was sent signal %d (%v) before its tasks started", int(wait.signal), wait.signal))
			return
		}
		if err == nil {
			var resp wire.ResourceNUMAResponse
			if err := m.UnmarshalPayload(&resp); err == nil && len(resp.Domains) > 0 {
				j.domains = resp.Domains
			}
		} else {
			x.log.Debug("no NUMA domains for task placement", "job", j.id.String(), "err", err)
		}
		if err := j.launch(); err != nil {
			j.abandon()
			j.startFailed(err)
		}
	})
	return nil
}
