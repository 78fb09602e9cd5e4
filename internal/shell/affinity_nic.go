package shell

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// NIC locality (issue 24): each task of a job spanning nodes is told
// which fabric NICs are local to the NUMA domains of its CPUs (the
// node's domains come from the instance's R, as for nearGPUs):
//
//	FLUX_TASK_NICS   the NICs' names, comma-separated, in the order the
//	                 topology lists them (mlx5_0,hsi0); unset when the
//	                 task's domains have none (the job's own value, e.g.
//	                 inherited from an enclosing job, is removed)
//	UCX_NET_DEVICES  UCX's device list (UCX, and Open MPI and MPICH
//	                 built on it, use only these devices): each of those
//	                 NICs that is an RDMA device on this machine, as
//	                 DEVICE:PORT for each active port (mlx5_0:1). Set only
//	                 when the job did not set it and there is such a
//	                 device: a list of none would leave UCX without a
//	                 network.
//
// A task's CPUs are its cpu-affinity share (per-task, map:LIST), or all
// of the job's cores on the node (on, off, dry-run). The NICs are those
// rset.NUMADomain.FabricNICs keeps (management Ethernet is left out).
// Intel MPI and Cray MPICH choose the NIC nearest a rank's CPUs on their
// own; FLUX_TASK_NICS is there for wrappers of other stacks. A job on
// one node is told nothing: its ranks talk through memory.

// sysRoot is where the kernel's sysfs is (a variable for tests).
var sysRoot = "/sys"

// nicEnv sets the NIC variables of local task i in env.
func (c *Config) nicEnv(env map[string]string, i int) {
	delete(env, "FLUX_TASK_NICS")
	if len(c.Domains) < 2 || c.Plan == nil || len(c.Plan.Ranks) < 2 {
		return
	}
	nics := c.taskNICs(i, c.Plan.Counts[c.Index])
	if len(nics) == 0 {
		return
	}
	env["FLUX_TASK_NICS"] = strings.Join(nics, ",")
	if _, ok := env["UCX_NET_DEVICES"]; ok {
		return
	}
	if devs := rdmaPorts(nics); len(devs) > 0 {
		env["UCX_NET_DEVICES"] = strings.Join(devs, ",")
	}
}

// taskCores returns the cores (R's ids, which are this node's CPU ids
// where they are CPUs) local task i of ntasks runs on.
func (c *Config) taskCores(i, ntasks int) idset.Set {
	cores, _ := c.bindResources()
	if c.CPU.DryRun || (c.CPU.Mode != AffinityPerTask && c.CPU.Mode != AffinityMap) {
		return cores
	}
	if plan := c.cpuPlan(ntasks); i < len(plan) && plan[i] != nil {
		var s idset.Set
		for _, cpu := range plan[i] {
			s.Add(uint(cpu))
		}
		return s
	}
	if c.CPU.Mode == AffinityMap {
		return cores
	}
	// per-task on cores that are not this machine's CPUs (a simulated
	// inventory): the share per-task would bind
	all := slices.Collect(cores.All())
	if len(all) == 0 {
		return cores
	}
	lo, hi := share(i, ntasks, len(all))
	var s idset.Set
	for _, id := range all[lo:hi] {
		s.Add(id)
	}
	return s
}

// taskNICs returns the fabric NICs of the domains holding local task
// i's cores, in domain order, each once.
func (c *Config) taskNICs(i, ntasks int) []string {
	cores := c.taskCores(i, ntasks)
	var out []string
	for _, d := range c.Domains {
		if d.Cores.Intersect(cores).Empty() {
			continue
		}
		for _, n := range d.FabricNICs() {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// maxPorts bounds the ports read for one device.
const maxPorts = 64

// rdmaPorts returns DEVICE:PORT for each active port of those of nics
// that are RDMA devices here (sysfs class/infiniband/DEVICE/ports/N/state
// reads "4: ACTIVE"), in nics' order and port order.
func rdmaPorts(nics []string) []string {
	var out []string
	for _, n := range nics {
		if strings.ContainsAny(n, "/\x00") || n == "." || n == ".." {
			continue
		}
		dir := filepath.Join(sysRoot, "class", "infiniband", n, "ports")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // not an RDMA device (or not on this machine)
		}
		var ports []int
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil || p < 0 || len(ports) == maxPorts {
				continue
			}
			state, err := os.ReadFile(filepath.Join(dir, e.Name(), "state"))
			if err == nil && strings.Contains(string(state), "ACTIVE") {
				ports = append(ports, p)
			}
		}
		slices.Sort(ports)
		for _, p := range ports {
			out = append(out, n+":"+strconv.Itoa(p))
		}
	}
	return out
}
