package jobshell

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	contentmod "github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/jobexec"
	"github.com/fluxgo/fluxgo/internal/modules/jobingest"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// containJob is a job for runContained.
type containJob struct {
	R         string // default: one rank, a core per task
	argv      []string
	ntasks    int
	shellOpts map[string]any
	attrs     map[string]string // broker attributes
	cwd       string
}

// containResult is what a job left behind.
type containResult struct {
	names  []string          // job events
	exc    map[string]string // the first exception's type and note
	stdout map[int]string    // by task rank
	stderr map[int]string    // by task rank
	dmesg  string            // the broker log
}

// runContained runs one job through the real job modules in process and
// collects its events, output and the broker log.
func runContained(t *testing.T, cj containJob) containResult {
	t.Helper()
	if cj.ntasks == 0 {
		cj.ntasks = 1
	}
	if cj.R == "" { // a core per task
		cj.R = fmt.Sprintf(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-%d"}}],"nodelist":["a"]}}`, cj.ntasks-1)
	}
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register(contentmod.Name, contentmod.New)
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{R: cj.R} })
	reg.Register("job-exec", jobexec.New)
	reg.Register("job-ingest", jobingest.New)
	reg.Register("job-shell", New)
	mods := []broker.ModuleSpec{{Name: contentmod.Name, Ranks: "0"}, {Name: "kvs", Ranks: "0"}, {Name: "job-manager", Ranks: "0"}, {Name: "sched", Ranks: "0"},
		{Name: "job-shell"}, {Name: "job-exec", Ranks: "0"}, {Name: "job-ingest", Ranks: "0"}}
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg, Modules: mods, Attrs: shellAttrs(t, cj.attrs)})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	js, err := jobspec.FromCommand(cj.argv, jobspec.CommandOptions{NTasks: cj.ntasks})
	if err != nil {
		t.Fatal(err)
	}
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	if cj.cwd != "" {
		js.SetCwd(cj.cwd)
	}
	for k, v := range cj.shellOpts {
		js.SetShellOption(k, v)
	}
	b, _ := json.Marshal(js)
	f, _ := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": sign.Wrap(b, 0)}, &resp); err != nil {
		t.Fatal(err)
	}
	res := containResult{exc: map[string]string{}, stdout: map[int]string{}, stderr: map[int]string{}}
	for len(res.names) == 0 || res.names[len(res.names)-1] != "clean" {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("journal: %v (%v)", err, res.names)
		}
		var e struct {
			ID     jobid.ID `json:"id"`
			Events []struct {
				Name    string         `json:"name"`
				Context map[string]any `json:"context"`
			} `json:"events"`
		}
		m.UnmarshalPayload(&e)
		for _, ev := range e.Events {
			if e.ID != resp.ID || ev.Name == "annotations" {
				continue
			}
			res.names = append(res.names, ev.Name)
			if ev.Name == "exception" && res.exc["type"] == "" {
				res.exc["type"], _ = ev.Context["type"].(string)
				res.exc["note"], _ = ev.Context["note"].(string)
			}
		}
	}
	dothex, _ := resp.ID.Encode("dothex")
	for _, ev := range events(t, fk, "job."+dothex+".guest.output") {
		var c struct {
			Stream string `json:"stream"`
			Rank   string `json:"rank"`
			Data   string `json:"data"`
		}
		ev.DecodeContext(&c)
		var rank int
		fmt.Sscan(c.Rank, &rank)
		if c.Stream == "stdout" {
			res.stdout[rank] += c.Data
		} else {
			res.stderr[rank] += c.Data
		}
	}
	df, _ := h.RPC("log.dmesg", flux.NodeidAny, map[string]any{"follow": false}, flux.Streaming)
	var log strings.Builder
	for {
		m, err := df.Next(ctx)
		if err != nil {
			break
		}
		log.Write(m.JSON())
		log.WriteByte('\n')
	}
	res.dmesg = log.String()
	return res
}

// haveMemoryCgroup skips unless this process may make memory cgroups.
func haveMemoryCgroup(t *testing.T) {
	t.Helper()
	root, err := shell.FindCgroupRoot()
	if err != nil {
		t.Skipf("no memory cgroup here: %v", err)
	}
	g, err := root.NewBrokerCgroup()
	if err != nil {
		t.Skipf("cannot make memory cgroups under %s (run as root, or delegate the cgroup): %v", root, err)
	}
	g.Remove(0)
}

// hog allocates and touches 256M in one go.
var hog = []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}

