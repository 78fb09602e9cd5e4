package shellproc

// Containment of a job's tasks on this node.
//
// Memory: a job asks for a per-task memory limit with the shell option
// memory=SIZE (flux run -o memory=512M; a number is bytes); the instance
// may give jobs that do not ask a default with the broker attribute
// job-shell.memory-default=SIZE, and a maximum no job may ask beyond
// with job-shell.memory-max=SIZE. Each task then runs in a cgroup of its
// own with that limit and no swap (see internal/shell/cgroup.go). A task
// that goes over it is killed by the kernel, and the job gets a fatal
// exception of type "oom": "task 3 exceeded its memory limit of 512M".
// Where there is no memory cgroup this broker may use (the attribute
// job-shell.cgroup=off also says so), the broker log says so once and
// the limit is enforced with RLIMIT_DATA instead: allocations over it
// fail, and there is no exception.
//
// Resource limits: the rlimit shell option (flux submit --rlimit) sets
// each task's soft limits.
//
// Working directory: a task whose user may not enter the job's working
// directory runs in /tmp instead, with a warning on its stderr.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/valuekind"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// ContainConfig is the job-shell module's containment configuration,
// from broker attributes.
type ContainConfig struct {
	// MemoryDefault is the per-task memory limit of jobs that set none
	// (job-shell.memory-default, a size; default none).
	MemoryDefault int64
	// MemoryMax is the most a job may ask per task
	// (job-shell.memory-max; default none): a job asking more is
	// refused, and one asking none gets MemoryDefault, or MemoryMax
	// without a default, so the maximum binds every job.
	MemoryMax int64
	// Cgroup is where job cgroups go (job-shell.cgroup): "auto" (the
	// default) finds this broker's memory cgroup, "off" never uses
	// cgroups, anything else is the directory of a cgroup to use.
	Cgroup string
}

// Validate checks the configuration.
func (c *ContainConfig) Validate() error {
	if c.MemoryDefault < 0 {
		return fmt.Errorf("job-shell.memory-default: must be a positive size")
	}
	if c.MemoryMax > 0 && c.MemoryDefault > c.MemoryMax {
		return fmt.Errorf("job-shell.memory-default=%s is more than job-shell.memory-max=%s",
			size.Format(c.MemoryDefault), size.Format(c.MemoryMax))
	}
	switch {
	case c.Cgroup == "auto", c.Cgroup == "off":
	case strings.HasPrefix(c.Cgroup, "/"):
		if err := checkCgroupDir(c.Cgroup); err != nil {
			return fmt.Errorf("job-shell.cgroup=%q: %v", c.Cgroup, err)
		}
	default:
		return fmt.Errorf("job-shell.cgroup=%q: want auto, off or an absolute cgroup directory", c.Cgroup)
	}
	return nil
}

// checkCgroupDir says whether dir is a directory of a cgroup file system
// with the memory controller: a v2 cgroup whose cgroup.controllers lists
// memory, or a cgroup of a v1 memory hierarchy.
func checkCgroupDir(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("not a cgroup directory: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("not a cgroup directory")
	}
	switch st.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		b, err := os.ReadFile(dir + "/cgroup.controllers")
		if err != nil || !slices.Contains(strings.Fields(string(b)), "memory") {
			return fmt.Errorf("the cgroup v2 directory has no memory controller (cgroup.controllers: %q)", strings.TrimSpace(string(b)))
		}
	case unix.CGROUP_SUPER_MAGIC:
		if _, err := os.Stat(dir + "/memory.limit_in_bytes"); err != nil {
			return fmt.Errorf("the cgroup v1 directory is not in the memory hierarchy (no memory.limit_in_bytes)")
		}
	default:
		return fmt.Errorf("not a cgroup directory (a file system of type %#x, not cgroup)", st.Type)
	}
	return nil
}

