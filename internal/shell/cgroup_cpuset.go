package shell

// CPU containment and accounting with cgroups: a job's cgroup on a node
// gets cpuset.cpus = the job's cores here that are CPUs of this machine
// and cpuset.mems = the memory nodes of those CPUs, so a task sees only
// its job's CPUs whatever its affinity; its CPU time is read from the
// job's cgroup when the tasks are done (v2 cpu.stat, v1 cpuacct.usage).
// On cgroup v1 the cpuset, devices and cpuacct controllers are
// hierarchies of their own: the job has a cgroup in each, beside its
// memory cgroup, made the same way (<hierarchy>/<this process's
// cgroup>/fluxgo-<pid>-<n>/job-<id>).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// FindV1Cgroup returns this process's cgroup directory in the cgroup v1
// hierarchy that has controller (cpuset, devices, cpuacct); the error
// wraps ErrNoCgroup when there is none.
func FindV1Cgroup(controller string) (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	return findV1Cgroup(mi, cg, controller)
}

// findV1Cgroup is FindV1Cgroup on given file contents.
func findV1Cgroup(mountinfo, selfCgroup []byte, controller string) (string, error) {
	path, ok := "", false
	sc := bufio.NewScanner(bytes.NewReader(selfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[0] != "0" && contains(strings.Split(parts[1], ","), controller) {
			path, ok = parts[2], true
		}
	}
	if !ok {
		return "", fmt.Errorf("%w: no cgroup v1 %s hierarchy", ErrNoCgroup, controller)
	}
	for _, m := range parseMountinfo(mountinfo) {
		if m.v2 || !contains(m.controllers, controller) {
			continue
		}
		if dir := join(m, path); dir != "" {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: the cgroup v1 %s controller is not mounted", ErrNoCgroup, controller)
}

// NewV1Cgroup makes the directory name below dir, a cgroup of a v1
// hierarchy (taking it as it is when it exists); in the cpuset
// hierarchy it gets its parent's CPUs and memory nodes (a new v1 cpuset
// has none, and takes no task until it has some).
func NewV1Cgroup(dir, name string) (*Cgroup, error) {
	g := &Cgroup{Path: filepath.Join(dir, name), Version: 1}
	if err := os.Mkdir(g.Path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup %s: %w", g.Path, err)
	}
	if err := g.inheritCpuset(); err != nil {
		os.Remove(g.Path)
		return nil, err
	}
	return g, nil
}

// inheritCpuset gives a v1 cpuset cgroup its parent's CPUs and memory
// nodes (nothing in another hierarchy).
func (g *Cgroup) inheritCpuset() error {
	if g.Version != 1 {
		return nil
	}
	parent := filepath.Dir(g.Path)
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(parent, f))
		if errors.Is(err, os.ErrNotExist) {
			return nil // not the cpuset hierarchy
		}
		if err != nil {
			return err
		}
		if cur, _ := os.ReadFile(filepath.Join(g.Path, f)); strings.TrimSpace(string(cur)) != "" {
			continue
		}
		if err := writeFile(filepath.Join(g.Path, f), strings.TrimSpace(string(b))); err != nil {
			return err
		}
	}
	return nil
}

// HasCpuset says whether the cgroup has the cpuset controller's files.
func (g *Cgroup) HasCpuset() bool {
	_, err := os.Stat(filepath.Join(g.Path, "cpuset.cpus"))
	return err == nil
}

// SetCpuset confines the cgroup to cpus and, when mems is not empty,
// those memory nodes; with no mems the parent's effective ones are used.
func (g *Cgroup) SetCpuset(cpus, mems []int) error {
	m := formatIDs(mems)
	if len(mems) == 0 {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(g.Path), "cpuset.effective_mems"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join(filepath.Dir(g.Path), "cpuset.mems"))
		}
		if err != nil {
			return err
		}
		m = strings.TrimSpace(string(b))
	}
	// mems first: a v1 cpuset takes no CPUs before it has memory nodes
	// in some kernels' order of checks, and neither hurts on v2
	if m != "" {
		if err := writeFile(filepath.Join(g.Path, "cpuset.mems"), m); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(g.Path, "cpuset.cpus"), formatIDs(cpus))
}

// formatIDs formats ids as an idset ("0-3,8").
func formatIDs(ids []int) string {
	var s idset.Set
	for _, id := range ids {
		s.Add(uint(id))
	}
	return s.String()
}

// nodeDir is where the kernel lists the NUMA nodes (a variable for
// tests).
var nodeDir = "/sys/devices/system/node"

// MemoryNodesOf returns the NUMA memory nodes whose CPUs include one of
// cpus (nil when the machine does not say: use the parent's).
func MemoryNodesOf(cpus []int) []int {
	ents, err := os.ReadDir(nodeDir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(nodeDir, e.Name(), "cpulist"))
		if err != nil {
			continue
		}
		set, err := idset.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		for _, c := range cpus {
			if set.Contains(uint(c)) {
				out = append(out, n)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// JobCPUs returns the job's cores on shell index idx of the plan that
// are CPUs this process may run on (the CPUs cpu-affinity binds to);
// nil when none are (a simulated inventory): then there is no cpuset.
func JobCPUs(p *Plan, idx int) []int {
	avail := map[int]bool{}
	for _, cpu := range onlineCPUs() {
		avail[cpu] = true
	}
	var cores []int
	for id := range p.Cores[idx].All() {
		if avail[int(id)] {
			cores = append(cores, int(id))
		}
	}
	return cores
}

// TaskCPUs returns the CPUs each of the n local tasks is bound to under
// cpu-affinity (nil entries: not bound). A cpuset a task is moved into
// resets its affinity to the whole set: this is what to give back.
func (c *Config) TaskCPUs(n int) [][]int { return c.cpuAssignment(n) }

// CPUTime returns the CPU time the cgroup's processes used (v2:
// cpu.stat usage_usec; v1: cpuacct.usage, in a cgroup of the cpuacct
// hierarchy), and whether the kernel said.
func (g *Cgroup) CPUTime() (time.Duration, bool) {
	if g.Version == 2 {
		b, err := os.ReadFile(filepath.Join(g.Path, "cpu.stat"))
		if err != nil {
			return 0, false
		}
		us, err := keyedValue(b, "usage_usec")
		if err != nil {
			return 0, false
		}
		return time.Duration(us) * time.Microsecond, true
	}
	b, err := readControl(filepath.Join(g.Path, "cpuacct.usage"))
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}

// EnableController adds controller to a v2 cgroup's subtree_control
// when the cgroup has it and it is not there yet; it reports whether
// the children have it.
func EnableController(dir, controller string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && contains(strings.Fields(string(b)), controller) {
		return true
	}
	ctl, err := controllersOf(dir)
	if err != nil || !contains(ctl, controller) {
		return false
	}
	return writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+controller) == nil
}
