package jobmanager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// startWithStatedir starts a one-broker instance keeping its state in a
// directory of the test's, and returns it with the attributes that start
// another instance on the same state.
func startWithStatedir(t *testing.T) (*testinstance.Instance, map[string]string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real instances")
	}
	attrs := map[string]string{"statedir": t.TempDir()}
	return testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs}), attrs
}

// TestRestartRestoresJobs stops an instance with a finished, a held and a
// running job and starts it again on the same statedir: the finished job
// is still there, the held one still pending, and the one that was
// running ends with a recorded exception instead of vanishing.
func TestRestartRestoresJobs(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	done := strings.TrimSpace(inst.MustRun(t, "submit", "--wait", "--setattr=system.exec.test.run_duration=0.01s", "true"))
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	running := strings.TrimSpace(inst.MustRun(t, "submit", "--setattr=system.exec.test.run_duration=100s", "sleep"))
	inst.MustRun(t, "job", "wait-event", "-t", "10", running, "start")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("first instance exited %d: %s", code, inst.Stderr())
	}

	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	inst2.MustRun(t, "job", "wait-event", "-t", "10", running, "clean")
	out := inst2.MustRun(t, "jobs", "-a", "-n", "-o", "{id.f58} {state} {result}")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			got[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if got[done] != "INACTIVE COMPLETED" {
		t.Errorf("finished job: %q", got[done])
	}
	if !strings.HasPrefix(got[held], "SCHED") { // via flux-restart and a new priority
		t.Errorf("held job: %q", got[held])
	}
	// the shutdown canceled it and waited for it to end
	if got[running] != "INACTIVE CANCELED" {
		t.Errorf("job running at shutdown: %q", got[running])
	}
	log := inst2.MustRun(t, "job", "eventlog", running)
	if !strings.Contains(log, "the instance is shutting down") {
		t.Errorf("eventlog shows no shutdown cancel:\n%s", log)
	}
	// the held job can still be released and run
	inst2.MustRun(t, "job", "urgency", held, "default")
	inst2.MustRun(t, "job", "wait-event", "-t", "10", held, "clean")
}

// TestSubmitOfRestoredJob covers a job manager that starts between
// job-ingest's KVS commit and its job-manager.submit: the job is restored
// from the KVS, and the submit that follows is accepted, not refused as a
// duplicate, and the job runs once.
func TestSubmitOfRestoredJob(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	spec := strings.TrimSpace(inst.MustRun(t, "submit", "--dry-run", "--setattr=system.exec.test.run_duration=0.01s", "true"))
	gen, err := jobid.NewGenerator(1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := gen.Next()
	dothex, _ := id.Encode("dothex")
	key := "job." + dothex
	now := float64(time.Now().UnixNano()) / 1e9
	submit := fmt.Sprintf(`{"timestamp":%.6f,"name":"submit","context":{"userid":%d,"urgency":16,"flags":0,"version":1}}`, now, os.Getuid())
	// what job-ingest commits before it tells the job manager
	inst.MustRun(t, "kvs", "put", "-r", key+".jobspec="+spec)
	inst.MustRun(t, "kvs", "put", "-r", key+".eventlog="+submit+"\n")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("first instance exited %d: %s", code, inst.Stderr())
	}
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	h := inst2.Handle(t)
	req := map[string]any{"jobs": []any{map[string]any{
		"id": id, "userid": os.Getuid(), "urgency": 16, "t_submit": now, "flags": 0, "jobspec": json.RawMessage(spec),
	}}}
	var resp struct {
		Errors [][2]any `json:"errors"`
	}
	if err := h.Call(context.Background(), "job-manager.submit", flux.NodeidAny, req, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Errors) > 0 {
		t.Fatalf("submit of a restored job refused: %v", resp.Errors)
	}
	f58, _ := id.Encode("f58")
	inst2.MustRun(t, "job", "wait-event", "-t", "10", f58, "clean")
	log := inst2.MustRun(t, "job", "eventlog", f58)
	if n := strings.Count(log, " start"); n != 1 {
		t.Fatalf("job started %d times:\n%s", n, log)
	}
}