// CheckTable checks the [job-shell] table of a configuration (flux start
// and flux config reload check it before the module reads it): only
// memory-default, memory-max and cgroup, each valid.
func CheckTable(top map[string]any) error {
	raw, ok := top["job-shell"]
	if !ok {
		return nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("[job-shell]: want a table, not %v", raw)
	}
	c := ContainConfig{Cgroup: "auto"}
	for k, v := range t {
		switch k {
		case "memory-default", "memory-max":
			n, err := size.Parse(v)
			if err != nil {
				return fmt.Errorf("[job-shell] %s: %v", k, err)
			}
			if k == "memory-max" {
				c.MemoryMax = n
			} else {
				c.MemoryDefault = n
			}
		case "cgroup":
			s, ok := v.(string)
			if !ok || s == "" {
				return fmt.Errorf("[job-shell] cgroup: want auto, off or a cgroup directory, not %s", valuekind.Of(v))
			}
			c.Cgroup = s
		default:
			return fmt.Errorf("[job-shell] %s: unknown key (known: cgroup, memory-default, memory-max)", k)
		}
	}
	return c.Validate()
}

// LoadContainConfig reads the configuration: the [job-shell] table of
// the configuration files (memory-default, memory-max, cgroup), then the
// broker attributes of the same names, which win (-S on the command
// line). A guest's shell may not read the configuration: the job-shell
// module decides its jobs' limits (ModuleCgroups.Memory).
func LoadContainConfig(ctx context.Context, h *flux.Handle) (ContainConfig, error) {
	c := ContainConfig{Cgroup: "auto"}
	var conf struct {
		JobShell *struct {
			MemoryDefault any    `json:"memory-default"`
			MemoryMax     any    `json:"memory-max"`
			Cgroup        string `json:"cgroup"`
		} `json:"job-shell"`
	}
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err == nil && conf.JobShell != nil {
		js := conf.JobShell
		for _, k := range []struct {
			name string
			v    any
			dst  *int64
		}{{"memory-default", js.MemoryDefault, &c.MemoryDefault}, {"memory-max", js.MemoryMax, &c.MemoryMax}} {
			if k.v == nil {
				continue
			}
			n, err := size.Parse(k.v)
			if err != nil {
				return c, fmt.Errorf("[job-shell] %s: %v", k.name, err)
			}
			*k.dst = n
		}
		if js.Cgroup != "" {
			c.Cgroup = js.Cgroup
		}
	}
	if v, err := h.Attr(ctx, "job-shell.memory-default"); err == nil && v != "" {
		n, err := size.Parse(v)
		if err != nil {
			return c, fmt.Errorf("job-shell.memory-default: %v", err)
		}
		c.MemoryDefault = n
	}
	if v, err := h.Attr(ctx, "job-shell.memory-max"); err == nil && v != "" {
		n, err := size.Parse(v)
		if err != nil {
			return c, fmt.Errorf("job-shell.memory-max: %v", err)
		}
		c.MemoryMax = n
	}
	if v, err := h.Attr(ctx, "job-shell.cgroup"); err == nil && v != "" {
		c.Cgroup = v
	}
	return c, c.Validate()
}

// containment is the broker's containment state (module goroutine only).
type containment struct {
	cfg    ContainConfig
	root   *shell.CgroupRoot // nil: cgroups are not used
	broker *shell.Cgroup     // this broker's cgroup, made at first use
	said   bool              // the fallback has been logged
}

// newContainment finds the cgroup root as configured; without one it
// logs once that memory limits fall back to resource limits.
func (x *host) newContainment(cfg ContainConfig) *containment {
	c := &containment{cfg: cfg}
	if x.guest {
		return c // the module makes its jobs' cgroups (and says why not)
	}
	root, err := CgroupRootFor(cfg)
	switch {
	case cfg.Cgroup == "off":
		x.log.Info("memory containment: cgroups disabled (job-shell.cgroup=off); memory limits use RLIMIT_DATA")
		c.said = true
	case err != nil:
		c.fallback(x, err)
	default:
		c.root = root
	}
	return c
}

