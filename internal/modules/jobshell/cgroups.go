package jobshell

// Cgroups of guests' jobs. A shell running as a job's user cannot make
// cgroups, and must not be able to change the limits in them: the module
// makes them, under a directory of its own in the broker's memory cgroup
// (named after the shell directory, so the same after a restart),
//
//	<root>/fluxgo-shells-<hash>/u<UID>/job-<id>/task-<local id>
//
// sets each task's memory limit, and gives the user only the task
// cgroups' cgroup.procs (Cgroup.Delegate): the shell places its tasks
// there, nothing more. On cgroup v2 a process may only be moved between
// cgroups below one whose cgroup.procs its user may write: there the
// user's shells run in u<UID>/shells (placed by the module as it starts
// them) and u<UID>'s cgroup.procs is the user's too (u<UID> itself can
// hold no process, its children having controllers). The module removes
// a job's cgroup when the job ends on this node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// cgroupState is the module's containment state.
type cgroupState struct {
	cfg  shellproc.ContainConfig
	root *shell.CgroupRoot // nil: none to use
	base *shell.Cgroup     // made at first use
	said bool              // that there are none has been logged
	// the module's directories in the v1 cpuset, devices and cpuacct
	// hierarchies, made at first use
	v1base  []*shell.Cgroup
	v1tried bool
	gpus    map[uint][]shell.Device // the GPU device nodes, found at first use
}

// initCgroups reads the containment configuration.
func (m *manager) initCgroups(cfg shellproc.ContainConfig) {
	m.cg.cfg = cfg
	root, err := shellproc.CgroupRootFor(cfg)
	if err != nil {
		m.cg.why(m, err)
	}
	m.cg.root = root
}

// why logs once that guests' jobs get no cgroups.
func (c *cgroupState) why(m *manager, err error) {
	if !c.said {
		c.said = true
		m.log.Warn(fmt.Sprintf("memory containment of guests' jobs unavailable (%v): their memory limits fall back to RLIMIT_DATA", err))
	}
}

// baseName is the module's cgroup directory's name, after the shell
// directory (the same across restarts of the broker).
func (c *cgroupState) baseName(m *manager) string {
	h := fnv.New32a()
	h.Write([]byte(m.dir))
	return fmt.Sprintf("fluxgo-shells-%08x", h.Sum32())
}

// userCgroup returns u<UID> below the module's directory, made if need
// be; nil when there are no cgroups to use.
func (m *manager) userCgroup(uid uint32) (*shell.Cgroup, error) {
	c := &m.cg
	if c.root == nil {
		return nil, nil
	}
	if c.base == nil {
		base, err := c.root.OpenCgroup(c.baseName(m))
		if err != nil {
			c.root = nil
			c.why(m, err)
			return nil, nil
		}
		c.base = base
		m.log.Info("memory containment of guests' jobs: " + c.root.String() + ", in " + base.Path)
	}
	ug, err := c.base.OpenChild("u"+strconv.FormatUint(uint64(uid), 10), true)
	if err != nil {
		return nil, err
	}
	if ug.Version == 2 {
		if err := ug.Delegate(int(uid), m.gidOf(uid)); err != nil {
			return nil, err
		}
	}
	return ug, nil
}

// shellCgroupFD opens, on cgroup v2, the cgroup a guest's shell is
// started in (u<UID>/shells); -1 elsewhere.
func (m *manager) shellCgroupFD(uid uint32) int {
	if uid == m.owner || m.cg.root == nil || m.cg.root.Version != 2 {
		return -1
	}
	ug, err := m.userCgroup(uid)
	if err != nil || ug == nil {
		return -1
	}
	sg, err := ug.OpenChild("shells", false)
	if err != nil {
		return -1
	}
	fd, err := sg.OpenFD()
	if err != nil {
		return -1
	}
	return fd
}