// TestRestartKeepsQueueState: flux queue disable/stop survive a restart;
// a change made with --nocheckpoint does not.
func TestRestartKeepsQueueState(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	inst.MustRun(t, "queue", "disable", "-m", "maintenance")
	inst.MustRun(t, "queue", "stop", "--nocheckpoint", "-m", "for now")
	held := strings.TrimSpace(inst.MustRun(t, "queue", "status"))
	if held != "Job submission is disabled: maintenance\nScheduling is stopped: for now" {
		t.Fatalf("status before restart: %q", held)
	}
	if code := inst.Stop(); code != 0 {
		t.Fatalf("first instance exited %d: %s", code, inst.Stderr())
	}
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := strings.TrimSpace(inst2.MustRun(t, "queue", "status"))
		if got == "Job submission is disabled: maintenance\nScheduling is started" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after restart: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := inst2.Run(t, "submit", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "job submission is disabled: maintenance") {
		t.Fatalf("submit to the disabled queue after restart: %d %q", r.Code, r.Stderr)
	}
}

// TestCrashKeepsAcceptedJobs kills the broker (SIGKILL) while jobs are
// being submitted and run, then starts the instance again on its
// statedir: every job whose ID the submitter was given is there and ends
// in a recorded state (the ones running at the crash with a restart
// exception), and the scheduler is not asked to free allocations it
// never heard of.
func TestCrashKeepsAcceptedJobs(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	pid, err := inst.Handle(t).Attr(context.Background(), "broker.pid")
	if err != nil {
		t.Fatal(err)
	}
	var ids testinstance.Buffer
	sub := exec.Command(inst.Bin, "submit", "--cc=1-3000", "--setattr=system.exec.test.run_duration=0.01s", "true")
	sub.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
	sub.Stdout = &ids
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(ids.String(), "\n") < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 100 jobs accepted in 30 s: %q", ids.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, _ := strconv.Atoi(pid)
	syscall.Kill(n, syscall.SIGKILL)
	<-inst.Done()
	sub.Wait()
	acked := strings.Fields(ids.String())

	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	deadline = time.Now().Add(60 * time.Second)
	for strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{id}")) != "" {
		if time.Now().After(deadline) {
			t.Fatal("jobs still active 60 s after the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := inst2.MustRun(t, "jobs", "-a", "-c", "0", "-n", "-o", "{id.f58} {state}")
	state := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			state[f[0]] = f[1]
		}
	}
	for _, id := range acked {
		if state[id] != "INACTIVE" {
			t.Errorf("job %s, accepted before the crash: state %q after the restart", id, state[id])
		}
	}
	if log := inst2.MustRun(t, "dmesg"); strings.Contains(log, "sched-simple.err") {
		t.Errorf("scheduler errors after the restart:\n%s", log)
	}
	t.Logf("%d jobs accepted before the crash, %d in the instance after it", len(acked), len(state))
}

// TestCrashAfterStartAndCancel kills the broker (SIGKILL) right after a
// job started and right after a cancel was answered: restarted on its
// statedir, the instance neither runs the started job again nor forgets
// the cancel (both were made durable before they happened or were
// answered), and the job that was running (its shell outlived the
// broker) is taken back running and ends, canceled, with RFC 21's events
// in order.
func TestCrashAfterStartAndCancel(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	pid, err := inst.Handle(t).Attr(context.Background(), "broker.pid")
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir() + "/runs"
	running := strings.TrimSpace(inst.MustRun(t, "submit", "sh", "-c", "echo ran >> "+runs+"; sleep 300"))
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	inst.MustRun(t, "job", "wait-event", "-t", "10", running, "start")
	inst.MustRun(t, "cancel", held)
	n, _ := strconv.Atoi(pid)
	syscall.Kill(n, syscall.SIGKILL)
	<-inst.Done()

	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	// its shell outlived the broker: it is taken back, still running
	if st := strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{state}", running)); st != "RUN" {
		t.Errorf("the job running at the crash, after the restart: %s", st)
	}
	inst2.MustRun(t, "cancel", running)
	inst2.MustRun(t, "job", "wait-event", "-t", "10", running, "clean")
	inst2.MustRun(t, "job", "wait-event", "-t", "10", held, "clean")
	time.Sleep(200 * time.Millisecond) // a window for a wrong second run to show
	if b, _ := os.ReadFile(runs); string(b) != "ran\n" {
		t.Errorf("the job that had started ran %d times", strings.Count(string(b), "ran"))
	}
	if r := strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{result}", held)); r != "CANCELED" {
		t.Errorf("job canceled before the crash: %q", r)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(inst2.MustRun(t, "job", "eventlog", running)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	got := strings.Join(names, " ")
	if !strings.Contains(got, "alloc start ") || !strings.HasSuffix(got, "exception finish release free clean") || strings.Count(got, " start") != 1 {
		t.Errorf("eventlog of the job running at the crash: %s", got)
	}
}

