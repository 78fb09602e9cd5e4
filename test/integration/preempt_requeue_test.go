package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPreemptRequeue: with [sched-simple] preempt-mode = "requeue", a
// running preemptible job of two nodes that stands in a normal job's way
// has its tasks killed on both nodes and goes back to the queue under
// its id with its submit time (its eventlog: a non-fatal preempt
// exception noting the requeue, finish, release, free, requeue); it
// stays requeued across a restart of the instance, then runs again
// before a preemptible job submitted after it, completes, and flux job
// attach and flux jobs show its second run, the first one's output kept
// aside.
func TestPreemptRequeue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "preempt.toml"), []byte(
		"[queues.standby]\npreemptible = true\n[queues.batch]\n[sched-simple]\npreempt-mode = \"requeue\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testinstance.Options{Size: 2, Attrs: map[string]string{"statedir": t.TempDir()}, Args: []string{"--config-path", conf}}
	e := &env{t: t, inst: testinstance.Start(t, opts)}
	cores := e.must("resource", "list", "-n", "-o", "{ncores}")
	perNode, _ := strconv.Atoi(cores)
	perNode /= 2
	if perNode < 1 {
		t.Skipf("needs cores on both nodes (flux resource list: %q)", cores)
	}
	c := fmt.Sprintf("--cores-per-task=%d", perNode)
	// its first run records its tasks' pids and sleeps; the second
	// prints and completes
	dir := t.TempDir()
	script := fmt.Sprintf(`r=$FLUX_TASK_RANK; if [ -e %[1]s/ran.$r ]; then echo second $r; exit 0; fi
touch %[1]s/ran.$r; echo first $r; echo $$ > %[1]s/pid.$r; exec sleep 300`, dir)
	victim := e.submit("-q", "standby", "-N2", "-n2", c, "sh", "-c", script)
	e.waitEvent(victim, "start")
	var pids []int
	e.waitFor("both tasks' pids", func() bool {
		pids = pids[:0]
		for r := 0; r < 2; r++ {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("pid.%d", r)))
			if n, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
				pids = append(pids, n)
			}
		}
		return len(pids) == 2
	})
	tSubmit := e.field(victim, "{t_submit}")
	later := e.submit("-q", "standby", "-N2", "-n2", c, "true")
	// the requeued job parks in its stopped queue: still requeued when
	// the instance restarts
	e.must("queue", "stop", "standby")
	urgent := e.submit("-q", "batch", "-N2", "-n2", c, "true")
	if r := e.result(urgent); r != "COMPLETED" {
		t.Fatalf("the urgent job: %s", r)
	}
	e.waitEvent(victim, "requeue")
	for _, pid := range pids {
		e.waitFor(fmt.Sprintf("task %d killed", pid), func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
	}
	checkRequeued := func(e *env, what string) {
		t.Helper()
		evs := e.events(victim)
		var names []string
		for _, ev := range evs {
			names = append(names, ev.Name)
		}
		got := strings.Join(names, " ")
		if !strings.Contains(got, "alloc start exception finish release free requeue priority") {
			t.Fatalf("%s: eventlog %s", what, got)
		}
		exc, _ := find(evs, "exception")
		ctx := ctxOf(t, exc)
		note, _ := ctx["note"].(string)
		if ctx["type"] != "preempt" || ctx["severity"] != 1.0 || ctx["requeue"] != true ||
			note != "preempted by job "+urgent.String()+"; requeue 1 of max-requeue=5" {
			t.Fatalf("%s: exception %s", what, exc.Context)
		}
		if got := e.field(victim, "{id.f58} {state} {t_submit}"); got != victim.String()+" SCHED "+tSubmit {
			t.Fatalf("%s: flux jobs: %q, want %s SCHED %s", what, got, victim, tSubmit)
		}
	}
	checkRequeued(e, "requeued")
	var tExc, tRequeue float64
	for _, ev := range e.events(victim) {
		switch ev.Name {
		case "exception":
			tExc = ev.Timestamp
		case "requeue":
			tRequeue = ev.Timestamp
		}
	}
	t.Logf("from the preempt exception to the job back in the queue (kill on 2 nodes, free): %.1f ms", 1000*(tRequeue-tExc))

	if code := e.inst.Stop(); code != 0 {
		t.Fatalf("the instance exited %d: %s", code, e.inst.Stderr())
	}
	e = &env{t: t, inst: testinstance.Start(t, opts)}
	checkRequeued(e, "after a restart")
	e.must("queue", "start", "standby")
	if r := e.result(victim); r != "COMPLETED" {
		t.Fatalf("the requeued job's second run: %s\n%s", r, e.must("job", "eventlog", victim.String()))
	}
	e.result(later)
	// it sorts by its first submit time: before the job submitted later
	if a, b := allocTime(e, victim), allocTime(e, later); a > b {
		t.Errorf("the requeued job started again at %v, after the later job (%v)", a, b)
	}
	t.Logf("eventlog of %s:\n%s", victim, e.must("job", "eventlog", victim.String()))
	out := e.must("job", "attach", victim.String())
	t.Logf("flux job attach: %q", out)
	if strings.Contains(out, "first") || strings.Count(out, "second") != 2 {
		t.Errorf("flux job attach shows %q, want the second run's output", out)
	}
	dothex, _ := victim.Encode("dothex")
	if kept := e.must("kvs", "get", "job."+dothex+".requeue.1.guest.output"); strings.Count(kept, "first") != 2 {
		t.Errorf("the first run's output, kept: %q", kept)
	}
	listed := e.must("jobs", "-a", "-n", "-o", "{id.f58} {result} {t_submit} {exception.type}")
	if n := strings.Count(listed, victim.String()); n != 1 {
		t.Errorf("flux jobs -a lists the requeued job %d times:\n%s", n, listed)
	}
	if !strings.Contains(listed, victim.String()+" COMPLETED "+tSubmit+" preempt") {
		t.Errorf("flux jobs -a:\n%s", listed)
	}

	// an attach begun in the first run (flux run's) follows the job
	// into its second run, and exits with the second run's status
	dir2 := t.TempDir()
	script2 := fmt.Sprintf(`r=$FLUX_TASK_RANK; if [ -e %[1]s/ran.$r ]; then echo second $r; exit 0; fi
touch %[1]s/ran.$r; echo first $r; exec sleep 300`, dir2)
	again := e.submit("-q", "standby", "-N2", "-n2", c, "sh", "-c", script2)
	e.waitEvent(again, "start")
	var attachOut, attachErr lockedBuffer
	cmd := exec.Command(e.inst.Bin, "job", "attach", again.String())
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	cmd.Stdout, cmd.Stderr = &attachOut, &attachErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitOutput(again, 2)
	e.waitFor("flux job attach printing the first run", func() bool { return strings.Count(attachOut.String(), "first") == 2 })
	urgent = e.submit("-q", "batch", "-N2", "-n2", c, "true")
	if r := e.result(urgent); r != "COMPLETED" {
		t.Fatalf("the second urgent job: %s", r)
	}
	if r := e.result(again); r != "COMPLETED" {
		t.Fatalf("the second requeued job: %s", r)
	}
	// it sorts before the urgent job (older), yet yields to it: the
	// urgent job starts first, and the requeued one is not preempted
	// again for it
	if a, b := allocTime(e, urgent), allocTime(e, again); a > b {
		t.Errorf("the requeued job started again at %v, before the job it was preempted for (%v)", b, a)
	}
	if n := strings.Count(e.must("job", "eventlog", again.String()), " requeue count="); n != 1 {
		t.Errorf("the job was requeued %d times", n)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("flux job attach: %v\n%s", err, attachErr.String())
		}
	case <-time.After(60 * time.Second): // hang guard
		cmd.Process.Kill()
		t.Fatalf("flux job attach did not end with the job:\n%s", attachErr.String())
	}
	got := attachOut.String()
	t.Logf("flux job attach from the first run: %q, stderr %q", got, attachErr.String())
	if strings.Count(got, "first") != 2 || strings.Count(got, "second") != 2 || !strings.Contains(attachErr.String(), "requeue 1 of max-requeue=5") {
		t.Errorf("flux job attach from the first run printed %q, stderr %q", got, attachErr.String())
	}
}

