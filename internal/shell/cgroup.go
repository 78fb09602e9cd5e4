package shell

// Memory containment with Linux control groups. A broker that is asked
// to limit a job's memory makes one cgroup per broker, one per job below
// it and one per task below that, each task's with the limit:
//
//	<parent>/fluxgo-<pid>-<n>/job-<id>/task-<localid>
//
// where <parent> is the broker's own memory cgroup (or one configured).
// Version 2 (the unified hierarchy) is used when it has the memory
// controller; otherwise the version 1 memory hierarchy. Tasks are placed
// before they run any code of their own: with CLONE_INTO_CGROUP on v2, and
// while held at exec (see hold.go) on v1.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNoCgroup is the kind of error saying memory cgroups cannot be used
// here; the caller falls back to resource limits.
var ErrNoCgroup = errors.New("no usable memory cgroup")

// CgroupRoot is where a broker may make job cgroups: a directory of a
// hierarchy that has the memory controller.
type CgroupRoot struct {
	// Version is 1 or 2.
	Version int
	// Dir is the parent directory (an existing cgroup).
	Dir string
}

// String describes the root for logs.
func (r *CgroupRoot) String() string {
	if r.Version == 2 {
		return "cgroup v2 at " + r.Dir
	}
	return "cgroup v1 memory controller at " + r.Dir
}

// FindCgroupRoot locates the memory cgroup of this process from
// /proc/self/mountinfo and /proc/self/cgroup, preferring the unified
// hierarchy when it has the memory controller. The error (wrapping
// ErrNoCgroup) says why there is none.
func FindCgroupRoot() (*CgroupRoot, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	return findCgroupRoot(mi, cg, controllersOf)
}