// TestShutdownEndsRunningJobs: a shutdown cancels the running jobs and
// waits for them to end, so their stored records are final (a cancel
// exception through clean) before the instance stops; pending jobs stay
// pending for the next start.
func TestShutdownEndsRunningJobs(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	running := strings.TrimSpace(inst.MustRun(t, "submit", "sleep", "300"))
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	inst.MustRun(t, "job", "wait-event", "-t", "10", running, "start")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, inst.Stderr())
	}
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	log := inst2.MustRun(t, "job", "eventlog", running)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	got := strings.Join(names, " ")
	if !strings.HasSuffix(got, "exception finish release free clean") || strings.Contains(log, "type=\"restart\"") ||
		!strings.Contains(log, "the instance is shutting down") {
		t.Errorf("job running at the shutdown:\n%s", log)
	}
	if st := strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{state}", held)); st != "SCHED" {
		t.Errorf("held job after the restart: %q", st)
	}
}

// TestRestartWithCorruptRecord: a job whose eventlog cannot be read is
// left out with an error naming it, and its ID is never given out again.
// (The snapshots of inactive jobs, which would stand in for the read,
// are removed.)
func TestRestartWithCorruptRecord(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	bad := strings.TrimSpace(inst.MustRun(t, "submit", "--wait", "--setattr=system.exec.test.run_duration=0.01s", "true"))
	key := strings.TrimSpace(inst.MustRun(t, "job", "id", "--to=kvs", bad))
	inst.MustRun(t, "kvs", "put", key+".eventlog=garbage")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, inst.Stderr())
	}
	for _, f := range []string{"job-manager.snapshot", "job-list.snapshot"} {
		if err := os.Remove(filepath.Join(attrs["statedir"], f)); err != nil {
			t.Fatalf("no snapshot to remove: %v", err)
		}
	}
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	if log := inst2.MustRun(t, "dmesg"); !strings.Contains(log, "cannot restore job record "+key) || !strings.Contains(log, "1 job records could not be read") {
		t.Errorf("dmesg does not name the unreadable record %s:\n%s", key, log)
	}
	next := strings.TrimSpace(inst2.MustRun(t, "submit", "--urgency=hold", "true"))
	if jobid.MustParse(next) <= jobid.MustParse(bad) {
		t.Errorf("new job %s does not come after the unreadable %s", next, bad)
	}
}

// TestStartlog: each run of an instance on its statedir is listed by
// flux startlog; a run killed without its shutdown shows as crashed,
// rank 0 says so in its log at the next start, and --check exits 1.
func TestStartlog(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	if out := strings.TrimSpace(inst.MustRun(t, "startlog")); strings.Count(out, "\n") != 0 || !strings.Contains(out, " - running (") {
		t.Fatalf("first run: %q", out)
	}
	if code := inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, inst.Stderr())
	}
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	lines := strings.Split(strings.TrimSpace(inst2.MustRun(t, "startlog")), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "s)") || strings.Contains(lines[0], "running") || !strings.Contains(lines[1], "running") {
		t.Fatalf("after a clean restart: %q", lines)
	}
	inst2.MustRun(t, "startlog", "--check", "--quiet")
	pid, err := inst2.Handle(t).Attr(context.Background(), "broker.pid")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(pid)
	syscall.Kill(n, syscall.SIGKILL)
	<-inst2.Done()

	inst3 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	lines = strings.Split(strings.TrimSpace(inst3.MustRun(t, "startlog")), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], " - crashed") {
		t.Errorf("after a crash: %q", lines)
	}
	if r := inst3.Run(t, "startlog", "--check", "--quiet"); r.Code != 1 || r.Stdout != "" {
		t.Errorf("startlog --check after a crash: %+v", r)
	}
	if log := inst3.MustRun(t, "dmesg"); !strings.Contains(log, "previous run ended without its shutdown") {
		t.Errorf("no crash notice in the log:\n%s", log)
	}
}