// allocTime is the timestamp of the job's last alloc event (0: none).
func allocTime(e *env, id jobid.ID) float64 {
	ts := allocs(e, id)
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1]
}

// TestPreemptRequeueCrash: an instance killed (SIGKILL, every broker)
// while a requeued job's tasks are still being killed comes back with
// the job being requeued: its surviving shells are reattached and killed
// again (no restart exception ends it), and it goes back to the queue,
// runs again and completes.
func TestPreemptRequeueCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "preempt.toml"), []byte(
		"[queues.standby]\npreemptible = true\n[queues.batch]\n[sched-simple]\npreempt-mode = \"requeue\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	// the first instance never escalates to SIGKILL; the second does
	// at once
	attrs := func(kill string) map[string]string {
		return map[string]string{"statedir": state, "job-exec.kill-timeout": kill, "job-exec.reattach-timeout": "60s"}
	}
	opts := testinstance.Options{Size: 1, Attrs: attrs("600s"), Args: []string{"--config-path", conf}}
	e := &env{t: t, inst: testinstance.Start(t, opts)}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	if cores < 1 {
		t.Skip("no cores")
	}
	c := fmt.Sprintf("--cores-per-task=%d", cores)
	dir := t.TempDir()
	// the first run ignores SIGTERM (for two minutes at most)
	script := fmt.Sprintf(`if [ -e %[1]s/ran ]; then echo second; exit 0; fi
touch %[1]s/ran; echo $$ > %[1]s/pid; trap "" TERM; for i in $(seq 120); do sleep 1; done`, dir)
	victim := e.submit("-q", "standby", "-n1", c, "sh", "-c", script)
	e.waitEvent(victim, "start")
	var pid int
	e.waitFor("the task's pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	urgent := e.submit("-q", "batch", "-n1", c, "true")
	e.waitEvent(victim, "exception")
	e.inst.Kill()
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the task died with the instance: nothing to reattach")
	}
	opts.Attrs = attrs("0.1s")
	e = &env{t: t, inst: testinstance.Start(t, opts)}
	e.waitEvent(victim, "requeue")
	e.waitFor("the task killed", func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
	if r := e.result(urgent); r != "COMPLETED" {
		t.Fatalf("the urgent job: %s", r)
	}
	if r := e.result(victim); r != "COMPLETED" {
		t.Fatalf("the requeued job: %s\n%s", r, e.must("job", "eventlog", victim.String()))
	}
	log := e.must("job", "eventlog", victim.String())
	t.Logf("eventlog:\n%s", log)
	if strings.Contains(log, `type="restart"`) || strings.Count(log, " start") != 2 {
		t.Errorf("eventlog:\n%s", log)
	}
}

// lockedBuffer is a bytes.Buffer a command writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPreemptRequeueYieldRestart: two one-node preemptible jobs are
// preempted (requeue mode) for a two-node job; the first is killed and
// requeued at once, the second ignores SIGTERM and stays in CLEANUP, and
// the instance is killed (every broker) and started again. The requeued
// job, older than the job it was preempted for and with a node free for
// it, still yields to that job after the restart (its eventlog names
// the preemptor; sched.reason_pending says it yields) instead of
// starting again and being preempted a second time: once the second
// job's task ends, the two-node job runs first, then both requeued jobs,
// each requeued once.
func TestPreemptRequeueYieldRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "preempt.toml"), []byte(
		"[queues.standby]\npreemptible = true\n[queues.batch]\n[sched-simple]\npreempt-mode = \"requeue\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// no SIGKILL escalation: the second job's task outlives both
	// instances until the test lets it end
	attrs := map[string]string{"statedir": t.TempDir(), "job-exec.kill-timeout": "600s", "job-exec.reattach-timeout": "60s"}
	opts := testinstance.Options{Size: 2, Attrs: attrs, Args: []string{"--config-path", conf}}
	e := &env{t: t, inst: testinstance.Start(t, opts)}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	perNode := cores / 2
	if perNode < 1 {
		t.Skipf("needs cores on both nodes (flux resource list: %d)", cores)
	}
	c := fmt.Sprintf("--cores-per-task=%d", perNode)
	dir := t.TempDir()
	first := e.submit("-q", "standby", "-N1", "-n1", c, "sh", "-c",
		fmt.Sprintf(`if [ -e %[1]s/ran1 ]; then exit 0; fi; touch %[1]s/ran1; exec sleep 300`, dir))
	e.waitEvent(first, "start")
	second := e.submit("-q", "standby", "-N1", "-n1", c, "sh", "-c",
		fmt.Sprintf(`if [ -e %[1]s/ran2 ]; then exit 0; fi; echo $$ > %[1]s/pid2; touch %[1]s/ran2; trap "" TERM
for i in $(seq 1200); do [ -e %[1]s/go ] && exit 0; sleep 0.1; done`, dir))
	e.waitEvent(second, "start")
	var pid int
	e.waitFor("the second job's task", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "pid2"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	big := e.submit("-q", "batch", "-N2", "-n2", c, "true")
	e.waitEvent(first, "requeue")
	e.waitEvent(second, "exception")
	for _, id := range []jobid.ID{first, second} {
		exc, _ := find(e.events(id), "exception")
		if ctx := ctxOf(t, exc); ctx["requeue"] != true || ctx["preemptor"] != big.String() {
			t.Fatalf("job %s: exception %s, want a requeue naming preemptor %s", id, exc.Context, big)
		}
	}

	e.inst.Kill()
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the second job's task died with the instance")
	}
	e = &env{t: t, inst: testinstance.Start(t, opts)}
	// a node is free and the requeued job sorts first, yet it waits
	deadline := time.Now().Add(60 * time.Second) // hang guard
	for {
		if n := len(allocs(e, first)); n > 1 {
			t.Fatalf("the requeued job started again before the job it was preempted for:\n%s", e.must("job", "eventlog", first.String()))
		}
		if strings.Contains(e.field(first, "{state} {sched.reason_pending}"), "yields to job "+big.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the requeued job does not yield: flux jobs: %q", e.field(first, "{state} {sched.reason_pending}"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := e.result(big); r != "COMPLETED" {
		t.Fatalf("the two-node job: %s", r)
	}
	for _, id := range []jobid.ID{first, second} {
		if r := e.result(id); r != "COMPLETED" {
			t.Fatalf("job %s: %s\n%s", id, r, e.must("job", "eventlog", id.String()))
		}
		log := e.must("job", "eventlog", id.String())
		if n := strings.Count(log, " requeue count="); n != 1 {
			t.Errorf("job %s was requeued %d times:\n%s", id, n, log)
		}
		if a := allocs(e, id); len(a) != 2 || a[1] < allocTime(e, big) {
			t.Errorf("job %s: allocs at %v, the two-node job's at %v", id, a, allocTime(e, big))
		}
	}
}

// allocs lists the timestamps of a job's alloc events.
func allocs(e *env, id jobid.ID) []float64 {
	var ts []float64
	for _, ev := range e.events(id) {
		if ev.Name == "alloc" {
			ts = append(ts, ev.Timestamp)
		}
	}
	return ts
}

// TestPreemptModePerQueue: [queues.NAME] preempt-mode (Slurm's
// PreemptMode per partition) decides what becomes of a queue's
// preempted jobs over the scheduler's preempt-mode: with sched-simple's
// default (cancel), a job of the queue that says requeue goes back to
// the queue and completes, a job of a preemptible queue that says
// nothing is canceled, and a job's own preempt-mode beats its queue's.
func TestPreemptModePerQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "preempt.toml"), []byte(
		"[queues.standby]\npreemptible = true\npreempt-mode = \"requeue\"\n[queues.scavenger]\npreemptible = true\n[queues.batch]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	if cores < 1 {
		t.Skip("no cores")
	}
	c := fmt.Sprintf("--cores-per-task=%d", cores)
	dir := t.TempDir()
	for i, tc := range []struct {
		name, queue string
		extra       []string
		result      string
		requeued    bool
	}{
		{"the queue's requeue", "standby", nil, "COMPLETED", true},
		{"the scheduler's cancel", "scavenger", nil, "FAILED", false},
		{"the job's own cancel", "standby", []string{"--setattr=preempt-mode=cancel"}, "FAILED", false},
	} {
		args := append([]string{"-q", tc.queue, "-n1", c}, tc.extra...)
		mark := fmt.Sprintf("ran%d", i)
		victim := e.submit(append(args, "sh", "-c", victimScript(dir, mark))...)
		waitFirstRun(e, victim, dir, mark)
		urgent := e.submit("-q", "batch", "-n1", c, "true")
		if r := e.result(urgent); r != "COMPLETED" {
			t.Fatalf("%s: the urgent job: %s", tc.name, r)
		}
		r := e.result(victim)
		log := e.must("job", "eventlog", victim.String())
		if got := strings.Contains(log, " requeue count=1"); r != tc.result || got != tc.requeued {
			t.Errorf("%s: the preempted job is %s, requeued %v; want %s, %v:\n%s", tc.name, r, got, tc.result, tc.requeued, log)
		}
	}
}

// waitFirstRun waits until a job running victimScript(dir, name) is in
// its first run's sleep: started, and its mark made. The start event
// alone is not enough: it says the task was spawned, not that the
// script ran, and a job preempted and requeued before its first run
// made the mark sleeps again in its second run (300 s) instead of
// exiting.
func waitFirstRun(e *env, id jobid.ID, dir, name string) {
	e.t.Helper()
	e.waitEvent(id, "start")
	e.waitFor(fmt.Sprintf("job %s's first run to mark %s", id, name), func() bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	})
}