// CgroupRootFor returns where job cgroups go under the configuration:
// nil for job-shell.cgroup=off, an error wrapping shell.ErrNoCgroup
// when there is no memory cgroup to use.
func CgroupRootFor(cfg ContainConfig) (*shell.CgroupRoot, error) {
	switch cfg.Cgroup {
	case "off":
		return nil, nil
	case "auto":
		return shell.FindCgroupRoot()
	}
	root := &shell.CgroupRoot{Version: 1, Dir: cfg.Cgroup}
	if _, err := os.Stat(cfg.Cgroup + "/cgroup.controllers"); err == nil {
		root.Version = 2
	} else if _, err := os.Stat(cfg.Cgroup + "/memory.limit_in_bytes"); err != nil {
		return nil, fmt.Errorf("%w: job-shell.cgroup=%s is neither a cgroup v2 directory nor a v1 memory cgroup", shell.ErrNoCgroup, cfg.Cgroup)
	}
	return root, nil
}

// fallback logs, once, that there is no memory cgroup.
func (c *containment) fallback(x *host, why error) {
	if c.said {
		return
	}
	c.said = true
	x.log.Warn(fmt.Sprintf("memory containment unavailable (%v): memory limits fall back to RLIMIT_DATA", why))
}

// brokerCgroup returns this broker's cgroup, making it at first use; nil
// when cgroups cannot be used (then logged once).
func (c *containment) brokerCgroup(x *host) *shell.Cgroup {
	if c.root == nil {
		return nil
	}
	if c.broker == nil {
		g, err := c.root.NewBrokerCgroup()
		if err != nil {
			c.root = nil
			c.fallback(x, err)
			return nil
		}
		c.broker = g
		x.log.Info("memory containment: " + c.root.String() + ", job cgroups in " + g.Path)
	}
	return c.broker
}

// close removes the broker's cgroup (at module unload).
func (c *containment) close() {
	if c.broker != nil {
		c.broker.Remove(2 * time.Second)
	}
}

// ModuleCgroups are a job's task cgroups on one node made by the
// job-shell module for a shell that runs as the job's user (a guest
// cannot make cgroups): the limits in them are the module's, and only
// their cgroup.procs is the user's, so the shell can place its tasks but
// never change a limit. The module removes them when the job ends here.
type ModuleCgroups struct {
	Version int      `json:"version"` // 0: no cgroups (the limit is RLIMIT_DATA)
	Memory  int64    `json:"memory"`  // the per-task limit set in each
	Tasks   []string `json:"tasks"`   // by local task id
}

// jobContainment is what one job's shell applies to its tasks here.
type jobContainment struct {
	memory  int64           // per-task limit, 0: none
	cwd     string          // replacement working directory, or ""
	cg      *shell.Cgroup   // the job's cgroup the shell made, or nil
	version int             // of the task cgroups (0: none)
	tasks   []*shell.Cgroup // by local task id
	fds     []int           // v2 directory descriptors, by local task id
}

// MemoryLimit returns a job's per-task memory limit (0: none) under the
// instance's default and maximum.
func MemoryLimit(opts map[string]any, c ContainConfig) (int64, error) {
	v, ok := opts["memory"]
	if !ok {
		if c.MemoryDefault > 0 {
			return c.MemoryDefault, nil
		}
		return c.MemoryMax, nil
	}
	n, err := size.Parse(v)
	if err != nil {
		return 0, fmt.Errorf("%w: memory: %v", shell.ErrBadOption, err)
	}
	if c.MemoryMax > 0 && n > c.MemoryMax {
		return 0, fmt.Errorf("%w: memory=%s is more than the instance's maximum of %s per task (job-shell.memory-max)",
			shell.ErrBadOption, size.Format(n), size.Format(c.MemoryMax))
	}
	return n, nil
}

