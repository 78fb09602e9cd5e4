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
// The admin's limit per job per node (job-shell.memory-job-max,
// memory-per-core, memory-node-share) is the limit of the job's cgroup,
// which every job has where there are cgroups; its cpuset is the job's
// cores here, its device rules keep the tasks off other jobs' GPUs,
// and its peak memory and CPU time go in the shell-exit event (see
// internal/shell/cgroup_job.go and docs/CONTAINMENT.md).
//
// Resource limits: the rlimit shell option (flux submit --rlimit) sets
// each task's soft limits.
//
// Working directory: a task whose user may not enter the job's working
// directory runs in /tmp instead, with a warning on its stderr.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/valuekind"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// ContainConfig is the job-shell module's containment configuration,
// from the [job-shell] table and broker attributes.
type ContainConfig struct {
	// MemoryDefault is the per-task memory limit of jobs that set none
	// (job-shell.memory-default, a size; default none).
	MemoryDefault int64
	// MemoryMax is the most a job may ask per task
	// (job-shell.memory-max; default none): a job asking more is
	// refused, and one asking none gets MemoryDefault, or MemoryMax
	// without a default, so the maximum binds every job.
	MemoryMax int64
	// MemoryJobMax, MemoryPerCore and MemoryNodeShare are the most a
	// job's tasks on a node may use together (job-shell.memory-job-max,
	// a size; job-shell.memory-per-core, a size times the job's cores on
	// the node; job-shell.memory-node-share, a fraction of the node's
	// memory, 0 < share <= 1): the least of those set is the limit of
	// the job's cgroup on the node, which a job asking more per task
	// (times its tasks there) cannot start beyond. Default none.
	MemoryJobMax    int64
	MemoryPerCore   int64
	MemoryNodeShare float64
	// Cgroup is where job cgroups go (job-shell.cgroup): "auto" (the
	// default) finds this broker's memory cgroup, "off" never uses
	// cgroups, anything else is the directory of a cgroup to use.
	Cgroup string
	// NoCpuset turns off the job cpusets: the default, as in Slurm
	// (ConstrainCores=no) and flux-core; job-shell.cpuset=on turns them
	// on where the cpuset controller is to be had (they cost a job 2-3 ms
	// of CPU on a cgroup v1 machine: bench/README.md).
	NoCpuset bool
	// GPUDevices are the patterns of the GPU device nodes a job may open
	// only its own GPUs' of (job-shell.gpu-devices, comma-separated;
	// nil: shell.DefaultGPUDevices; empty, "off": no device control).
	GPUDevices []string
}

// containKeys are the [job-shell] keys (and job-shell.* attributes).
var containKeys = []string{"cgroup", "cpuset", "gpu-devices", "memory-default", "memory-job-max",
	"memory-max", "memory-node-share", "memory-per-core"}