func TestMemoryLimitOOM(t *testing.T) {
	haveMemoryCgroup(t)
	res := runContained(t, containJob{argv: hog, shellOpts: map[string]any{"memory": "32M"}})
	if res.exc["type"] != "oom" || res.exc["note"] != "task 0 exceeded its memory limit of 32M" {
		t.Fatalf("exception %v; events %v; stderr %v", res.exc, res.names, res.stderr)
	}
	if i, j := index(res.names, "exception"), index(res.names, "finish"); i < 0 || j < 0 || i > j {
		t.Fatalf("want the exception before finish: %v", res.names)
	}
	if !strings.Contains(res.dmesg, "memory containment: cgroup") {
		t.Errorf("broker log does not say how memory is contained:\n%s", res.dmesg)
	}
	// the job's cgroups are gone
	assertNoJobCgroups(t)
}

// TestMemoryLimitPerTask runs two tasks of which only one goes over.
func TestMemoryLimitPerTask(t *testing.T) {
	haveMemoryCgroup(t)
	argv := []string{"sh", "-c", `if [ "$FLUX_TASK_RANK" = 1 ]; then exec dd if=/dev/zero of=/dev/null bs=256M count=1; fi; dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null && echo fine`}
	res := runContained(t, containJob{argv: argv, ntasks: 2, shellOpts: map[string]any{"memory": float64(64 << 20)}})
	if res.exc["type"] != "oom" || res.exc["note"] != "task 1 exceeded its memory limit of 64M" {
		t.Fatalf("exception %v; events %v", res.exc, res.names)
	}
	if res.stdout[0] != "fine\n" {
		t.Fatalf("task 0 (under its limit) output %q", res.stdout[0])
	}
}

func TestMemoryUnderLimit(t *testing.T) {
	haveMemoryCgroup(t)
	res := runContained(t, containJob{argv: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=4M", "count=4"},
		attrs: map[string]string{"job-shell.memory-default": "64M"}})
	if res.exc["type"] != "" || index(res.names, "exception") >= 0 {
		t.Fatalf("unexpected exception %v (%v)", res.exc, res.stderr)
	}
}

// TestMemoryDefault checks the instance default applies to jobs that
// set no limit.
func TestMemoryDefault(t *testing.T) {
	haveMemoryCgroup(t)
	res := runContained(t, containJob{argv: hog, attrs: map[string]string{"job-shell.memory-default": "16M"}})
	if res.exc["type"] != "oom" || !strings.Contains(res.exc["note"], "limit of 16M") {
		t.Fatalf("exception %v", res.exc)
	}
}

// TestMemoryFallback checks that without cgroups the log says so once
// and an allocation over the limit fails in the task.
func TestMemoryFallback(t *testing.T) {
	res := runContained(t, containJob{argv: hog, shellOpts: map[string]any{"memory": "32M"},
		attrs: map[string]string{"job-shell.cgroup": "off"}})
	if !strings.Contains(res.dmesg, "cgroups disabled (job-shell.cgroup=off); memory limits use RLIMIT_DATA") {
		t.Fatalf("broker log:\n%s", res.dmesg)
	}
	if !strings.Contains(res.stderr[0], "memory") {
		t.Fatalf("dd over a 32M data limit: stderr %q", res.stderr[0])
	}
	if res.exc["type"] == "oom" {
		t.Fatalf("no oom exception is possible without cgroups: %v", res.exc)
	}
}

func TestBadContainmentOptions(t *testing.T) {
	for _, opts := range []map[string]any{
		{"memory": "lots"},
		{"rlimit": map[string]any{"bogus": float64(1)}},
	} {
		res := runContained(t, containJob{argv: []string{"true"}, shellOpts: opts})
		if res.exc["type"] != "exec" || !strings.Contains(res.exc["note"], "invalid shell option") {
			t.Fatalf("options %v: exception %v", opts, res.exc)
		}
	}
}

func TestRlimitOption(t *testing.T) {
	res := runContained(t, containJob{argv: []string{"sh", "-c", "ulimit -c; ulimit -n"},
		shellOpts: map[string]any{"rlimit": map[string]any{"core": float64(0), "nofile": float64(200)}}})
	if res.stdout[0] != "0\n200\n" {
		t.Fatalf("limits in the task %q (stderr %q)", res.stdout[0], res.stderr[0])
	}
}

func TestCwdFallback(t *testing.T) {
	res := runContained(t, containJob{argv: []string{"pwd"}, cwd: "/nonexistent/dir"})
	if res.stdout[0] != "/tmp\n" || !strings.Contains(res.stderr[0], "cannot change to /nonexistent/dir") {
		t.Fatalf("stdout %q stderr %q", res.stdout[0], res.stderr[0])
	}
}

