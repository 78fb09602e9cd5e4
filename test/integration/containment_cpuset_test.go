package integration

// Containment of jobs to what they were given (issue 24): a cpuset of
// the job's cores, only the job's GPUs' device nodes, a memory limit per
// job per node the user cannot raise, and the job's usage in its exec
// eventlog. Each test skips without root or without the controller.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// needCgroups skips the test unless it runs as root where job cgroups
// with the controller can be made.
func needCgroups(t *testing.T, controller string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	root, err := shell.FindCgroupRoot()
	if controller == "memory" {
		if err != nil {
			t.Skipf("no memory cgroup: %v", err)
		}
		return
	}
	if err == nil && root.Version == 2 {
		if controller == "devices" {
			t.Skip("device control on cgroup v2 (an eBPF program) is not done")
		}
		b, _ := os.ReadFile(filepath.Join(root.Dir, "cgroup.controllers"))
		if !strings.Contains(string(b), controller) {
			t.Skipf("the cgroup v2 directory %s has no %s controller", root.Dir, controller)
		}
		return
	}
	if _, err := shell.FindV1Cgroup(controller); err != nil {
		t.Skipf("no %s cgroup: %v", controller, err)
	}
}

// allowedCPUs parses the Cpus_allowed_list line of /proc/PID/status.
func allowedCPUs(t *testing.T, out string) idset.Set {
	t.Helper()
	_, list, ok := strings.Cut(strings.TrimSpace(out), "Cpus_allowed_list:")
	s, err := idset.Parse(strings.TrimSpace(list))
	if !ok || err != nil {
		t.Fatalf("not a Cpus_allowed_list line: %q (%v)", out, err)
	}
	return s
}

// TestCpusetAffinityOff: with job-shell.cpuset=on and cpu-affinity=off a
// 1-core task still sees only its core (its job's cpuset), the owner's
// and a guest's alike; without it (the default) there are no cpusets.
func TestCpusetAffinityOff(t *testing.T) {
	needCgroups(t, "cpuset")
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var all idset.Set
	for _, line := range strings.Split(string(self), "\n") {
		if strings.HasPrefix(line, "Cpus_allowed_list:") {
			all = allowedCPUs(t, line)
		}
	}
	if all.Count() < 2 {
		t.Skipf("this process may run on %d CPU: a cpuset of one shows nothing", all.Count())
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{"job-shell.cpuset": "on"}})}
	got := allowedCPUs(t, e.must("run", "-n1", "-o", "cpu-affinity=off", "grep", "Cpus_allowed_list", "/proc/self/status"))
	if got.Count() != 1 {
		t.Errorf("a 1-core task with cpu-affinity=off may run on CPUs %s, want one", got)
	}
	// a 2-core job's task sees both its cores
	if all.Count() >= 2 {
		if got := allowedCPUs(t, e.must("run", "-n1", "-c2", "-o", "cpu-affinity=off", "grep", "Cpus_allowed_list", "/proc/self/status")); got.Count() != 2 {
			t.Errorf("a 2-core task with cpu-affinity=off may run on CPUs %s, want two", got)
		}
	}
	if canRunAsGuest(e) {
		r := e.asGuest("run", "-n1", "-o", "cpu-affinity=off", "grep", "Cpus_allowed_list", "/proc/self/status")
		if r.Code != 0 {
			t.Fatalf("a guest's job: %+v", r)
		}
		if got := allowedCPUs(t, r.Stdout); got.Count() != 1 {
			t.Errorf("a guest's 1-core task with cpu-affinity=off may run on CPUs %s, want one", got)
		}
	}

	off := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1})}
	if got := allowedCPUs(t, off.must("run", "-n1", "-o", "cpu-affinity=off", "grep", "Cpus_allowed_list", "/proc/self/status")); got.Count() < 2 {
		t.Errorf("without job-shell.cpuset=on a task with cpu-affinity=off may run on CPUs %s only", got)
	}
}

// TestMemoryPerCore: the instance's maximum per core is the job's limit
// on the node: a job asking more per task fails with an exec exception
// naming the setting; a task that uses more is killed, and the job gets
// the oom exception, the owner's and a guest's alike.
func TestMemoryPerCore(t *testing.T) {
	needCgroups(t, "memory")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job-shell.toml"), []byte("[job-shell]\nmemory-per-core = \"64M\"\nmemory-max = \"256M\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + dir}})}
	// (memory-max, the default per task, is above the job's limit: the
	// job's limit holds, and an OOM kill names it)
	want := "memory=200M per task (1 task here) is more than the instance's maximum of 64M per job on this node (job-shell.memory-per-core=64M x 1 core)"
	if r := e.flux("run", "-n1", "-o", "memory=200M", "true"); r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("a job asking more than the maximum per core: %+v", r)
	}
	e.must("run", "-n1", "-o", "memory=32M", "true")

	oom := "task 0 exceeded the job's memory limit of 64M on this node (job-shell.memory-per-core=64M x 1 core)"
	id := e.submit("-n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1")
	e.waitEvent(id, "clean")
	if log := e.must("job", "eventlog", id.String()); !strings.Contains(log, `type="oom"`) || !strings.Contains(log, oom) {
		t.Errorf("a task over the per-core maximum: eventlog\n%s\nwant an oom exception %q", log, oom)
	}
	// two cores: twice the limit
	e.must("run", "-n1", "-c2", "dd", "if=/dev/zero", "of=/dev/null", "bs=96M", "count=1")

	if !canRunAsGuest(e) {
		return
	}
	if r := e.asGuest("run", "-n1", "-o", "memory=200M", "true"); r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("a guest's job asking more than the maximum per core: %+v", r)
	}
	r := e.asGuest("run", "-n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1")
	if r.Code == 0 || !strings.Contains(r.Stderr, oom) {
		t.Errorf("a guest's task over the per-core maximum: %+v", r)
	}
}