// contain sets up the job's containment and hooks it into cfg.
func (j *job) contain(cfg *shell.Config) error {
	x := j.x
	opts := j.js.ShellOptions()
	mem, err := MemoryLimit(opts, x.contain.cfg)
	if j.cgroups != nil {
		// the module decided the limit (it reads the configuration a
		// guest's shell may not)
		mem, err = j.cgroups.Memory, nil
	}
	if err != nil {
		return err
	}
	rl, err := shell.ParseRlimitOption(opts["rlimit"])
	if err != nil {
		return err
	}
	gpuAff, err := shell.GPUAffinity(opts["gpu-affinity"])
	if err != nil {
		return err
	}
	jc := &jobContainment{memory: mem}
	if dir := j.js.Cwd(); dir != "" {
		if err := canEnter(cfg.RunAs, dir); err != nil {
			jc.cwd = "/tmp"
			warn := fmt.Sprintf("flux-shell: warning: cannot use the working directory (%v): running in /tmp instead\n", errors.Unwrap(err))
			if pe := (*os.PathError)(nil); errors.As(err, &pe) {
				warn = fmt.Sprintf("flux-shell: warning: cannot change to %s: %v: running in /tmp instead\n", pe.Path, pe.Err)
			}
			for _, rank := range j.plan.Tasks(j.idx) {
				j.output(shell.Output{Stream: "stderr", Rank: rank, Data: []byte(warn)})
			}
		}
	}
	if mem > 0 {
		if err := jc.makeCgroups(x, j); err != nil {
			jc.remove()
			return err
		}
	}
	gpus := gpuAff != "on" && j.plan.GPUs[j.idx].Count() > 0
	if mem == 0 && len(rl) == 0 && jc.cwd == "" && !gpus {
		return nil
	}
	j.contained = jc
	setup := cfg.Setup
	ntasks := j.plan.Counts[j.idx]
	cfg.Setup = func(rank, local int, cmd *exec.Cmd) error {
		if jc.cwd != "" {
			cmd.Dir = jc.cwd
		}
		if gpus {
			val, keep := "", gpuAff == "per-task"
			if keep {
				val = shell.CUDAVisibleDevices(j.plan.GPUsFor(j.idx, local, ntasks, true))
			} else if v, ok := j.js.Environment()["CUDA_VISIBLE_DEVICES"]; ok {
				val, keep = v, true // off: as the job's environment has it
			}
			cmd.Env = setEnv(cmd.Env, "CUDA_VISIBLE_DEVICES", val, keep)
		}
		if jc.fds != nil {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, jc.fds[local]
		}
		if setup != nil {
			return setup(rank, local, cmd)
		}
		return nil
	}
	lims := rl
	if mem > 0 && jc.version == 0 {
		lims = append(append([]shell.Rlimit(nil), rl...), shell.MemoryRlimits(mem)...)
	}
	v1 := jc.version == 1
	if len(lims) == 0 && !v1 {
		return nil
	}
	// placement and limits must hold from the task's first instruction:
	// it waits until they are set (a limit applied once it runs could
	// come after it has read or hit it)
	cfg.Hold = true
	cfg.Prepare = func(rank, local, pid int) error {
		if v1 {
			if err := jc.tasks[local].AddProcess(pid); err != nil {
				return fmt.Errorf("placing task %d in its memory cgroup: %w", rank, err)
			}
		}
		if err := shell.ApplyRlimits(pid, lims); err != nil {
			// the task runs without the limits it could not get
			x.h.Post(func() {
				j.output(shell.Output{Stream: "stderr", Rank: rank, Data: []byte("flux-shell: warning: " + err.Error() + "\n")})
			})
		}
		return nil
	}
	return nil
}

// setEnv sets (keep) or removes name in an environment list.
func setEnv(env []string, name, val string, keep bool) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	if keep {
		out = append(out, name+"="+val)
	}
	return out
}