// TestCPUAffinity checks -o cpu-affinity: per-task gives each task CPUs
// of its own, on all of the job's cores, off the broker's whole mask.
func TestCPUAffinity(t *testing.T) {
	cpus := onlineCPUList(t)
	if len(cpus) < 2 {
		t.Skipf("need 2 CPUs, have %v", cpus)
	}
	R := fmt.Sprintf(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"%d-%d"}}],"nodelist":["a"]}}`, cpus[0], cpus[1])
	if cpus[1] != cpus[0]+1 {
		t.Skipf("first CPUs %v are not adjacent", cpus[:2])
	}
	argv := []string{"sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"}
	all := fmt.Sprintf("%d-%d", cpus[0], cpus[1])
	tests := []struct {
		aff  string
		want []string
	}{
		{"per-task", []string{fmt.Sprint(cpus[0]), fmt.Sprint(cpus[1])}},
		{"on", []string{all, all}},
		{"off", []string{allowedList(t), allowedList(t)}},
	}
	for _, tc := range tests {
		t.Run(tc.aff, func(t *testing.T) {
			res := runContained(t, containJob{R: R, argv: argv, ntasks: 2, shellOpts: map[string]any{"cpu-affinity": tc.aff}})
			got := []string{strings.TrimSpace(res.stdout[0]), strings.TrimSpace(res.stdout[1])}
			if got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Fatalf("Cpus_allowed_list of tasks 0, 1: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGPUAffinity checks the GPUs of R reach the tasks in
// CUDA_VISIBLE_DEVICES, all to each task by default, divided with
// -o gpu-affinity=per-task, not at all with off.
func TestGPUAffinity(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1","gpu":"0-3"}}],"nodelist":["a"]}}`
	argv := []string{"sh", "-c", `echo "${CUDA_VISIBLE_DEVICES-unset}"`}
	tests := []struct {
		aff  any
		want []string
	}{
		{nil, []string{"0,1,2,3", "0,1,2,3"}},
		{"on", []string{"0,1,2,3", "0,1,2,3"}},
		{"per-task", []string{"0,1", "2,3"}},
		{"off", []string{"unset", "unset"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.aff), func(t *testing.T) {
			opts := map[string]any{}
			if tc.aff != nil {
				opts["gpu-affinity"] = tc.aff
			}
			res := runContained(t, containJob{R: R, argv: argv, ntasks: 2, shellOpts: opts})
			got := []string{strings.TrimSpace(res.stdout[0]), strings.TrimSpace(res.stdout[1])}
			if got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Fatalf("CUDA_VISIBLE_DEVICES of tasks 0, 1: %q, want %q (stderr %v)", got, tc.want, res.stderr)
			}
		})
	}
}

func index(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// onlineCPUList returns the CPUs this process may use, ascending.
func onlineCPUList(t *testing.T) []int {
	set, err := idsetOf(allowedList(t))
	if err != nil {
		t.Fatal(err)
	}
	sort.Ints(set)
	return set
}

// allowedList is this process's Cpus_allowed_list.
func allowedList(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no Cpus_allowed_list")
	return ""
}

func idsetOf(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		var lo, hi int
		if n, _ := fmt.Sscanf(part, "%d-%d", &lo, &hi); n == 2 {
			for i := lo; i <= hi; i++ {
				out = append(out, i)
			}
			continue
		}
		if _, err := fmt.Sscanf(part, "%d", &lo); err != nil {
			return nil, errors.New("bad cpu list " + s)
		}
		out = append(out, lo)
	}
	return out, nil
}

// assertNoJobCgroups checks this process left no job cgroups behind
// (they are removed in the background: allow a moment).
func assertNoJobCgroups(t *testing.T) {
	t.Helper()
	root, err := shell.FindCgroupRoot()
	if err != nil {
		return
	}
	prefix := fmt.Sprintf("fluxgo-%d-", os.Getpid())
	for i := 0; i < 100; i++ {
		left := 0
		ents, _ := os.ReadDir(root.Dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				sub, _ := os.ReadDir(root.Dir + "/" + e.Name())
				for _, s := range sub {
					if s.IsDir() {
						left++
					}
				}
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("job cgroups left under %s", root.Dir)
}

// TestMemoryMax: job-shell.memory-max is a limit a job cannot raise: a
// job asking more is refused with an exec exception naming it, and a job
// asking none is held to it (there is no default here).
func TestMemoryMax(t *testing.T) {
	res := runContained(t, containJob{argv: []string{"true"}, shellOpts: map[string]any{"memory": "1T"},
		attrs: map[string]string{"job-shell.memory-max": "64M", "job-shell.cgroup": "off"}})
	if res.exc["type"] != "exec" || !strings.Contains(res.exc["note"], "memory=1T is more than the instance's maximum of 64M per task (job-shell.memory-max)") {
		t.Fatalf("a job asking 1T under a 64M maximum: exception %v", res.exc)
	}
	res = runContained(t, containJob{argv: hog, attrs: map[string]string{"job-shell.memory-max": "32M", "job-shell.cgroup": "off"}})
	if !strings.Contains(res.stderr[0], "memory") {
		t.Fatalf("dd of 256M in a job held to a 32M maximum: stderr %q, exception %v", res.stderr[0], res.exc)
	}
}