// userV1Cgroups returns u<UID> below the module's directories in the
// v1 cpuset, devices and cpuacct hierarchies, made if need be (those
// that cannot be are left out).
func (m *manager) userV1Cgroups(uid uint32) []*shell.Cgroup {
	c := &m.cg
	if !c.v1tried {
		c.v1tried = true
		for _, ctl := range shellproc.V1Controllers(c.cfg, c.root) {
			dir, err := shell.FindV1Cgroup(ctl)
			if err == nil {
				var g *shell.Cgroup
				if g, err = shell.NewV1Cgroup(dir, c.baseName(m)); err == nil {
					c.v1base = append(c.v1base, g)
					continue
				}
			}
			m.log.Info(fmt.Sprintf("containment of guests' jobs: no v1 %s cgroups: %v", ctl, err))
		}
	}
	var out []*shell.Cgroup
	for _, base := range c.v1base {
		if g, err := shell.NewV1Cgroup(base.Path, "u"+strconv.FormatUint(uint64(uid), 10)); err == nil {
			out = append(out, g)
		}
	}
	return out
}

// gpuDevices returns the node's GPU device nodes, found at first use.
func (c *cgroupState) gpuDevices() map[uint][]shell.Device {
	if c.gpus == nil {
		c.gpus = shell.GPUDeviceNodes(c.cfg.GPUPatterns())
	}
	return c.gpus
}

// jobCgroups decides the memory limits of a guest's job on this node
// (the module reads the configuration; a guest's shell may not) and
// makes its cgroups: the job's, one per task with a per-task limit, and
// on v1 its cpuset, devices and cpuacct ones. It returns nil for no
// containment, limits without cgroups when there are none to use (the
// shell uses RLIMIT_DATA), an error for a limit over a maximum. A
// jobspec or R the shell would refuse gets nil: the shell says what is
// wrong.
func (m *manager) jobCgroups(id jobid.ID, uid uint32, payload []byte) (*shellproc.ModuleCgroups, error) {
	var req struct {
		Jobspec json.RawMessage `json:"jobspec"`
		R       json.RawMessage `json:"R"`
	}
	if json.Unmarshal(payload, &req) != nil {
		return nil, nil
	}
	js, err := jobspec.Parse(req.Jobspec)
	if err != nil {
		return nil, nil
	}
	R, err := rset.Parse(req.R)
	if err != nil {
		return nil, nil
	}
	po, err := shell.PlanOptionsFrom(js)
	if err != nil {
		return nil, nil
	}
	plan, err := shell.MakePlan(js, R, po)
	if err != nil {
		return nil, nil
	}
	idx := plan.Index(m.rank)
	if idx < 0 {
		return nil, nil
	}
	cfg := m.cg.cfg
	opts := js.ShellOptions()
	mem, err := shellproc.MemoryLimit(opts, cfg)
	if err != nil {
		return nil, err // over the maximum: the job fails, as an owner's would
	}
	jobMem, why := shellproc.JobMemoryLimit(cfg, plan.Cores[idx].Count())
	mem = shellproc.CapDefaultMemory(opts, mem, jobMem)
	if err := shellproc.CheckJobMemory(opts, mem, plan.Counts[idx], jobMem, why); err != nil {
		return nil, err
	}
	limits := &shellproc.ModuleCgroups{Memory: mem, JobMemory: jobMem, JobMemorySetting: why}
	if cfg.Cgroup == "off" {
		if mem == 0 && jobMem == 0 {
			return nil, nil
		}
		return limits, nil // RLIMIT_DATA
	}
	ug, err := m.userCgroup(uid)
	if err != nil {
		return nil, err
	}
	v1 := m.userV1Cgroups(uid)
	if ug == nil && len(v1) == 0 {
		if mem == 0 && jobMem == 0 {
			return nil, nil
		}
		return limits, nil // no cgroups: RLIMIT_DATA
	}
	var gpus map[uint][]shell.Device
	if shellproc.WantDevices(cfg, ug, v1) {
		gpus = m.cg.gpuDevices()
	}
	gid := m.gidOf(uid)
	spec := shellproc.JobCgroupSpecFor(jobCgroupName(id), plan, idx, mem, jobMem, why, cfg, gpus)
	return shell.MakeJobCgroups(ug, v1, spec, func(g *shell.Cgroup) error { return g.Delegate(int(uid), gid) })
}

