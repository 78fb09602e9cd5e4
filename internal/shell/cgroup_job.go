package shell

// A job's cgroups on one node: the job's (the v2 or v1 memory
// cgroup: its memory limit, its usage, its cpuset and device filter on
// v2), one per task below it when the job has a per-task memory limit,
// and on v1 one in each of the cpuset, devices and cpuacct hierarchies.
// The owner's job shell makes them below its broker's cgroups; the
// job-shell module makes a guest's below the user's (and delegates
// their cgroup.procs to the user until the tasks are placed).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// JobCgroups are a job's cgroups on one node, as the job-shell module
// sends them to a guest's shell (which places its tasks in them) and an
// owner's shell makes them itself (MakeJobCgroups).
type JobCgroups struct {
	Version int      `json:"version"` // 0: no memory cgroups (the limit is RLIMIT_DATA)
	Memory  int64    `json:"memory"`  // the per-task limit set in each
	Tasks   []string `json:"tasks"`   // by local task id; none: the tasks go in Job
	// Job is the job's cgroup (v2, or the v1 memory hierarchy): its
	// usage is read there, and it holds the tasks without Tasks.
	Job string `json:"job,omitempty"`
	// JobMemory is the limit of Job (0: none), from JobMemorySetting.
	JobMemory        int64  `json:"job_memory,omitempty"`
	JobMemorySetting string `json:"job_memory_setting,omitempty"`
	// V1 are the job's cgroups in the v1 cpuset, devices and cpuacct
	// hierarchies: every task goes in each.
	V1 []string `json:"v1,omitempty"`
	// Cpuset says the tasks' CPUs are confined (their affinity is reset
	// to the cpuset as they are placed, and given back).
	Cpuset bool `json:"cpuset,omitempty"`
}

// Procs are the cgroups the job's tasks are placed in (those whose
// cgroup.procs a guest gets until its tasks are placed).
func (mc *JobCgroups) Procs() []string {
	out := append([]string(nil), mc.Tasks...)
	if len(mc.Tasks) == 0 && mc.Job != "" {
		out = append(out, mc.Job)
	}
	return append(out, mc.V1...)
}

// JobCgroupSpec is what a job's cgroups on a node hold.
type JobCgroupSpec struct {
	Name             string // job-<id>
	Tasks            int    // local tasks
	TaskMemory       int64  // per-task limit (0: no task cgroups)
	JobMemory        int64  // the job's limit here (0: none)
	JobMemorySetting string
	CPUs, Mems       []int    // the cpuset (no CPUs: none)
	Deny             []Device // devices the tasks may not open
}

// JobCgroupSpecFor is a job's JobCgroupSpec on shell index idx of its
// plan: taskMem its per-task limit, jobMem its job limit and setting,
// cpuset whether its CPUs are confined, gpus the node's GPU device
// nodes (nil: no device control).
func JobCgroupSpecFor(name string, plan *Plan, idx int, taskMem, jobMem int64, why string, cpuset bool, gpus map[uint][]Device) JobCgroupSpec {
	s := JobCgroupSpec{Name: name, Tasks: plan.Counts[idx], TaskMemory: taskMem, JobMemory: jobMem, JobMemorySetting: why}
	if cpuset {
		s.CPUs = JobCPUs(plan, idx)
		if len(s.CPUs) > 0 {
			s.Mems = MemoryNodesOf(s.CPUs)
		}
	}
	if len(gpus) > 0 {
		mine := map[uint]bool{}
		for id := range plan.GPUs[idx].All() {
			mine[id] = true
		}
		s.Deny = OtherGPUDevices(gpus, mine)
	}
	return s
}