// Validate checks the configuration.
func (c *ContainConfig) Validate() error {
	if c.MemoryDefault < 0 {
		return fmt.Errorf("job-shell.memory-default: must be a positive size")
	}
	if c.MemoryMax > 0 && c.MemoryDefault > c.MemoryMax {
		return fmt.Errorf("job-shell.memory-default=%s is more than job-shell.memory-max=%s",
			size.Format(c.MemoryDefault), size.Format(c.MemoryMax))
	}
	if c.MemoryJobMax < 0 || c.MemoryPerCore < 0 {
		return fmt.Errorf("job-shell.memory-job-max, memory-per-core: must be positive sizes")
	}
	if c.MemoryNodeShare < 0 || c.MemoryNodeShare > 1 {
		return fmt.Errorf("job-shell.memory-node-share=%g: want a fraction of the node's memory, more than 0 and at most 1", c.MemoryNodeShare)
	}
	for _, p := range c.GPUDevices {
		if err := shell.CheckGPUDevicePattern(p); err != nil {
			return fmt.Errorf("job-shell.gpu-devices: %v", err)
		}
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

// set sets one key from a configuration value (TOML: a size is a string
// or a number, cpuset a boolean or on/off, gpu-devices a string or a
// list of strings) or a broker attribute (a string).
func (c *ContainConfig) set(k string, v any) error {
	switch k {
	case "memory-default", "memory-max", "memory-job-max", "memory-per-core":
		n, err := size.Parse(v)
		if err != nil {
			return err
		}
		switch k {
		case "memory-default":
			c.MemoryDefault = n
		case "memory-max":
			c.MemoryMax = n
		case "memory-job-max":
			c.MemoryJobMax = n
		default:
			c.MemoryPerCore = n
		}
	case "memory-node-share":
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case string:
			var err error
			if f, err = strconv.ParseFloat(x, 64); err != nil {
				return fmt.Errorf("%q: want a fraction such as 0.9", x)
			}
		default:
			return fmt.Errorf("want a fraction such as 0.9, not %s", valuekind.Of(v))
		}
		if f <= 0 || f > 1 {
			return fmt.Errorf("%g: want a fraction of the node's memory, more than 0 and at most 1", f)
		}
		c.MemoryNodeShare = f
	case "cgroup":
		s, ok := v.(string)
		if !ok || s == "" {
			return fmt.Errorf("want auto, off or a cgroup directory, not %s", valuekind.Of(v))
		}
		c.Cgroup = s
	case "cpuset":
		switch v {
		case true, "on", "true", "1":
			c.NoCpuset = false
		case false, "off", "false", "0":
			c.NoCpuset = true
		default:
			return fmt.Errorf("want on or off (true or false), not %v", v)
		}
	case "gpu-devices":
		var list []string
		switch x := v.(type) {
		case string:
			if x != "off" {
				for _, p := range strings.Split(x, ",") {
					if p = strings.TrimSpace(p); p != "" {
						list = append(list, p)
					}
				}
			}
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return fmt.Errorf("want device node patterns, not %s", valuekind.Of(e))
				}
				list = append(list, s)
			}
		default:
			return fmt.Errorf("want device node patterns (a string or a list), not %s", valuekind.Of(v))
		}
		for _, p := range list {
			if err := shell.CheckGPUDevicePattern(p); err != nil {
				return err
			}
		}
		c.GPUDevices = append([]string{}, list...) // empty, not nil: none
	default:
		return fmt.Errorf("unknown key (known: %s)", strings.Join(containKeys, ", "))
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
// the keys of ContainConfig, each valid.
func CheckTable(top map[string]any) error {
	raw, ok := top["job-shell"]
	if !ok {
		return nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("[job-shell]: want a table, not %v", raw)
	}
	c := ContainConfig{Cgroup: "auto", NoCpuset: true}
	for k, v := range t {
		if err := c.set(k, v); err != nil {
			return fmt.Errorf("[job-shell] %s: %v", k, err)
		}
	}
	return c.Validate()
}

// LoadContainConfig reads the configuration: the [job-shell] table of
// the configuration files, then the broker attributes of the same
// names, which win (-S on the command line). A guest's shell may not
// read the configuration: the job-shell module decides its jobs' limits
// (ModuleCgroups).
func LoadContainConfig(ctx context.Context, h *flux.Handle) (ContainConfig, error) {
	c := ContainConfig{Cgroup: "auto", NoCpuset: true}
	var conf struct {
		JobShell map[string]any `json:"job-shell"`
	}
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err == nil {
		for _, k := range containKeys {
			v, ok := conf.JobShell[k]
			if !ok || v == nil {
				continue
			}
			if err := c.set(k, v); err != nil {
				return c, fmt.Errorf("[job-shell] %s: %v", k, err)
			}
		}
	}
	for _, k := range containKeys {
		if v, err := h.Attr(ctx, "job-shell."+k); err == nil && v != "" {
			if err := c.set(k, v); err != nil {
				return c, fmt.Errorf("job-shell.%s: %v", k, err)
			}
		}
	}
	return c, c.Validate()
}

// containment is the broker's containment state (module goroutine only).
type containment struct {
	cfg    ContainConfig
	root   *shell.CgroupRoot // nil: cgroups are not used
	broker *shell.Cgroup     // this broker's cgroup, made at first use
	said   bool              // the fallback has been logged
	// v1 (a machine without the unified hierarchy's memory controller):
	// this broker's cgroups in the cpuset, devices and cpuacct
	// hierarchies, made at first use
	v1      []*shell.Cgroup
	v1tried bool
	gpus    map[uint][]shell.Device // the GPU device nodes, found at first use
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

// V1Controllers are the cgroup v1 hierarchies a job has a cgroup in
// besides the memory hierarchy (those the machine has, as the
// configuration wants them): on a machine whose memory cgroups are v2
// (or with job-shell.cgroup=off) none.
func V1Controllers(cfg ContainConfig, root *shell.CgroupRoot) []string {
	if cfg.Cgroup == "off" || root != nil && root.Version == 2 {
		return nil
	}
	list := []string{"cpuacct"}
	if !cfg.NoCpuset {
		list = append(list, "cpuset")
	}
	if cfg.GPUDevices == nil || len(cfg.GPUDevices) > 0 {
		list = append(list, "devices")
	}
	return list
}

// WantDevices says whether job cgroups below parent (v2) or v1 (the
// v1 devices hierarchy) confine GPU devices.
func WantDevices(cfg ContainConfig, parent *shell.Cgroup, v1 []*shell.Cgroup) bool {
	if cfg.GPUDevices != nil && len(cfg.GPUDevices) == 0 {
		return false
	}
	if parent != nil && parent.Version == 2 {
		return true
	}
	for _, g := range v1 {
		if g.InDevicesHierarchy() {
			return true
		}
	}
	return false
}

// GPUPatterns are the configured GPU device node patterns.
func (c *ContainConfig) GPUPatterns() []string {
	if c.GPUDevices == nil {
		return shell.DefaultGPUDevices
	}
	return c.GPUDevices
}

// v1Seq numbers the v1 cgroup directories made by one process.
var v1Seq atomic.Int64

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
		shell.SweepStale(c.root.Dir) // what killed brokers left
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

// v1Cgroups returns this broker's cgroups in the other v1 hierarchies,
// made at first use (those that cannot be are logged and left out).
func (c *containment) v1Cgroups(x *host) []*shell.Cgroup {
	if c.v1tried {
		return c.v1
	}
	c.v1tried = true
	name := fmt.Sprintf("fluxgo-%d-v1-%d", os.Getpid(), v1Seq.Add(1))
	for _, ctl := range V1Controllers(c.cfg, c.root) {
		dir, err := shell.FindV1Cgroup(ctl)
		if err == nil {
			shell.SweepStale(dir)
			var g *shell.Cgroup
			if g, err = shell.NewV1Cgroup(dir, name); err == nil {
				c.v1 = append(c.v1, g)
				x.log.Info("containment: job cgroups of the v1 " + ctl + " hierarchy in " + g.Path)
				continue
			}
		}
		x.log.Info(fmt.Sprintf("containment: no v1 %s cgroups for jobs: %v", ctl, err))
	}
	return c.v1
}

// gpuDevices returns the node's GPU device nodes, found at first use.
func (c *containment) gpuDevices() map[uint][]shell.Device {
	if c.gpus == nil {
		c.gpus = shell.GPUDeviceNodes(c.cfg.GPUPatterns())
	}
	return c.gpus
}

// close removes the broker's cgroups (at module unload).
func (c *containment) close() {
	if c.broker != nil {
		c.broker.Remove(2 * time.Second)
	}
	for _, g := range c.v1 {
		g.Remove(2 * time.Second)
	}
}

// ModuleCgroups are a job's cgroups on one node (shell.JobCgroups):
// the job-shell module makes them for a shell that runs as the job's
// user (a guest cannot make cgroups), with only their cgroup.procs the
// user's, so the shell can place its tasks but never change a limit;
// the module removes them when the job ends here. An owner's shell
// makes them itself the same way.
type ModuleCgroups = shell.JobCgroups

// JobCgroupSpecFor is a job's shell.JobCgroupSpec on shell index idx of
// its plan: taskMem its per-task limit, jobMem its job limit and
// setting, cfg says whether cpusets are made, gpus are the node's GPU
// device nodes (nil: no device control).
func JobCgroupSpecFor(name string, plan *shell.Plan, idx int, taskMem, jobMem int64, why string, cfg ContainConfig, gpus map[uint][]shell.Device) shell.JobCgroupSpec {
	return shell.JobCgroupSpecFor(name, plan, idx, taskMem, jobMem, why, !cfg.NoCpuset, gpus)
}

// jobContainment is what one job's shell applies to its tasks here.
type jobContainment struct {
	memory  int64          // per-task limit, 0: none
	cwd     string         // replacement working directory, or ""
	mc      *ModuleCgroups // the job's cgroups, or nil
	own     bool           // the shell made mc (and removes it)
	version int            // of the memory cgroups (0: none)
	tasks   []*shell.Cgroup
	job     *shell.Cgroup   // the job's memory (or v2) cgroup, or nil
	v1      []*shell.Cgroup // the job's other v1 cgroups
	fds     []int           // v2 directory descriptors, by local task id
	// usage, read when the tasks are done
	peak    int64
	cpu     time.Duration
	haveCPU bool
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

// nodeMemory returns the node's memory in bytes (a variable for tests).
var nodeMemory = func() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10 // kB
			}
		}
	}
	return 0
}

