package shell

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func mustR(t *testing.T, s string) *rset.R {
	t.Helper()
	r, err := rset.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMakePlan(t *testing.T) {
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}}]}}`)
	tests := []struct {
		name   string
		opts   jobspec.CommandOptions
		po     PlanOptions
		counts string
	}{
		{"per-slot", jobspec.CommandOptions{NTasks: 8}, PlanOptions{}, "[4 4]"},
		{"cores-per-task", jobspec.CommandOptions{NTasks: 4, CoresPerTask: 2}, PlanOptions{}, "[2 2]"},
		{"per-node", jobspec.CommandOptions{NTasks: 1}, PlanOptions{PerResourceType: "node", PerResourceCount: 1}, "[1 1]"},
		{"per-core", jobspec.CommandOptions{NTasks: 1}, PlanOptions{PerResourceType: "core", PerResourceCount: 2}, "[8 8]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js, err := jobspec.FromCommand([]string{"x"}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			p, err := MakePlan(js, R, tc.po)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(p.Counts); got != tc.counts {
				t.Fatalf("counts %s want %s", got, tc.counts)
			}
		})
	}
	// a total that does not divide evenly
	js, _ := jobspec.FromCommand([]string{"x"}, jobspec.CommandOptions{NTasks: 3, NNodes: 2})
	p, err := MakePlan(js, R, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.NTasks != 3 {
		t.Fatalf("ntasks %d (counts %v)", p.NTasks, p.Counts)
	}
}

func TestRunTasks(t *testing.T) {
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`)
	js, _ := jobspec.FromCommand([]string{"sh", "-c", `echo rank=$FLUX_TASK_RANK size=$FLUX_JOB_SIZE; echo err >&2; exit $FLUX_TASK_RANK`}, jobspec.CommandOptions{NTasks: 1})
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	p, err := MakePlan(js, R, PlanOptions{PerResourceType: "node", PerResourceCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := map[string][]string{}
	eofs := 0
	s, err := Start(Config{JobID: jobid.ID(1234), Jobspec: js, Plan: p, Index: 0, Output: func(o Output) {
		mu.Lock()
		defer mu.Unlock()
		if o.EOF {
			eofs++
			return
		}
		out[o.Stream] = append(out[o.Stream], strings.TrimSpace(string(o.Data)))
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("tasks did not finish")
	}
	sort.Strings(out["stdout"])
	if got := strings.Join(out["stdout"], ";"); got != "rank=0 size=3;rank=1 size=3;rank=2 size=3" {
		t.Fatalf("stdout %q", got)
	}
	if eofs != 6 {
		t.Fatalf("eofs %d", eofs)
	}
	if s.Status() != 2<<8 {
		t.Fatalf("status %d", s.Status())
	}
}

func TestSignalAndNotFound(t *testing.T) {
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`)
	js, _ := jobspec.FromCommand([]string{"sleep", "30"}, jobspec.CommandOptions{NTasks: 1})
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	p, _ := MakePlan(js, R, PlanOptions{})
	s, err := Start(Config{Jobspec: js, Plan: p})
	if err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGTERM) // Start returns with the task started
	<-s.Done()
	if s.Status() != (128+15)<<8 {
		t.Fatalf("status %d", s.Status())
	}
	js2, _ := jobspec.FromCommand([]string{"no-such-command-xyz"}, jobspec.CommandOptions{NTasks: 1})
	js2.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	var errText string
	s2, _ := Start(Config{Jobspec: js2, Plan: p, Output: func(o Output) {
		if o.Stream == "stderr" && !o.EOF {
			errText += string(o.Data)
		}
	}})
	<-s2.Done()
	if s2.Status() != 127<<8 || !strings.Contains(errText, "start failed: no-such-command-xyz: No such file or directory") {
		t.Fatalf("status %d err %q", s2.Status(), errText)
	}
}

// TestTaskEnvironment: the job's environment with Flux's variables set
// over it, and the submitter's KVS namespace dropped.
func TestTaskEnvironment(t *testing.T) {
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1","gpu":"0-1"}}]}}`)
	js, _ := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 2, GPUsPerTask: 1})
	js.SetEnvironment(map[string]string{"PATH": "/bin", "FLUX_KVS_NAMESPACE": "job-7", "FLUX_TASK_RANK": "9", "KEEP": "me"})
	p, err := MakePlan(js, R, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{JobID: jobid.ID(1234), Jobspec: js, Plan: p, URI: "local:///x", ExtraEnv: map[string]string{"FLUX_JOB_TMPDIR": "/t"}}
	env := map[string]string{}
	for _, kv := range c.Env(1, 1) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{"PATH": "/bin", "KEEP": "me", "FLUX_TASK_RANK": "1", "FLUX_TASK_LOCAL_ID": "1",
		"FLUX_JOB_SIZE": "2", "FLUX_JOB_NNODES": "1", "FLUX_URI": "local:///x", "FLUX_JOB_TMPDIR": "/t",
		"CUDA_VISIBLE_DEVICES": "0,1"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if v, ok := env["FLUX_KVS_NAMESPACE"]; ok {
		t.Errorf("FLUX_KVS_NAMESPACE=%q: the submitter's namespace reached the task", v)
	}
}

// TestSignaledJobOutputHeldByEscapee: a task that leaves a process of
// its own session holding its stdout does not keep a signaled job from
// ending: its output is read outputGrace after it exited, then the shell
// says on the task's stderr that it stopped reading. Without a signal,
// the end of its output is waited for (as flux-core's shell does).
func TestSignaledJobOutputHeldByEscapee(t *testing.T) {
	defer func(g time.Duration) { outputGrace = g }(outputGrace)
	outputGrace = 200 * time.Millisecond
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`)
	// "started" once the escapee leads a session of its own (field 6 of
	// /proc/PID/stat): a signal sent before then would reach it too
	script := `setsid sleep 30 & p=$!; while [ "$(cut -d' ' -f6 /proc/$p/stat)" != "$p" ]; do sleep 0.01; done; echo started $p; sleep 30`
	js, _ := jobspec.FromCommand([]string{"sh", "-c", script}, jobspec.CommandOptions{NTasks: 1})
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	p, _ := MakePlan(js, R, PlanOptions{})
	var mu sync.Mutex
	var out, errText string
	s, err := Start(Config{Jobspec: js, Plan: p, Output: func(o Output) {
		mu.Lock()
		defer mu.Unlock()
		if o.Stream == "stdout" {
			out += string(o.Data)
		} else {
			errText += string(o.Data)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		started := strings.Contains(out, "started")
		mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start")
		}
	}
	s.Signal(syscall.SIGTERM)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the signaled job did not end: its output, held by a process it left, was waited for")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(errText, "still hold its output") {
		t.Errorf("stderr %q: want a note that its output was cut", errText)
	}
	// the process the task left is the test's to end
	var pid int
	if _, err := fmt.Sscanf(out[strings.Index(out, "started"):], "started %d", &pid); err == nil && pid > 1 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