// controllersOf reads a v2 cgroup's cgroup.controllers.
func controllersOf(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// cgroupMount is one cgroup filesystem mount from mountinfo.
type cgroupMount struct {
	root, point string
	v2          bool
	memory      bool     // v1 only: the memory controller is in this hierarchy
	controllers []string // v1 only: the hierarchy's controllers
}

// parseMountinfo returns the cgroup mounts (proc(5) mountinfo format).
func parseMountinfo(mi []byte) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, s := range f {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(f) < sep+4 { // fstype, source, super options
			continue
		}
		fstype := f[sep+1]
		m := cgroupMount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch fstype {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.controllers = strings.Split(f[sep+3], ",")
			m.memory = contains(m.controllers, "memory")
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// join places a cgroup path (from /proc/self/cgroup) under a mount whose
// root is mroot.
func join(m cgroupMount, path string) string {
	if m.root != "/" {
		rel, ok := strings.CutPrefix(path, m.root)
		if !ok {
			return ""
		}
		path = rel
	}
	return filepath.Join(m.point, path)
}

// findCgroupRoot is FindCgroupRoot on given file contents; controllers
// reads a v2 directory's controllers (a fake in tests).
func findCgroupRoot(mountinfo, selfCgroup []byte, controllers func(string) ([]string, error)) (*CgroupRoot, error) {
	mounts := parseMountinfo(mountinfo)
	var v2path, v1path string
	haveV1 := false
	sc := bufio.NewScanner(bytes.NewReader(selfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1path, haveV1 = parts[2], true
			}
		}
	}
	var why []string
	if v2path != "" {
		for _, m := range mounts {
			if !m.v2 {
				continue
			}
			dir := join(m, v2path)
			if dir == "" {
				continue
			}
			ctl, err := controllers(dir)
			if err != nil {
				why = append(why, fmt.Sprintf("cgroup v2 at %s: %v", dir, err))
				continue
			}
			if !contains(ctl, "memory") {
				why = append(why, fmt.Sprintf("cgroup v2 at %s lacks the memory controller", dir))
				continue
			}
			return &CgroupRoot{Version: 2, Dir: dir}, nil
		}
	}
	if haveV1 {
		for _, m := range mounts {
			if m.v2 || !m.memory {
				continue
			}
			if dir := join(m, v1path); dir != "" {
				return &CgroupRoot{Version: 1, Dir: dir}, nil
			}
		}
		why = append(why, "the v1 memory controller is not mounted")
	}
	if len(why) == 0 {
		why = append(why, "no cgroup filesystem is mounted")
	}
	return nil, fmt.Errorf("%w: %s", ErrNoCgroup, strings.Join(why, "; "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// brokerSeq numbers the cgroup directories made by one process (several
// brokers may share a process in tests).
var brokerSeq atomic.Int64

// NewBrokerCgroup makes this broker's directory under the root, where
// job cgroups go. On v2 it enables the memory controller for the
// children of the root and of the new directory.
func (r *CgroupRoot) NewBrokerCgroup() (*Cgroup, error) {
	if r.Version == 2 {
		if err := enableMemory(r.Dir); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
		}
	}
	name := fmt.Sprintf("fluxgo-%d-%d", os.Getpid(), brokerSeq.Add(1))
	g := &Cgroup{Path: filepath.Join(r.Dir, name), Version: r.Version}
	if err := os.Mkdir(g.Path, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	if r.Version == 2 {
		if err := enableMemory(g.Path); err != nil {
			os.Remove(g.Path)
			return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
		}
		// job cgroups get cpusets where the controller is to be had
		if EnableController(r.Dir, "cpuset") {
			EnableController(g.Path, "cpuset")
		}
	}
	return g, nil
}

// OpenCgroup is NewBrokerCgroup for a directory of a given name, which
// may exist already (the job-shell module's, the same across restarts).
func (r *CgroupRoot) OpenCgroup(name string) (*Cgroup, error) {
	if r.Version == 2 {
		if err := enableMemory(r.Dir); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
		}
		EnableController(r.Dir, "cpuset")
	}
	g := &Cgroup{Path: r.Dir, Version: r.Version}
	c, err := g.OpenChild(name, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	return c, nil
}

// enableMemory adds the memory controller to a v2 cgroup's
// cgroup.subtree_control unless it is there already.
func enableMemory(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err == nil && contains(strings.Fields(string(b)), "memory") {
		return nil
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory"); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("cannot enable the memory controller below %s: it holds processes (configure a delegated, empty cgroup): %w", dir, err)
		}
		return fmt.Errorf("cannot enable the memory controller below %s: %w", dir, err)
	}
	return nil
}

// Cgroup is one cgroup directory.
type Cgroup struct {
	Path    string
	Version int
	// kind memoizes which v1 hierarchy the cgroup is in (v1Kind): the
	// broker's v1 cgroups are asked for every job
	kind v1Kind
}

// v1Kind says which v1 hierarchy a cgroup is in, as far as job cgroups
// care: cpuset, devices or another (cpuacct).
type v1Kind uint8

const (
	kindUnknown v1Kind = iota
	kindCpuset
	kindDevices
	kindOther
)

// v1Kind finds (once) which v1 hierarchy the cgroup is in from its files.
func (g *Cgroup) v1Kind() v1Kind {
	if g.kind == kindUnknown {
		switch {
		case g.HasCpuset():
			g.kind = kindCpuset
		case g.HasDevices():
			g.kind = kindDevices
		default:
			g.kind = kindOther
		}
	}
	return g.kind
}

// InDevicesHierarchy says whether a v1 cgroup is in the devices
// hierarchy (and not the cpuset one), looked up once per cgroup.
func (g *Cgroup) InDevicesHierarchy() bool { return g.v1Kind() == kindDevices }

// Child makes a child cgroup named name (on v2 with the memory
// controller enabled for its own children when sub is true).
func (g *Cgroup) Child(name string, sub bool) (*Cgroup, error) {
	c := &Cgroup{Path: filepath.Join(g.Path, name), Version: g.Version}
	if err := os.Mkdir(c.Path, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", c.Path, err)
	}
	if sub && g.Version == 2 {
		if err := enableMemory(c.Path); err != nil {
			os.Remove(c.Path)
			return nil, err
		}
		EnableController(c.Path, "cpuset")
	}
	return c, nil
}

// OpenChild is Child but takes an existing child as it is (a v2 child
// made with sub gets the memory controller for its children).
func (g *Cgroup) OpenChild(name string, sub bool) (*Cgroup, error) {
	c := &Cgroup{Path: filepath.Join(g.Path, name), Version: g.Version}
	if err := os.Mkdir(c.Path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup %s: %w", c.Path, err)
	}
	if sub && g.Version == 2 {
		if err := enableMemory(c.Path); err != nil {
			return nil, err
		}
		EnableController(c.Path, "cpuset")
	}
	return c, nil
}

// Delegate lets uid move its own processes into the cgroup (its
// cgroup.procs, and tasks or cgroup.threads, become uid's); the
// directory and the limits in it stay the owner's, so uid can neither
// change a limit nor make or remove cgroups there.
func (g *Cgroup) Delegate(uid, gid int) error {
	files := []string{"cgroup.procs", "tasks"}
	if g.Version == 2 {
		files[1] = "cgroup.threads"
	}
	for _, f := range files {
		if err := os.Lchown(filepath.Join(g.Path, f), uid, gid); err != nil && !(f != "cgroup.procs" && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("delegating cgroup %s to userid %d: %w", g.Path, uid, err)
		}
	}
	return nil
}

// SetMemoryLimit limits the cgroup's memory to bytes, with no swap
// beyond it.
func (g *Cgroup) SetMemoryLimit(bytes int64) error {
	v := strconv.FormatInt(bytes, 10)
	if g.Version == 2 {
		if err := writeFile(filepath.Join(g.Path, "memory.max"), v); err != nil {
			return err
		}
		// swap accounting may be off: then there is no file to write
		if err := writeFile(filepath.Join(g.Path, "memory.swap.max"), "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := writeFile(filepath.Join(g.Path, "memory.limit_in_bytes"), v); err != nil {
		return err
	}
	// memory+swap must be at least memory; equal means no swap
	if err := writeFile(filepath.Join(g.Path, "memory.memsw.limit_in_bytes"), v); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// AddProcess moves process pid (all its threads) into the cgroup.
func (g *Cgroup) AddProcess(pid int) error {
	return writeFile(filepath.Join(g.Path, "cgroup.procs"), strconv.Itoa(pid))
}

// OpenFD opens the cgroup directory for CLONE_INTO_CGROUP (v2).
func (g *Cgroup) OpenFD() (int, error) {
	fd, err := syscall.Open(g.Path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("cgroup %s: %w", g.Path, err)
	}
	return fd, nil
}

// OOMKills returns how many processes the kernel's OOM killer killed in
// the cgroup (and below it) because of its limit.
func (g *Cgroup) OOMKills() (int64, error) {
	file := "memory.oom_control"
	if g.Version == 2 {
		file = "memory.events"
	}
	b, err := readControl(filepath.Join(g.Path, file))
	if err != nil {
		return 0, err
	}
	return keyedValue(b, "oom_kill")
}

// keyedValue finds "key N" in a flat-keyed cgroup file.
func keyedValue(b []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s count: %w", key, os.ErrNotExist)
}

// PeakMemory returns the most memory the cgroup used (0 if the kernel
// does not say).
func (g *Cgroup) PeakMemory() int64 {
	file := "memory.max_usage_in_bytes"
	if g.Version == 2 {
		file = "memory.peak"
	}
	b, err := readControl(filepath.Join(g.Path, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Processes lists the processes in the cgroup itself.
func (g *Cgroup) Processes() []int {
	b, err := readControl(filepath.Join(g.Path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Remove kills whatever still runs in the cgroup and its children and
// removes them all, waiting up to timeout for the processes to go.
func (g *Cgroup) Remove(timeout time.Duration) error {
	// a job's cgroup is mostly empty by now and has no children: one
	// rmdir does (EBUSY: processes or children left, handled below)
	if err := syscall.Rmdir(g.Path); err == nil || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	deadline := time.Now().Add(timeout)
	var dirs []string
	filepath.WalkDir(g.Path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var last error
	for i := len(dirs) - 1; i >= 0; i-- { // children first
		c := &Cgroup{Path: dirs[i], Version: g.Version}
		for {
			for _, pid := range c.Processes() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			err := syscall.Rmdir(c.Path)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				last = fmt.Errorf("removing cgroup %s: %w", c.Path, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return last
}

// writeFile writes one value to a cgroup control file (which must exist).
func writeFile(path, value string) error {
	if err := writeControl(path, value); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, errors.Unwrap(err))
	}
	return nil
}