// JobMemoryLimit returns the most a job's tasks on a node may use
// together under the instance's policy (0: no limit) and the setting
// it comes from: the least of memory-job-max, memory-per-core times
// the job's cores there and memory-node-share of the node's memory.
func JobMemoryLimit(c ContainConfig, cores int) (int64, string) {
	var limit int64
	why := ""
	take := func(n int64, s string) {
		if n > 0 && (limit == 0 || n < limit) {
			limit, why = n, s
		}
	}
	take(c.MemoryJobMax, "job-shell.memory-job-max="+size.Format(c.MemoryJobMax))
	if c.MemoryPerCore > 0 && cores > 0 {
		take(c.MemoryPerCore*int64(cores), fmt.Sprintf("job-shell.memory-per-core=%s x %s", size.Format(c.MemoryPerCore), plural(cores, "core")))
	}
	if c.MemoryNodeShare > 0 {
		if mem := nodeMemory(); mem > 0 {
			take(int64(float64(mem)*c.MemoryNodeShare), fmt.Sprintf("job-shell.memory-node-share=%g of %s", c.MemoryNodeShare, size.Format(mem)))
		}
	}
	return limit, why
}

// CheckJobMemory refuses a job that asked (opts' memory) for more per
// task, times its tasks here, than its limit on the node.
func CheckJobMemory(opts map[string]any, taskMem int64, tasks int, jobMem int64, why string) error {
	if _, asked := opts["memory"]; !asked || jobMem == 0 || taskMem == 0 {
		return nil
	}
	if total := taskMem * int64(tasks); total > jobMem {
		return fmt.Errorf("%w: memory=%s per task (%s here) is more than the instance's maximum of %s per job on this node (%s)",
			shell.ErrBadOption, size.Format(taskMem), plural(tasks, "task"), size.Format(jobMem), why)
	}
	return nil
}