// makeCgroups makes the job's cgroup and one per local task with the
// memory limit, or takes those the module made (a guest shell); without
// cgroups it leaves jc.version 0 (rlimit fallback).
func (jc *jobContainment) makeCgroups(x *host, j *job) error {
	n := j.plan.Counts[j.idx]
	if mc := j.cgroups; mc != nil {
		if mc.Version == 0 {
			return nil // a limit, but no cgroups: RLIMIT_DATA
		}
		if len(mc.Tasks) != n || mc.Memory != jc.memory || (mc.Version != 1 && mc.Version != 2) {
			return fmt.Errorf("the job-shell module's cgroups (%d, limit %d) do not match the job's %d tasks here (limit %d)",
				len(mc.Tasks), mc.Memory, n, jc.memory)
		}
		jc.version = mc.Version
		for _, path := range mc.Tasks {
			tg := &shell.Cgroup{Path: path, Version: mc.Version}
			jc.tasks = append(jc.tasks, tg)
			if mc.Version == 2 {
				fd, err := tg.OpenFD()
				if err != nil {
					return err
				}
				jc.fds = append(jc.fds, fd)
			}
		}
		return nil
	}
	if x.guest {
		// no cgroups from the module: it has none it may use (it said so)
		return nil
	}
	bg := x.contain.brokerCgroup(x)
	if bg == nil {
		return nil
	}
	cg, err := bg.Child("job-"+strconv.FormatUint(uint64(j.id), 10), true)
	if err != nil {
		return fmt.Errorf("job cgroup: %w", err)
	}
	jc.cg = cg
	jc.version = cg.Version
	for local := 0; local < n; local++ {
		tg, err := cg.Child("task-"+strconv.Itoa(local), false)
		if err != nil {
			return err
		}
		jc.tasks = append(jc.tasks, tg)
		if err := tg.SetMemoryLimit(jc.memory); err != nil {
			return fmt.Errorf("memory limit: %w", err)
		}
		if cg.Version == 2 {
			fd, err := tg.OpenFD()
			if err != nil {
				return err
			}
			jc.fds = append(jc.fds, fd)
		}
	}
	return nil
}

// oomRanks returns the global ranks of the tasks the kernel killed for
// going over their memory limit.
func (jc *jobContainment) oomRanks(j *job) []int {
	var out []int
	ranks := j.plan.Tasks(j.idx)
	for local, tg := range jc.tasks {
		if n, err := tg.OOMKills(); err == nil && n > 0 && local < len(ranks) {
			out = append(out, ranks[local])
		}
	}
	return out
}

// remove closes descriptors and removes the job's cgroups, killing
// anything left in them (in the background: it may wait for processes).
func (jc *jobContainment) remove() {
	for _, fd := range jc.fds {
		syscall.Close(fd)
	}
	jc.fds = nil
	if cg := jc.cg; cg != nil {
		jc.cg = nil
		go cg.Remove(10 * time.Second)
	}
}

// oomNote says which tasks went over their limit.
func oomNote(ranks []int, limit int64) string {
	var s idset.Set
	for _, r := range ranks {
		s.Add(uint(r))
	}
	if len(ranks) == 1 {
		return fmt.Sprintf("task %s exceeded its memory limit of %s", s.String(), size.Format(limit))
	}
	return fmt.Sprintf("tasks %s exceeded their memory limit of %s", s.String(), size.Format(limit))
}

// tasksDone runs when this node's tasks have all exited, before the
// shell reports: a task killed for its memory raises a fatal "oom"
// exception on the job (so it is in the eventlog before the finish),
// the job's cgroups go, then next runs.
func (j *job) tasksDone(next func()) {
	if f := j.execRaise; f != nil {
		// the exception goes in the eventlog before the job's finish
		j.execRaise = nil
		f.Then(func(_ *flux.Message, err error) {
			if err != nil {
				j.x.log.Error("cannot raise exec exception", "job", j.id.String(), "err", err)
			}
			j.tasksDone(next)
		})
		return
	}
	jc := j.contained
	if jc == nil {
		next()
		return
	}
	ranks := jc.oomRanks(j)
	jc.remove()
	if len(ranks) == 0 {
		next()
		return
	}
	note := oomNote(ranks, jc.memory)
	j.x.log.Info(fmt.Sprintf("job %s: %s", j.id.String(), note))
	f, err := j.x.h.RPC("job-manager.raise", 0, map[string]any{
		"id": j.id, "type": "oom", "severity": 0, "note": note}, 0)
	if err != nil {
		j.x.log.Error("cannot raise oom exception", "job", j.id.String(), "err", err)
		next()
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			j.x.log.Error("cannot raise oom exception", "job", j.id.String(), "err", err)
		}
		next()
	})
}