// MakeJobCgroups makes a job's cgroups below parent (the memory or v2
// cgroup of the broker or the user; nil: none) and the v1 parents
// (cpuset, devices, cpuacct hierarchies), as spec says; delegate (nil:
// none) gives the job's user the cgroups tasks are placed in. On an
// error what was made is removed.
func MakeJobCgroups(parent *Cgroup, v1 []*Cgroup, spec JobCgroupSpec, delegate func(*Cgroup) error) (mc *JobCgroups, err error) {
	mc = &JobCgroups{Memory: spec.TaskMemory, JobMemory: spec.JobMemory, JobMemorySetting: spec.JobMemorySetting}
	var made []*Cgroup
	defer func() {
		if err != nil {
			for _, g := range made {
				g.Remove(10 * time.Second)
			}
			mc = nil
		}
	}()
	place := func(g *Cgroup) error {
		if delegate != nil {
			return delegate(g)
		}
		return nil
	}
	if parent != nil {
		perTask := spec.TaskMemory > 0
		// v2: a cgroup whose children have controllers holds no process
		jg, err := parent.OpenChild(spec.Name, perTask)
		if err != nil {
			return nil, fmt.Errorf("job cgroup: %w", err)
		}
		made = append(made, jg)
		mc.Version, mc.Job = jg.Version, jg.Path
		if spec.JobMemory > 0 {
			if err := jg.SetMemoryLimit(spec.JobMemory); err != nil {
				return nil, fmt.Errorf("job memory limit: %w", err)
			}
		}
		if jg.Version == 2 && len(spec.CPUs) > 0 && jg.HasCpuset() {
			if err := jg.SetCpuset(spec.CPUs, spec.Mems); err != nil {
				return nil, fmt.Errorf("job cpuset: %w", err)
			}
			mc.Cpuset = true
		}
		if jg.Version == 2 && len(spec.Deny) > 0 {
			if err := jg.DenyDevices(spec.Deny); err != nil { // an eBPF program
				return nil, fmt.Errorf("job devices: %w", err)
			}
		}
		if !perTask {
			if err := place(jg); err != nil {
				return nil, err
			}
		}
		for local := 0; perTask && local < spec.Tasks; local++ {
			tg, err := jg.OpenChild("task-"+strconv.Itoa(local), false)
			if err == nil {
				err = tg.SetMemoryLimit(spec.TaskMemory)
			}
			if err == nil {
				err = place(tg)
			}
			if err != nil {
				return nil, err
			}
			mc.Tasks = append(mc.Tasks, tg.Path)
		}
	}
	for _, p := range v1 {
		kind := p.v1Kind()
		switch {
		case kind == kindCpuset && len(spec.CPUs) == 0:
			continue
		case kind == kindDevices && len(spec.Deny) == 0:
			continue
		}
		var g *Cgroup
		if kind == kindCpuset {
			g, err = NewV1Cgroup(p.Path, spec.Name) // with its parent's CPUs and memory nodes
		} else {
			g, err = newV1Child(p.Path, spec.Name)
		}
		if err != nil {
			return nil, err
		}
		g.kind = kind
		made = append(made, g)
		switch kind {
		case kindCpuset:
			if err := g.SetCpuset(spec.CPUs, spec.Mems); err != nil {
				return nil, fmt.Errorf("job cpuset: %w", err)
			}
			mc.Cpuset = true
		case kindDevices:
			if err := g.DenyDevices(spec.Deny); err != nil {
				return nil, fmt.Errorf("job devices: %w", err)
			}
		}
		if err := place(g); err != nil {
			return nil, err
		}
		mc.V1 = append(mc.V1, g.Path)
	}
	return mc, nil
}

// newV1Child makes the cgroup name below dir in a v1 hierarchy other
// than cpuset's (taking it as it is when it exists): a directory, with
// nothing to inherit.
func newV1Child(dir, name string) (*Cgroup, error) {
	g := &Cgroup{Path: filepath.Join(dir, name), Version: 1}
	if err := os.Mkdir(g.Path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup %s: %w", g.Path, err)
	}
	return g, nil
}

// Remove removes the job's cgroups (killing what is left in
// them), in the background.
func (mc *JobCgroups) Remove() {
	var gs []*Cgroup
	if mc.Job != "" {
		gs = append(gs, &Cgroup{Path: mc.Job, Version: mc.Version})
	}
	for _, p := range mc.V1 {
		gs = append(gs, &Cgroup{Path: p, Version: 1})
	}
	if len(gs) == 0 {
		return
	}
	go func() {
		for _, g := range gs {
			g.Remove(10 * time.Second)
		}
	}()
}

// SweepStale removes the empty cgroups a broker that is gone left in
// dir (fluxgo-<pid>-..., a broker killed before it could remove them):
// those of a process that no longer exists, children first. A cgroup
// still holding processes stays.
func SweepStale(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "fluxgo-")
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue // fluxgo-shells-...: the job-shell module's own
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			syscall.Rmdir(dirs[i])
		}
	}
}