// CapDefaultMemory applies the job's limit on the node to a per-task
// limit the job did not ask for (the instance's default or maximum): a
// default at or above the job's limit is dropped, so the job's limit
// alone holds and an OOM kill names it (QA: a 256M default under a 64M
// job limit was reported as the task's 256M).
func CapDefaultMemory(opts map[string]any, taskMem, jobMem int64) int64 {
	if _, asked := opts["memory"]; asked || jobMem == 0 || taskMem < jobMem {
		return taskMem
	}
	return 0
}

// plural is "1 core", "2 cores".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// contain sets up the job's containment and hooks it into cfg.
func (j *job) contain(cfg *shell.Config) error {
	x := j.x
	opts := j.js.ShellOptions()
	cores := j.plan.Cores[j.idx].Count()
	mem, err := MemoryLimit(opts, x.contain.cfg)
	jobMem, why := JobMemoryLimit(x.contain.cfg, cores)
	mem = CapDefaultMemory(opts, mem, jobMem)
	if err == nil {
		err = CheckJobMemory(opts, mem, j.plan.Counts[j.idx], jobMem, why)
	}
	if j.cgroups != nil {
		// the module decided the limits (it reads the configuration a
		// guest's shell may not)
		mem, jobMem, why, err = j.cgroups.Memory, j.cgroups.JobMemory, j.cgroups.JobMemorySetting, nil
	}
	if err != nil {
		return err
	}
	rl, err := shell.ParseRlimitOption(opts["rlimit"])
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
	if err := jc.makeCgroups(x, j, jobMem, why); err != nil {
		jc.remove()
		return err
	}
	if mem == 0 && jobMem == 0 && jc.mc == nil && len(rl) == 0 && jc.cwd == "" {
		return nil
	}
	j.contained = jc
	setup := cfg.Setup
	ntasks := j.plan.Counts[j.idx]
	cfg.Setup = func(rank, local int, cmd *exec.Cmd) error {
		if jc.cwd != "" {
			cmd.Dir = jc.cwd
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
	if jc.version == 0 {
		// no memory cgroup: the limit is each task's RLIMIT_DATA (the
		// job's whole limit when there is no per-task one)
		if m := mem; m > 0 || jobMem > 0 {
			if m == 0 {
				m = jobMem
			}
			lims = append(append([]shell.Rlimit(nil), rl...), shell.MemoryRlimits(m)...)
		}
	}
	// the cpuset resets a task's CPU affinity as it enters it: per-task
	// and map binding are given back (v2 places at clone, so it too must
	// hold)
	var taskCPUs [][]int
	if m := cfg.CPU.Mode; jc.mc != nil && jc.mc.Cpuset && (m == shell.AffinityPerTask || m == shell.AffinityMap) {
		taskCPUs = cfg.TaskCPUs(ntasks)
	}
	v1 := jc.version == 1 || len(jc.v1) > 0
	if len(lims) == 0 && !v1 && taskCPUs == nil {
		return nil
	}
	// placement and limits must hold from the task's first instruction:
	// it waits until they are set (a limit applied once it runs could
	// come after it has read or hit it)
	cfg.Hold = true
	cfg.Prepare = func(rank, local, pid int) error {
		if err := jc.place(local, pid); err != nil {
			return fmt.Errorf("placing task %d in its cgroups: %w", rank, err)
		}
		if taskCPUs != nil && len(taskCPUs[local]) > 0 {
			var set unix.CPUSet
			for _, c := range taskCPUs[local] {
				set.Set(c)
			}
			unix.SchedSetaffinity(pid, &set)
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

// place moves a held task into its v1 cgroups.
func (jc *jobContainment) place(local, pid int) error {
	if jc.version == 1 {
		g := jc.job
		if len(jc.tasks) > 0 {
			g = jc.tasks[local]
		}
		if g != nil {
			if err := g.AddProcess(pid); err != nil {
				return err
			}
		}
	}
	for _, g := range jc.v1 {
		if err := g.AddProcess(pid); err != nil {
			return err
		}
	}
	return nil
}

// makeCgroups makes the job's cgroups (the job's, one per local task
// with a per-task limit, the v1 cpuset, devices and cpuacct ones), or
// takes those the module made (a guest shell); without memory cgroups
// it leaves jc.version 0 (rlimit fallback).
func (jc *jobContainment) makeCgroups(x *host, j *job, jobMem int64, why string) error {
	n := j.plan.Counts[j.idx]
	mc := j.cgroups
	if mc == nil {
		if x.guest || x.contain.cfg.Cgroup == "off" {
			// no cgroups from the module: it has none it may use (it said so)
			return nil
		}
		parent := x.contain.brokerCgroup(x) // every job's: its usage is read there
		v1 := x.contain.v1Cgroups(x)
		if parent == nil && len(v1) == 0 {
			return nil
		}
		var gpus map[uint][]shell.Device
		if WantDevices(x.contain.cfg, parent, v1) {
			gpus = x.contain.gpuDevices()
		}
		spec := JobCgroupSpecFor(jobCgroupName(j.id), j.plan, j.idx, jc.memory, jobMem, why, x.contain.cfg, gpus)
		var err error
		if mc, err = shell.MakeJobCgroups(parent, v1, spec, nil); err != nil {
			return err
		}
		jc.own = true
	}
	jc.mc = mc
	if mc.Version == 0 && len(mc.V1) == 0 {
		return nil // a limit, but no cgroups: RLIMIT_DATA
	}
	if mc.Version != 0 && mc.Version != 1 && mc.Version != 2 ||
		len(mc.Tasks) != 0 && len(mc.Tasks) != n || mc.Memory != jc.memory || len(mc.Tasks) == 0 && mc.Memory > 0 && mc.Version != 0 {
		return fmt.Errorf("the job-shell module's cgroups (%d, limit %d) do not match the job's %d tasks here (limit %d)",
			len(mc.Tasks), mc.Memory, n, jc.memory)
	}
	jc.version = mc.Version
	if mc.Job != "" {
		jc.job = &shell.Cgroup{Path: mc.Job, Version: mc.Version}
	}
	for _, p := range mc.V1 {
		jc.v1 = append(jc.v1, &shell.Cgroup{Path: p, Version: 1})
	}
	for _, path := range mc.Tasks {
		jc.tasks = append(jc.tasks, &shell.Cgroup{Path: path, Version: mc.Version})
	}
	if mc.Version == 2 {
		if len(jc.tasks) == 0 && jc.job != nil {
			fd, err := jc.job.OpenFD()
			if err != nil {
				return err
			}
			for range n {
				jc.fds = append(jc.fds, fd)
			}
			return nil
		}
		for _, tg := range jc.tasks {
			fd, err := tg.OpenFD()
			if err != nil {
				return err
			}
			jc.fds = append(jc.fds, fd)
		}
	}
	return nil
}

// jobCgroupName is the name of a job's cgroups.
func jobCgroupName(id jobid.ID) string { return "job-" + strconv.FormatUint(uint64(id), 10) }

// oomRanks returns the global ranks of the tasks the kernel killed for
// going over their memory limit, and the limit: a task's own, or the
// job's (then the tasks killed by a signal).
func (jc *jobContainment) oomRanks(j *job) ([]int, int64, string) {
	var out []int
	ranks := j.plan.Tasks(j.idx)
	for local, tg := range jc.tasks {
		if n, err := tg.OOMKills(); err == nil && n > 0 && local < len(ranks) {
			out = append(out, ranks[local])
		}
	}
	if len(out) > 0 || jc.job == nil || jc.mc.JobMemory == 0 {
		return out, jc.memory, ""
	}
	if n, err := jc.job.OOMKills(); err != nil || n == 0 {
		return nil, 0, ""
	}
	for _, e := range j.sh.Exits() {
		if ws := syscall.WaitStatus(e.WaitStatus); ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			out = append(out, e.Rank)
		}
	}
	if len(out) == 0 {
		out = ranks
	}
	return out, jc.mc.JobMemory, jc.mc.JobMemorySetting
}

// readUsage reads the job's peak memory and CPU time here.
func (jc *jobContainment) readUsage() {
	if jc.job != nil {
		jc.peak = jc.job.PeakMemory()
		if jc.version == 2 {
			jc.cpu, jc.haveCPU = jc.job.CPUTime()
		}
	}
	for _, g := range jc.v1 {
		if d, ok := g.CPUTime(); ok {
			jc.cpu, jc.haveCPU = d, true
		}
	}
}

// remove closes descriptors and removes the job's cgroups, killing
// anything left in them (in the background: it may wait for processes).
func (jc *jobContainment) remove() {
	seen := map[int]bool{}
	for _, fd := range jc.fds {
		if !seen[fd] {
			seen[fd] = true
			syscall.Close(fd)
		}
	}
	jc.fds = nil
	if jc.own && jc.mc != nil {
		jc.mc.Remove()
		jc.own = false
	}
}

// appendUsage appends ,"usage":{...} with the job's usage on this node
// when its cgroups know it: peak_memory (bytes) and cpu_time (seconds).
// It goes in the exit response, not in the shell-exit event, whose
// context keeps flux-core's keys; job-exec records it in the job's
// guest.usage.
func (j *job) appendUsage(b []byte) []byte {
	jc := j.contained
	if jc == nil || jc.peak == 0 && !jc.haveCPU {
		return b
	}
	u := map[string]any{}
	if jc.peak > 0 {
		u["peak_memory"] = jc.peak
	}
	if jc.haveCPU {
		u["cpu_time"] = jc.cpu.Seconds()
	}
	enc, err := json.Marshal(u)
	if err != nil {
		return b
	}
	return append(append(b, `,"usage":`...), enc...)
}

// oomNote says which tasks went over their limit: their own, or (with
// the setting it comes from) the job's on the node.
func oomNote(ranks []int, limit int64, setting string) string {
	var s idset.Set
	for _, r := range ranks {
		s.Add(uint(r))
	}
	if setting != "" {
		return fmt.Sprintf("%s %s exceeded the job's memory limit of %s on this node (%s)",
			map[bool]string{true: "task", false: "tasks"}[len(ranks) == 1], s.String(), size.Format(limit), setting)
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
	ranks, limit, setting := jc.oomRanks(j)
	jc.readUsage()
	jc.remove()
	if len(ranks) == 0 {
		next()
		return
	}
	note := oomNote(ranks, limit, setting)
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
