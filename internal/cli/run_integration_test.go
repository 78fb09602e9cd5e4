package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// The execution path end to end: flux run / submit / attach / cancel /
// job kill against `flux start -s 4` with real processes. Every job's
// command carries a marker unique to the test (a sleep length such as
// 300.0417) so the test can check with pgrep that nothing it started is
// left running.

// marker returns a command-line token no other test uses.
func marker(t *testing.T) string {
	return fmt.Sprintf("%d.%04d", 300+time.Now().UnixNano()%600, os.Getpid()%10000)
}

// noLeftovers fails the test if a process whose command line holds
// marker is still running a few seconds from now.
func noLeftovers(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-af", marker).Output()
		var left []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" && !strings.Contains(line, "pgrep") {
				left = append(left, line)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fluxCmd returns a flux command against inst, not yet started.
func fluxCmd(inst *testinstance.Instance, args ...string) (*exec.Cmd, *testinstance.Buffer, *testinstance.Buffer) {
	cmd := exec.Command(inst.Bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLUX_URI=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "FLUX_URI="+inst.URI)
	var out, errb testinstance.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// waitOutput waits until a running flux command has printed want.
func waitOutput(t *testing.T, out *testinstance.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output: %q", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRunning waits until a job of the instance's owner is running and
// returns its id.
func waitRunning(t *testing.T, inst *testinstance.Instance) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := inst.Run(t, "jobs", "-n", "-f", "running", "-o", "{id.f58}")
		if id := strings.TrimSpace(r.Stdout); r.Code == 0 && id != "" && !strings.Contains(id, "\n") {
			// running in the job manager's eyes; wait for the shells too
			inst.MustRun(t, "job", "wait-event", "-t", "30", "-p", "guest.exec.eventlog", id, "shell.start")
			return id
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no job started running")
	return ""
}

func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not exit within %s", strings.Join(cmd.Args, " "), d)
	}
	return cmd.ProcessState.ExitCode()
}

func TestRunIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 4})

	t.Run("hostname-N4-n8", func(t *testing.T) {
		out := inst.MustRun(t, "run", "-N4", "-n8", "hostname")
		host, _ := os.Hostname()
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 8 {
			t.Fatalf("%d lines, want 8:\n%s", len(lines), out)
		}
		for _, l := range lines {
			if l != host {
				t.Fatalf("line %q, want %q", l, host)
			}
		}
	})

	t.Run("label-io-and-order", func(t *testing.T) {
		m := marker(t)
		out := inst.MustRun(t, "run", "-N4", "-n8", "--label-io", "sh", "-c",
			`for i in 1 2 3 4 5; do echo line$i; done; echo err >&2; : `+m)
		per := map[string][]string{}
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			rank, text, ok := strings.Cut(l, ": ")
			if !ok {
				t.Fatalf("unlabeled line %q in:\n%s", l, out)
			}
			per[rank] = append(per[rank], text)
		}
		if len(per) != 8 {
			t.Fatalf("output of %d tasks, want 8:\n%s", len(per), out)
		}
		for rank, lines := range per {
			if got := strings.Join(lines, ","); got != "line1,line2,line3,line4,line5" {
				t.Fatalf("task %s printed %s", rank, got)
			}
		}
		noLeftovers(t, m)
	})

	t.Run("stderr-label", func(t *testing.T) {
		r := inst.Run(t, "run", "-n2", "--label-io", "sh", "-c", "echo oops >&2")
		got := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		sort.Strings(got)
		if r.Code != 0 || strings.Join(got, ",") != "0: oops,1: oops" {
			t.Fatalf("code %d stderr %q", r.Code, r.Stderr)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		r := inst.RunInput(t, "hi\n", "run", "cat")
		if r.Code != 0 || r.Stdout != "hi\n" {
			t.Fatalf("echo hi | flux run cat: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
		r = inst.RunInput(t, "a\nb\n", "run", "-N2", "-n4", "--label-io", "cat")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		sort.Strings(lines)
		if r.Code != 0 || strings.Join(lines, ",") != "0: a,0: b,1: a,1: b,2: a,2: b,3: a,3: b" {
			t.Fatalf("stdin to 4 tasks on 2 nodes: code %d stdout %q", r.Code, r.Stdout)
		}
	})

	t.Run("input-file-and-ranks", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := inst.RunInput(t, "ignored\n", "run", "--cwd="+dir, "--input=in.txt", "-n2", "cat")
		if r.Code != 0 || r.Stdout != "from file\nfrom file\n" {
			t.Fatalf("--input=FILE: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
		r = inst.RunInput(t, "only one\n", "run", "--input=1", "-N2", "-n3", "--label-io", "cat")
		if r.Code != 0 || r.Stdout != "1: only one\n" {
			t.Fatalf("--input=1: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("binary-io", func(t *testing.T) {
		in := "\xff\xfe\x00binary\n"
		r := inst.RunInput(t, in, "run", "-N2", "-n2", "--input=1", "cat")
		if r.Code != 0 || r.Stdout != in {
			t.Fatalf("code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("exit-codes", func(t *testing.T) {
		tests := []struct {
			args []string
			code int
		}{
			{[]string{"true"}, 0},
			{[]string{"false"}, 1},
			{[]string{"-N2", "-n4", "sh", "-c", "exit $FLUX_TASK_RANK"}, 3},
			{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
			{[]string{"-n2", "sh", "-c", `test "$FLUX_TASK_RANK" = 1 && kill -TERM $$; exit 2`}, 128 + 15},
			{[]string{"no-such-command-xyz"}, 127},
		}
		for _, tc := range tests {
			r := inst.Run(t, append([]string{"run"}, tc.args...)...)
			if r.Code != tc.code {
				t.Errorf("flux run %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), r.Code, tc.code, r.Stderr)
			}
		}
	})

	t.Run("eventlogs", func(t *testing.T) {
		inst.MustRun(t, "run", "-n2", "echo", "hi")
		id := strings.TrimSpace(inst.MustRun(t, "job", "last"))
		exec := inst.MustRun(t, "job", "eventlog", "-p", "guest.exec.eventlog", id)
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(exec), "\n") {
			f := strings.Fields(l)
			names = append(names, f[1])
		}
		want := "init starting shell.init shell.start shell.task-exit shell.task-exit shell-exit complete done"
		if strings.Join(names, " ") != want {
			t.Fatalf("exec eventlog:\n%s\nwant %s", exec, want)
		}
		out := inst.MustRun(t, "job", "eventlog", "-p", "guest.output", id)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(lines[0], "header version=1") || !strings.Contains(lines[0], `count={"stdout":2,"stderr":2}`) {
			t.Fatalf("output header: %s", lines[0])
		}
		if n := strings.Count(out, "eof=true"); n != 4 {
			t.Fatalf("%d eof events, want 4:\n%s", n, out)
		}
		if n := strings.Count(out, `data="hi\n"`); n != 2 {
			t.Fatalf("%d data events, want 2:\n%s", n, out)
		}
	})

	t.Run("output-file-template", func(t *testing.T) {
		dir := t.TempDir()
		r := inst.Run(t, "run", "--cwd="+dir, "--output=flux-{{id}}.out", "-N2", "-n2", "--label-io", "sh", "-c", "echo one; echo two")
		if r.Code != 0 || r.Stdout != "" {
			t.Fatalf("code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
		id := strings.TrimSpace(inst.MustRun(t, "job", "last"))
		b, err := os.ReadFile(filepath.Join(dir, "flux-"+id+".out"))
		if err != nil {
			entries, _ := os.ReadDir(dir)
			t.Fatalf("%v (dir holds %v)", err, entries)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		sort.Strings(lines)
		if strings.Join(lines, ",") != "0: one,0: two,1: one,1: two" {
			t.Fatalf("output file:\n%s", b)
		}
		// dec encoding; a second run truncates
		inst.MustRun(t, "run", "--cwd="+dir, "--output=out.{{id.dec}}", "echo", "x")
		id2 := strings.TrimSpace(inst.MustRun(t, "job", "id", "--to=dec", strings.TrimSpace(inst.MustRun(t, "job", "last"))))
		if b, err := os.ReadFile(filepath.Join(dir, "out."+id2)); err != nil || string(b) != "x\n" {
			t.Fatalf("out.%s: %q %v", id2, b, err)
		}
	})

	t.Run("job-kill-USR1", func(t *testing.T) {
		m := marker(t)
		cmd, out, _ := fluxCmd(inst, "run", "sh", "-c", `trap "echo got USR1; exit 0" USR1; echo ready; sleep `+m+` & wait`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		id := waitRunning(t, inst)
		waitOutput(t, out, "ready") // the trap is set
		inst.MustRun(t, "job", "kill", "-s", "USR1", id)
		if code := waitExit(t, cmd, 30*time.Second); code != 0 || !strings.Contains(out.String(), "got USR1") {
			t.Fatalf("exit %d output %q", code, out.String())
		}
		noLeftovers(t, m)
	})

	t.Run("cancel-running", func(t *testing.T) {
		m := marker(t)
		id := strings.TrimSpace(inst.MustRun(t, "submit", "-N4", "-n4", "sleep", m))
		inst.MustRun(t, "job", "wait-event", "-t", "30", "-p", "guest.exec.eventlog", id, "shell.start")
		if out, _ := exec.Command("pgrep", "-f", "sleep "+m).Output(); len(strings.Fields(string(out))) != 4 {
			t.Fatalf("want 4 tasks running, pgrep says %q", out)
		}
		inst.MustRun(t, "cancel", id)
		inst.MustRun(t, "job", "wait-event", "-t", "30", id, "clean")
		if ev := inst.MustRun(t, "job", "eventlog", id); !strings.Contains(ev, `exception type="cancel"`) {
			t.Fatalf("eventlog:\n%s", ev)
		}
		noLeftovers(t, m)
	})

	t.Run("time-limit", func(t *testing.T) {
		m := marker(t)
		r := inst.Run(t, "run", "-t", "1s", "sleep", m)
		if r.Code != 128+15 && r.Code != 128+14 || !strings.Contains(r.Stderr, "type=timeout") {
			ev := inst.Run(t, "job", "eventlog", strings.TrimSpace(inst.MustRun(t, "job", "last")))
			t.Fatalf("code %d stderr %q\neventlog:\n%s", r.Code, r.Stderr, ev.Stdout)
		}
		noLeftovers(t, m)
	})

	t.Run("signal-before-time-limit", func(t *testing.T) {
		m := marker(t)
		r := inst.Run(t, "run", "-t", "2s", "--signal=USR1@1s", "sh", "-c",
			`trap "echo got USR1; exit 0" USR1; sleep `+m+` & wait`)
		if r.Code != 0 || !strings.Contains(r.Stdout, "got USR1") {
			t.Fatalf("code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
		noLeftovers(t, m)
	})

	t.Run("ctrl-c", func(t *testing.T) {
		// one SIGINT reaches the tasks
		m := marker(t)
		cmd, _, errb := fluxCmd(inst, "run", "sleep", m)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, inst)
		cmd.Process.Signal(syscall.SIGINT)
		if code := waitExit(t, cmd, 30*time.Second); code != 128+2 {
			t.Fatalf("after one ctrl-C: exit %d, stderr %q", code, errb.String())
		}
		noLeftovers(t, m)

		// a job that handles the SIGINT ends with its own exit code
		m = marker(t) + "2"
		cmd, out0, errb0 := fluxCmd(inst, "run", "sh", "-c", `M=`+m+`; trap "echo got INT; exit 7" INT; echo ready; while :; do sleep 0.05; done`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitOutput(t, out0, "ready")
		cmd.Process.Signal(syscall.SIGINT)
		if code := waitExit(t, cmd, 30*time.Second); code != 7 {
			t.Fatalf("a job exiting 7 on ctrl-C: flux run exit %d, stderr %q", code, errb0.String())
		}
		noLeftovers(t, m)

		// a second one within 2 s cancels a job that ignores the first
		m = marker(t) + "1"
		cmd, out, errb := fluxCmd(inst, "run", "sh", "-c", `trap "echo got INT" INT; echo ready; while :; do sleep `+m+` & wait; done`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitOutput(t, out, "ready")
		cmd.Process.Signal(syscall.SIGINT)
		waitOutput(t, out, "got INT")
		cmd.Process.Signal(syscall.SIGINT)
		code := waitExit(t, cmd, 30*time.Second)
		if code == 0 || !strings.Contains(errb.String(), "type=cancel") || !strings.Contains(out.String(), "got INT") {
			t.Fatalf("after two ctrl-Cs: exit %d stdout %q stderr %q", code, out.String(), errb.String())
		}
		noLeftovers(t, m)
	})

	t.Run("sigterm", func(t *testing.T) {
		// SIGTERM to flux run reaches the tasks (as srun forwards it):
		// flux run ends with their status and the job is not left running
		m := marker(t)
		cmd, _, errb := fluxCmd(inst, "run", "sleep", m)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, inst)
		cmd.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, cmd, 30*time.Second); code != 128+15 {
			t.Fatalf("after SIGTERM: exit %d, stderr %q", code, errb.String())
		}
		noLeftovers(t, m)

		// a second SIGTERM cancels a job whose tasks ignore the first
		m = marker(t) + "3"
		cmd, out, errb := fluxCmd(inst, "run", "sh", "-c", `trap "echo got TERM" TERM; echo ready; while :; do sleep `+m+` & wait; done`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitOutput(t, out, "ready")
		cmd.Process.Signal(syscall.SIGTERM)
		waitOutput(t, out, "got TERM")
		cmd.Process.Signal(syscall.SIGTERM)
		code := waitExit(t, cmd, 30*time.Second)
		if code == 0 || !strings.Contains(errb.String(), "type=cancel") {
			t.Fatalf("after two SIGTERMs: exit %d stdout %q stderr %q", code, out.String(), errb.String())
		}
		noLeftovers(t, m)
	})

	t.Run("no-leftovers", func(t *testing.T) {
		// the instance has nothing running once all the above are done
		r := inst.MustRun(t, "jobs", "-n", "-o", "{id.f58}")
		if strings.TrimSpace(r) != "" {
			t.Fatalf("active jobs left: %q", r)
		}
	})
}

// TestRunBrokerLossIntegration kills a broker (kill -9) in the middle of a
// multi-node job: the job gets a node-failure exception and ends.
func TestRunBrokerLossIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 4})
	h := inst.Handle(t)
	m := marker(t)
	id := strings.TrimSpace(inst.MustRun(t, "submit", "-N4", "-n4", "sleep", m))
	inst.MustRun(t, "job", "wait-event", "-t", "30", "-p", "guest.exec.eventlog", id, "shell.start")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", 3, map[string]any{"name": "broker.pid"}, &resp); err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(resp.Value, &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := inst.Run(t, "job", "wait-event", "-t", "60", id, "clean"); r.Code != 0 {
		ev := inst.Run(t, "job", "eventlog", id)
		t.Fatalf("job did not end: %s\n%s", r.Stderr, ev.Stdout)
	}
	ev := inst.MustRun(t, "job", "eventlog", id)
	if !strings.Contains(ev, `exception type="node-failure"`) {
		t.Fatalf("no node-failure exception:\n%s", ev)
	}
	noLeftovers(t, m)
	// the rest of the instance still runs jobs
	if out := inst.MustRun(t, "run", "-N3", "-n3", "echo", "ok"); strings.Count(out, "ok") != 3 {
		t.Fatalf("after the loss: %q", out)
	}
}