func jobCgroupName(id jobid.ID) string { return "job-" + strconv.FormatUint(uint64(id), 10) }

// removeJobCgroup removes a guest's job's cgroups here once the job has
// ended, if the module made them (this module or one before it).
func (m *manager) removeJobCgroup(id jobid.ID, uid uint32) {
	if uid == m.owner || m.cg.base == nil && m.cg.root == nil && len(m.cg.v1base) == 0 {
		return
	}
	if m.cg.base == nil && m.cg.root != nil {
		m.userCgroup(uid)
	}
	var bases []*shell.Cgroup
	if m.cg.base != nil {
		bases = append(bases, m.cg.base)
	}
	bases = append(bases, m.cg.v1base...)
	for _, base := range bases {
		path := filepath.Join(base.Path, "u"+strconv.FormatUint(uint64(uid), 10), jobCgroupName(id))
		if _, err := os.Stat(path); err != nil {
			continue
		}
		g := &shell.Cgroup{Path: path, Version: base.Version}
		go g.Remove(10 * time.Second)
	}
}

// withCgroups adds the cgroups to a job-shell.start payload.
func withCgroups(payload []byte, mc *shellproc.ModuleCgroups) []byte {
	b, _ := json.Marshal(mc)
	payload = bytes.TrimRight(payload, " \t\r\n")
	out := make([]byte, 0, len(payload)+len(b)+16)
	out = append(out, payload[:len(payload)-1]...)
	out = append(out, `,"cgroups":`...)
	out = append(out, b...)
	return append(out, '}')
}

// dropCgroups removes the module's cgroup directories that are empty,
// this module's and any an earlier one left (a broker killed); those of
// jobs still running hold processes and stay, and a later module finds
// them under the same name.
func (m *manager) dropCgroups() {
	var bases []string
	if m.cg.root != nil {
		bases = append(bases, filepath.Join(m.cg.root.Dir, m.cg.baseName(m)))
	}
	for _, g := range m.cg.v1base {
		bases = append(bases, g.Path)
	}
	for _, base := range bases {
		dropCgroupDir(base)
	}
}

// dropCgroupDir removes the empty cgroups of one of the module's
// directories, and it when it is left empty.
func dropCgroupDir(base string) {
	users, _ := os.ReadDir(base)
	for _, u := range users {
		if !u.IsDir() || !strings.HasPrefix(u.Name(), "u") {
			continue
		}
		ud := filepath.Join(base, u.Name())
		jobs, _ := os.ReadDir(ud)
		for _, j := range jobs {
			if !j.IsDir() {
				continue
			}
			jd := filepath.Join(ud, j.Name())
			tasks, _ := os.ReadDir(jd)
			for _, t := range tasks {
				if t.IsDir() {
					syscall.Rmdir(filepath.Join(jd, t.Name()))
				}
			}
			syscall.Rmdir(jd)
		}
		syscall.Rmdir(ud)
	}
	syscall.Rmdir(base)
}

// revoke takes back the user's right to place processes in a job's task
// cgroups once its tasks are placed (the job's start): a task can then
// not move into another job's cgroups of its user's.
func revoke(paths []string) {
	for _, path := range paths {
		// v1's tasks, v2's cgroup.threads: whichever the cgroup has
		(&shell.Cgroup{Path: path, Version: 1}).Delegate(0, 0)
		(&shell.Cgroup{Path: path, Version: 2}).Delegate(0, 0)
	}
}
