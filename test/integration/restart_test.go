package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Jobs outlive their brokers (seed 003: restart without killing jobs).
// Each test runs an instance of 4 brokers with distinct host names and
// 16 cores each, with a statedir, and checks at its end that no job
// shell of the instance is left running.

// restartable starts a 4-broker instance that keeps its state in state.
func restartable(t *testing.T, state string, attrs ...string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	o := testinstance.Options{Size: 4, Attrs: map[string]string{
		"statedir":                    state,
		"resource.config":             `[{"hosts":"n[0-3]","cores":"0-15"}]`,
		"resource.noverify":           "true", // more cores than the host has
		"job-exec.reattach-timeout":   "60s",
		"job-shell.reconnect-timeout": "2m",
	}, Args: []string{"--test-hosts=n[0-3]"}}
	for _, kv := range attrs {
		k, v, _ := strings.Cut(kv, "=")
		o.Attrs[k] = v
	}
	return &env{t: t, inst: testinstance.Start(t, o)}
}

// shellPIDs lists the job shells running for the instance of statedir.
func shellPIDs(state string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "shell" && strings.Contains(string(b), "\x00"+filepath.Join(state, "shells")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// noShellsLeft fails the test if job shells of the instance still run
// once it has stopped (they exit once idle and without a broker), and
// kills them.
func noShellsLeft(t *testing.T, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(shellPIDs(state)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if pids := shellPIDs(state); len(pids) > 0 {
		t.Errorf("job shells still running after the instance stopped: %v", pids)
		for _, pid := range pids {
			if logs, _ := filepath.Glob(filepath.Join(state, "shells", "u*", "shells.log")); len(logs) > 0 {
				b, _ := os.ReadFile(logs[0])
				if len(b) > 2000 {
					b = b[len(b)-2000:]
				}
				t.Logf("pid %d; %s:\n%s", pid, logs[0], b)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killShells kills the instance's shells on exit (a test that fails
// midway leaves none behind).
func killShells(t *testing.T, state string) {
	t.Cleanup(func() {
		for _, pid := range shellPIDs(state) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// gate is a file a test's jobs wait for: their tasks go on once the
// test opens it, so what a job does before and after does not race the
// test on a loaded machine (a task gives up after 300 s, a hang guard).
// Its directory is readable by guests; tasks that passed it leave a
// done.PID file beside it.
type gate string

func newGate(t *testing.T) gate {
	t.Helper()
	dir, err := os.MkdirTemp("", "fluxgo-gate-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return gate(filepath.Join(dir, "open"))
}

// script is the shell text that waits for the gate.
func (g gate) script() string {
	return fmt.Sprintf("i=0; while [ ! -e %s ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done", g)
}

// done is the shell text a task runs once past the gate.
func (g gate) done() string { return fmt.Sprintf("touch %s/done.$$", filepath.Dir(string(g))) }

func (g gate) open(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(string(g), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// passed is how many tasks have gone past the gate.
func (g gate) passed() int {
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(string(g)), "done.*"))
	return len(m)
}

// printer submits a 2-node job that prints, waits for g, prints again
// and exits with code.
func (e *env) printer(g gate, code int) jobid.ID {
	return e.submit("-N2", "-n2", "sh", "-c",
		fmt.Sprintf("echo before $FLUX_TASK_RANK; %s; echo after $FLUX_TASK_RANK; %s; exit %d", g.script(), g.done(), code))
}

// checkPrinter checks a printer job's end: its exit code and all its
// output.
func (e *env) checkPrinter(id jobid.ID, code int) {
	e.t.Helper()
	r := e.flux("job", "attach", id.String())
	if r.Code != code {
		e.t.Errorf("job %s: flux job attach exited %d, want %d (stderr %q)", id, r.Code, code, r.Stderr)
	}
	for _, want := range []string{"before 0", "before 1", "after 0", "after 1"} {
		if !strings.Contains(r.Stdout, want+"\n") {
			e.t.Errorf("job %s: output %q lacks %q", id, r.Stdout, want)
		}
	}
	if got := e.field(id, "{returncode} {exception.type}"); got != strconv.Itoa(code) {
		e.t.Errorf("job %s: returncode and exception %q, want %d and none", id, got, code)
	}
}

// checkShellUsers checks how many of the instance's job shells run as
// each user (those with a job: an idle spare of the owner's is not
// counted).
func checkShellUsers(t *testing.T, state string, want map[uint32]int) {
	t.Helper()
	parents := map[int]bool{} // processes with a child
	for _, pid := range procfs.PIDs() {
		if f, err := procfs.Stat(pid); err == nil {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				parents[ppid] = true
			}
		}
	}
	got := map[uint32]int{}
	for _, pid := range shellPIDs(state) {
		if uid, err := procfs.UID(pid); err == nil && parents[pid] {
			got[uid]++
		}
	}
	for uid, n := range want {
		if got[uid] != n {
			t.Errorf("job shells running jobs by uid: %v, want %v", got, want)
			return
		}
	}
}

// guestShellScript: as the guest, ask the job-shell module for what a
// guest's shell may not do: write another user's job's output, a key
// that is not an output eventlog, a symlink; say hello as a shell that
// is not the guest's; kill a job.
const guestShellScript = `
import flux, base64, json
from flux.job import JobID
h = flux.Flux()
uid, mine, theirs = %d, JobID("%s"), JobID("%s")
def key(id):
    return "job." + id.dothex + ".guest.output"
def val(s):
    return {"ver": 1, "type": "val", "data": base64.b64encode(s.encode()).decode()}
tries = {
    "commit-other-job": ("job-shell.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": key(mine), "flags": 0, "dirent": val("{}")}]}),
    "commit-other-key": ("job-shell.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": "resource.R", "flags": 0, "dirent": val("{}")}]}),
    "commit-symlink": ("job-shell.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": key(theirs), "flags": 0, "dirent": {"ver": 1, "type": "symlink", "data": {"target": "resource"}}}]}),
    # a member the check and the KVS would read differently: "OPS" is
    # "ops" to a case-insensitive decoder
    "commit-case": ("job-shell.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": "resource.R", "flags": 0, "dirent": val("{}")}], "OPS": []}),
    "hello-lying": ("job-shell.hello", {"pid": 1, "userid": uid, "service": "%%d-shell-p1" %% uid,
        "jobs": [int(mine)], "ended": []}),
    "kill": ("job-shell.kill", {"id": int(theirs), "signum": 9}),
}
for name, (topic, payload) in tries.items():
    try:
        h.rpc(topic, payload, nodeid=0).get()
        print(name, "accepted")
    except OSError as e:
        print(name, "refused", e.errno)
# a process of the guest's that passes for a shell of its own (its
# service, its pid) and claims the owner's job: the claim is checked
# against the job's user, and its writes refused
import os
me = os.getpid()
h.service_register("%%d-shell-p%%d" %% (uid, me)).get()
h.rpc("job-shell.hello", {"pid": me, "userid": uid, "service": "%%d-shell-p%%d" %% (uid, me),
    "jobs": [int(mine)], "ended": []}, nodeid=0).get()
try:
    h.rpc("job-shell.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": key(mine), "flags": 32, "dirent": val("{}\n")}]}, nodeid=0).get()
    print("commit-claimed accepted")
except OSError as e:
    print("commit-claimed refused", e.errno)
`

// TestRestartAfterCrash: kill -9 of every broker, then flux start from the
// same statedir. Twenty running 2-node jobs that print before and after a
// sleep go on: those that end while no broker is up and those that end
// after the restart all end with their own exit codes and whole output,
// and the exec eventlog records the reattach. Pending jobs run after.
func TestRestartAfterCrash(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state)
	type job struct {
		id   jobid.ID
		code int
	}
	var jobs []job
	short, long := newGate(t), newGate(t)
	for i := 0; i < 20; i++ {
		g := short // ends while no broker is up
		if i%2 == 1 {
			g = long // ends after the restart
		}
		jobs = append(jobs, job{e.printer(g, i%4), i % 4})
	}
	pending := e.submit("-N4", "--exclusive", "true")
	for _, j := range jobs {
		e.waitEvent(j.id, "start")
	}
	// their first lines are out (each of the 2 tasks prints one)
	for _, j := range jobs {
		e.waitOutput(j.id, 2)
	}
	e.inst.Kill()
	if n := len(shellPIDs(state)); n == 0 {
		t.Fatal("no job shell outlived the brokers")
	}
	// the short jobs end while no broker is up
	short.open(t)
	e.waitFor("the short jobs' 20 tasks to end", func() bool { return short.passed() == 20 })
	longID := jobs[1].id

	e2 := restartable(t, state)
	long.open(t)
	for _, j := range jobs {
		e2.checkPrinter(j.id, j.code)
	}
	exec := e2.must("job", "eventlog", "-p", "exec", longID.String())
	if !strings.Contains(exec, "reattach-start") || !strings.Contains(exec, "reattach-finish") {
		t.Errorf("exec eventlog of a reattached job:\n%s", exec)
	}
	if got := e2.result(pending); got != "COMPLETED" {
		t.Errorf("the job pending at the crash: %s", got)
	}
	fresh := e2.submit("-N4", "hostname")
	if got := e2.result(fresh); got != "COMPLETED" {
		t.Errorf("a job after the restart: %s", got)
	}
	e2.inst.Stop()
	noShellsLeft(t, state)
}

// TestCleanStopReleasesShells: a clean stop of an instance with a
// statedir lets its idle shells go, those that just ran a job included
// (the exit request was sent as the broker closed and could be lost: the
// shell, holding the ended job's record, then waited a minute for a
// broker).
func TestCleanStopReleasesShells(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state)
	e.must("run", "-N4", "true")
	e.inst.Stop()
	noShellsLeft(t, state)
}

// TestShutdownKeepsJobs: flux shutdown of an instance with a statedir
// leaves its running jobs running and says so; flux start from the
// statedir takes them back. flux shutdown --cancel-jobs ends them.
func TestShutdownKeepsJobs(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state)
	g := newGate(t)
	a, b := e.printer(g, 3), e.printer(g, 0)
	e.waitEvent(a, "start")
	e.waitEvent(b, "start")
	r := e.flux("shutdown")
	if r.Code != 0 || !strings.Contains(r.Stderr, "2 running jobs keep running") {
		t.Errorf("flux shutdown: exit %d, stderr %q: want it to say the 2 running jobs keep running", r.Code, r.Stderr)
	}
	<-e.inst.Done()
	if len(shellPIDs(state)) == 0 {
		t.Fatal("no job shell outlived the shutdown")
	}
	e2 := restartable(t, state)
	g.open(t)
	e2.checkPrinter(a, 3)
	e2.checkPrinter(b, 0)

	c := e2.printer(newGate(t), 0) // never opened: canceled
	e2.waitEvent(c, "start")
	r = e2.flux("shutdown", "--cancel-jobs")
	if r.Code != 0 || !strings.Contains(r.Stderr, "canceled 1 running jobs") {
		t.Errorf("flux shutdown --cancel-jobs: exit %d, stderr %q", r.Code, r.Stderr)
	}
	<-e2.inst.Done()
	noShellsLeft(t, state)
	e3 := restartable(t, state)
	if got := e3.field(c, "{result}"); got != "CANCELED" {
		t.Errorf("the job canceled at shutdown: %s", got)
	}
	e3.inst.Stop()
	noShellsLeft(t, state)
}

// brokerProc finds the process of broker rank and its command line.
func (e *env) brokerProc(rank int) (int, []string) {
	e.t.Helper()
	h := e.inst.Handle(e.t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", uint32(rank), map[string]any{"name": "broker.pid"}, &resp); err != nil {
		e.t.Fatalf("broker.pid of rank %d: %v", rank, err)
	}
	pid, err := strconv.Atoi(resp.Value)
	if err != nil {
		e.t.Fatalf("broker.pid of rank %d: %q", rank, resp.Value)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		e.t.Fatal(err)
	}
	return pid, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// restartBroker starts a broker again with its command line, for the
// rest of the test.
func restartBroker(t *testing.T, argv []string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// TestLeafBrokerRestart: kill -9 of one leaf broker and its restart
// alone. Its jobs continue (output and exit codes whole); jobs on other
// nodes are untouched; a job canceled while the broker is down ends
// once it is back.
func TestLeafBrokerRestart(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state)
	// rank 3 (n3) is a leaf
	on3 := e.submit("--requires=host:n3", "-N1", "sh", "-c", "echo before; sleep 3; echo after; exit 5")
	across := e.submit("--requires=host:n[2-3]", "-N2", "-n2", "sh", "-c",
		"echo before $FLUX_TASK_RANK; sleep 3; echo after $FLUX_TASK_RANK; exit 6")
	elsewhere := e.submit("--requires=host:n[0-1]", "-N2", "-n2", "sh", "-c",
		"echo before $FLUX_TASK_RANK; sleep 3; echo after $FLUX_TASK_RANK")
	victim := e.submit("--requires=host:n3", "-N1", "sleep", "300")
	for _, id := range []jobid.ID{on3, across, elsewhere, victim} {
		e.waitEvent(id, "start")
	}
	pid, argv := e.brokerProc(3)
	syscall.Kill(pid, syscall.SIGKILL)
	e.waitFor("rank 3 to be lost", func() bool {
		return strings.Contains(e.must("overlay", "status", "--no-pretty", "--summary"), "lost") ||
			e.flux("exec", "-r", "3", "true").Code != 0
	})
	e.must("cancel", victim.String())
	e.waitEvent(victim, "exception") // the cancel is in before rank 3 is back
	restartBroker(t, argv)

	r := e.flux("job", "attach", on3.String())
	if r.Code != 5 || r.Stdout != "before\nafter\n" {
		t.Errorf("job on the restarted node: exit %d, output %q", r.Code, r.Stdout)
	}
	r = e.flux("job", "attach", across.String())
	if r.Code != 6 || !strings.Contains(r.Stdout, "after 1") || !strings.Contains(r.Stdout, "after 0") {
		t.Errorf("job across the restarted node: exit %d, output %q", r.Code, r.Stdout)
	}
	r = e.flux("job", "attach", elsewhere.String())
	if r.Code != 0 || !strings.Contains(r.Stdout, "after 1") {
		t.Errorf("job on other nodes: exit %d, output %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if got := e.result(victim); got != "CANCELED" {
		t.Errorf("job canceled while its broker was down: %s", got)
	}
	e.inst.Stop()
	noShellsLeft(t, state)
}

// TestLostNodeEndsJob: a job whose node never comes back ends with a
// node-failure exception naming the node once job-exec.reattach-timeout
// has passed, and its resources are freed; one whose node comes back
// without its shell (the node rebooted) ends at once.
func TestLostNodeEndsJob(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state, "job-exec.reattach-timeout=3s")
	gone := e.submit("--requires=host:n3", "-N1", "sleep", "300")
	rebooted := e.submit("--requires=host:n2", "-N1", "sleep", "300")
	e.waitEvent(gone, "start")
	e.waitEvent(rebooted, "start")
	pid3, _ := e.brokerProc(3)
	pid2, argv2 := e.brokerProc(2)
	// a node rebooting takes its shells with it
	syscall.Kill(pid2, syscall.SIGKILL)
	syscall.Kill(pid3, syscall.SIGKILL)
	for _, pid := range shellPIDs(state) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(b), filepath.Join(state, "shells", "2")) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	e.waitFor("rank 2's shells to be gone", func() bool {
		for _, pid := range shellPIDs(state) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if strings.Contains(string(b), filepath.Join(state, "shells", "2")) && !strings.Contains(string(st), ") Z") {
				return false
			}
		}
		return true
	})
	restartBroker(t, argv2)
	e.waitEvent(rebooted, "clean")
	if got := e.field(rebooted, "{result} {exception.type} {exception.note}"); !strings.Contains(got, "node-failure") || !strings.Contains(got, "n2") {
		t.Errorf("job whose node came back without its shell: %q", got)
	}
	e.waitEvent(gone, "clean")
	if got := e.field(gone, "{result} {exception.type} {exception.note}"); !strings.Contains(got, "node-failure") || !strings.Contains(got, "n3") {
		t.Errorf("job whose node never came back: %q", got)
	}
	if got := e.must("resource", "list", "-s", "allocated", "-n", "-o", "{nnodes}"); got != "0" {
		t.Errorf("nodes still allocated after the jobs ended: %s", got)
	}
	e.inst.Stop()
	// the shell on n3 outlives its broker: it gives up once the instance
	// is gone for good
	for _, pid := range shellPIDs(state) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestRestartMultiUser: as root, the jobs of two users (root and a
// guest) survive kill -9 of every broker and a restart; each task runs
// as its user throughout, and each user sees their own job end with its
// exit code and output.
func TestRestartMultiUser(t *testing.T) {
	state := t.TempDir()
	killShells(t, state)
	e := restartable(t, state)
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run commands as user nobody")
	}
	g := newGate(t)
	script := "id -u; " + g.script() + "; id -u; " + g.done() + "; exit %d"
	mine := e.submit("-N2", "-n2", "sh", "-c", fmt.Sprintf(script, 3))
	r := e.asGuest("submit", "-N2", "-n2", "sh", "-c", fmt.Sprintf(script, 4))
	if r.Code != 0 {
		t.Fatalf("guest submit: %+v", r)
	}
	theirs := jobid.MustParse(strings.TrimSpace(r.Stdout))
	e.waitEvent(mine, "start")
	e.waitEvent(theirs, "start")
	// each job's shells run as its user (2 nodes each)
	checkShellUsers(t, state, map[uint32]int{0: 2, guestUID: 2})
	// the guest's shells do what they may not through the job-shell
	// module, which checks what a guest asks of it
	out, err := guestPython(e, fmt.Sprintf(guestShellScript, guestUID, mine.String(), theirs.String()))
	if err != nil {
		t.Fatalf("guest script: %v\n%s", err, out)
	}
	for _, want := range []string{
		"commit-other-job refused 1", "commit-other-key refused 1", "commit-symlink refused 1",
		"commit-case refused 71", "hello-lying refused 1", "kill refused 1", "commit-claimed refused 1"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("guest script: want %q in:\n%s", want, out)
		}
	}
	// their first lines are out
	e.waitOutput(mine, 2)
	e.waitOutput(theirs, 2)
	e.inst.Kill()
	// both jobs end while no broker is up
	g.open(t)
	e.waitFor("the jobs' 4 tasks to end", func() bool { return g.passed() == 4 })
	e2 := restartable(t, state)
	r = e2.flux("job", "attach", mine.String())
	if r.Code != 3 || r.Stdout != "0\n0\n0\n0\n" {
		t.Errorf("root's job: exit %d, output %q", r.Code, r.Stdout)
	}
	r = e2.asGuest("job", "attach", theirs.String())
	want := strings.Repeat(strconv.Itoa(guestUID)+"\n", 4)
	if r.Code != 4 || r.Stdout != want {
		t.Errorf("the guest's job: exit %d, output %q, want %q", r.Code, r.Stdout, want)
	}
	// the output the guest's shell wrote while no broker was up went
	// through the module again: it is in the eventlog
	if ev := e2.must("job", "eventlog", "-p", "output", theirs.String()); strings.Count(ev, "data") < 4 {
		t.Errorf("the guest's output eventlog:\n%s", ev)
	}
	e2.inst.Stop()
	noShellsLeft(t, state)
}