// TestGPUDeviceNodes: a task of a 1-GPU job may open its GPU's device
// node and gets EPERM for the other's; a job without GPUs may open
// neither (fake device nodes of a spare major number, 240).
func TestGPUDeviceNodes(t *testing.T) {
	needCgroups(t, "devices")
	// a directory a guest can reach (t.TempDir's parent is private)
	dir, err := os.MkdirTemp("", "fluxgo-gpus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		node := filepath.Join(dir, fmt.Sprintf("gpu%d", i))
		if err := syscall.Mknod(node, syscall.S_IFCHR|0o666, int((240<<8)|i)); err != nil {
			t.Skipf("cannot make a fake device node: %v", err)
		}
		os.Chmod(node, 0o666)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[resource]\nnoverify = true\n[[resource.config]]\nhosts = %q\ncores = \"0-1\"\ngpus = \"0-1\"\n[job-shell]\ngpu-devices = %q\n",
		host, filepath.Join(dir, "gpu%d"))
	cdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cdir, "conf.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + cdir}})}
	// cat of a node whose major has no driver fails with ENXIO: the
	// cgroup let it open; EPERM is the cgroup's refusal
	script := fmt.Sprintf(`for i in 0 1; do echo "$i:${CUDA_VISIBLE_DEVICES:-none}:$(cat %s/gpu$i 2>&1)"; done`, dir)
	check := func(who string, out string, noGPU bool) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: output %q", who, out)
		}
		for _, line := range lines {
			id, rest, _ := strings.Cut(line, ":")
			mine, msg, _ := strings.Cut(rest, ":")
			denied := strings.Contains(msg, "Operation not permitted")
			opened := strings.Contains(msg, "No such device or address")
			if own := mine == id && !noGPU; own != opened || own == denied {
				t.Errorf("%s: GPU %s (the job's: %s): %q", who, id, mine, msg)
			}
		}
	}
	check("a 1-GPU job", e.must("run", "-n1", "-g1", "sh", "-c", script), false)
	check("a job without GPUs", e.must("run", "-n1", "sh", "-c", script), true)
	if canRunAsGuest(e) {
		r := e.asGuest("run", "-n1", "-g1", "sh", "-c", script)
		if r.Code != 0 {
			t.Fatalf("a guest's 1-GPU job: %+v", r)
		}
		check("a guest's 1-GPU job", r.Stdout, false)
	}
}

// TestShellExitUsage: a job's guest.usage has, for each node, the peak
// memory (bytes) and the CPU time (seconds) of its tasks there (the
// shell-exit event keeps flux-core's keys).
func TestShellExitUsage(t *testing.T) {
	needCgroups(t, "memory")
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1})}
	usage := func(e *env, id jobid.ID) (peak, cpu float64) {
		t.Helper()
		dir := e.must("job", "id", "--to=kvs", id.String())
		text := e.must("kvs", "get", dir+".guest.usage")
		var u map[string]struct {
			Peak *float64 `json:"peak_memory"`
			CPU  *float64 `json:"cpu_time"`
		}
		if err := json.Unmarshal([]byte(text), &u); err != nil {
			t.Fatalf("guest.usage %q: %v", text, err)
		}
		r, ok := u["0"]
		if !ok || r.CPU == nil {
			t.Fatalf("guest.usage of rank 0 without cpu_time: %s", text)
		}
		if r.Peak != nil {
			peak = *r.Peak
		}
		return peak, *r.CPU
	}
	id := e.submit("-n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=8")
	e.waitEvent(id, "clean")
	peak, cpu := usage(e, id)
	if peak < 32<<20 {
		t.Errorf("peak_memory %v of a task that used a 32M buffer", peak)
	}
	if cpu <= 0 {
		t.Errorf("cpu_time %v", cpu)
	}
	if canRunAsGuest(e) {
		r := e.asGuest("submit", "-n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=8")
		gid, err := jobid.Parse(strings.TrimSpace(r.Stdout))
		if err != nil {
			t.Fatalf("guest submit: %+v", r)
		}
		e.waitEvent(gid, "clean")
		if peak, _ := usage(e, gid); peak < 32<<20 {
			t.Errorf("a guest's job's peak_memory %v", peak)
		}
	}
}

// TestMemoryNodeShare: with job-shell.memory-node-share a job asking
// for more than that share of the node's memory fails, naming it; one
// asking less runs.
func TestMemoryNodeShare(t *testing.T) {
	needCgroups(t, "memory")
	e := start(t, "job-shell.memory-node-share=0.5")
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			fmt.Sscan(rest, &kb)
		}
	}
	if kb == 0 {
		t.Skip("no MemTotal")
	}
	r := e.flux("run", "-n1", "-o", fmt.Sprintf("memory=%d", kb<<10), "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "per job on this node (job-shell.memory-node-share=0.5 of ") {
		t.Errorf("a job asking for the whole node: %+v", r)
	}
	e.must("run", "-n1", "-o", "memory=32M", "true")
}
