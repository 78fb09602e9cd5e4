package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLifecycleCancelSelection checks flux cancel against flux-cancel(1):
// --user and --states select jobs as --all does, --dry-run never
// cancels (with ids too), and the counts are worded as flux-core does.
func TestLifecycleCancelSelection(t *testing.T) {
	e := start(t)
	held := e.submit("--urgency=hold", "true")
	run := e.submit(testDuration("60s"), "true")
	e.waitEvent(run, "start")
	e.waitEvent(held, "priority")

	// -n with job ids only counts them
	if r := e.flux("cancel", "-n", held.String()); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Would cancel 1 job" {
		t.Errorf("cancel -n ID: %+v", r)
	}
	if st := e.field(held, "{state}"); st != "SCHED" {
		t.Fatalf("cancel --dry-run ID canceled the job (state %s)", st)
	}
	// --states alone selects, and may be repeated
	if r := e.flux("cancel", "-n", "-S", "pending"); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Would cancel 1 job" {
		t.Errorf("cancel -n -S pending: %+v", r)
	}
	if r := e.flux("cancel", "-n", "-S", "pending", "-S", "RUN"); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Would cancel 2 jobs" {
		t.Errorf("cancel -n -S pending -S RUN: %+v", r)
	}
	// --user alone selects too
	if r := e.flux("cancel", "-n", "--user=all"); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Would cancel 2 jobs" {
		t.Errorf("cancel -n --user=all: %+v", r)
	}
	// no match: a message, silenced by -q
	if r := e.flux("cancel", "-u", "4242"); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Matched 0 jobs" {
		t.Errorf("cancel -u 4242: %+v", r)
	}
	if r := e.flux("cancel", "-q", "-u", "4242"); r.Code != 0 || r.Stderr != "" {
		t.Errorf("cancel -q -u 4242: %+v", r)
	}
	e.fail("cannot be combined", "cancel", "-S", "pending", held.String())
	e.fail("no jobs given", "cancel")
	e.fail(`Invalid state bogus specified`, "cancel", "-S", "bogus")

	// only the running job goes, with the message
	if r := e.flux("cancel", "-S", "run", "-m", "run only"); r.Code != 0 || strings.TrimSpace(r.Stderr) != "flux-cancel: Canceled 1 job (0 errors)" {
		t.Fatalf("cancel -S run: %+v", r)
	}
	e.waitEvent(run, "clean")
	if got := e.field(run, "{result} {exception.type} {exception.note}"); got != "CANCELED cancel run only" {
		t.Errorf("job canceled with -S run: %q", got)
	}
	if st := e.field(held, "{state}"); st != "SCHED" {
		t.Errorf("cancel -S run canceled a pending job (state %s)", st)
	}
	e.must("cancel", held.String())
}

// TestLifecycleUrgencyAndRaise checks flux job urgency -v and keyword
// case, and flux job raise --message, against flux-job(1).
func TestLifecycleUrgencyAndRaise(t *testing.T) {
	e := start(t)
	// a job using every node keeps the others pending even when expedited
	blocker := e.submit(append(whole, testDuration("120s"), "true")...)
	e.waitEvent(blocker, "start")
	id := e.submit(append(whole, "--urgency=hold", "true")...)
	e.waitEvent(id, "priority")

	// -v reports the old urgency on stderr, naming hold and expedite
	for _, step := range []struct{ urgency, old string }{
		{"7", "old urgency: job held"},
		{"EXPEDITE", "old urgency: 7"},
		{"Hold", "old urgency: job expedited"},
	} {
		r := e.flux("job", "urgency", "-v", id.String(), step.urgency)
		if r.Code != 0 || r.Stdout != "" || strings.TrimSpace(r.Stderr) != step.old {
			t.Errorf("job urgency -v %s: %+v, want stderr %q", step.urgency, r, step.old)
		}
	}
	if got := e.field(id, "{urgency}"); got != "0" {
		t.Errorf("urgency after Hold: %s", got)
	}

	// --message sets the note; a note both ways is refused
	e.must("job", "raise", "-s", "4", "-t", "qa", "-m", "from option", id.String())
	e.fail("not both", "job", "raise", "-s", "4", "-m", "x", id.String(), "words")
	var notes []string
	for _, ev := range e.events(id) {
		if ev.Name == "exception" {
			notes = append(notes, ctxOf(t, ev)["note"].(string))
		}
	}
	if len(notes) != 1 || notes[0] != "from option" {
		t.Errorf("exception notes %q, want one \"from option\"", notes)
	}
	e.must("cancel", id.String(), blocker.String())
}

// TestLifecycleDependencyRejects checks that, as in flux-core, a
// dependency an inactive job can never satisfy, or a malformed
// begin-time, fails the submission instead of creating a doomed job.
func TestLifecycleDependencyRejects(t *testing.T) {
	e := start(t)
	ok := e.submit(testDuration("0.01s"), "true")
	bad := e.submit(testDuration("0.01s"), failing, "false")
	held := e.submit("--urgency=hold", "true")
	e.must("cancel", held.String())
	for _, id := range []string{ok.String(), bad.String(), held.String()} {
		e.must("job", "wait-event", "-t", "30", id, "clean")
	}
	okDec := e.must("job", "id", "--to=dec", ok.String())

	for _, c := range []struct{ dep, want string }{
		{"afterok:" + bad.String(), "did not succeed (result FAILED)"},
		{"afternotok:" + okDec, "succeeded"},
		{"afterexcept:" + ok.String(), "without a fatal exception"},
		{"afterok:" + held.String(), "never started"},
		{"afternotok:" + held.String(), "never started"},
		{"after:" + held.String(), "never started"},
		{"begin-time:abc", `Invalid begin-time=abc`},
		{"begin-time:nan", `Invalid begin-time=nan`},
		// flux-core's wording, which scripts grep for
		{"after:1234", "id 1234: job not found"},
		{"after:-1", `"-1" is not a valid jobid`},
		{"after:bar", `"bar" is not a valid jobid`},
	} {
		e.fail(c.want, "submit", "--dependency="+c.dep, "true")
	}
	// what can still be satisfied is: the job runs at once
	for _, dep := range []string{"afterok:" + okDec, "afternotok:" + bad.String(), "afterany:" + held.String(), "after:" + ok.String()} {
		id := e.submit("--dependency="+dep, testDuration("0.01s"), "true")
		if r := e.result(id); r != "COMPLETED" {
			t.Errorf("--dependency=%s: result %s", dep, r)
		}
	}
}

// TestLifecycleBeginTimeWords checks --begin-time forms flux-submit(1)
// documents beyond +FSD: words such as "tomorrow" and past offsets.
func TestLifecycleBeginTimeWords(t *testing.T) {
	e := start(t)
	id := e.submit("--begin-time=tomorrow", "true")
	e.waitEvent(id, "dependency-add")
	y, m, d := time.Now().AddDate(0, 0, 1).Date()
	midnight := time.Date(y, m, d, 0, 0, 0, 0, time.Local)
	ev, _ := find(e.events(id), "dependency-add")
	want := fmt.Sprintf("begin-time=%d.000", midnight.Unix())
	if got := ctxOf(t, ev)["description"]; got != want {
		t.Errorf("--begin-time=tomorrow: dependency %v, want %s", got, want)
	}
	if got := e.field(id, "{state} {contextual_info}"); got != "DEPEND depends:begin@"+midnight.Format("Jan02-15:04") {
		t.Errorf("flux jobs for --begin-time=tomorrow: %q", got)
	}
	e.must("cancel", id.String())

	// a time in the past does not hold the job
	past := e.submit("--begin-time=-1h", testDuration("0.01s"), "true")
	if r := e.result(past); r != "COMPLETED" {
		t.Errorf("--begin-time=-1h: %s", r)
	}
	e.fail(`cannot parse "someday"`, "submit", "--begin-time=someday", "true")
}

// TestLifecycleSingleton checks the singleton rule of flux-submit(1): a
// held singleton is released only when every other active job of the
// same user and name is a held singleton too, one at a time.
func TestLifecycleSingleton(t *testing.T) {
	e := start(t)
	a := e.submit("--job-name=solo", testDuration("60s"), "true")
	e.waitEvent(a, "start")
	s1 := e.submit("--job-name=solo", "--dependency=singleton", testDuration("1s"), "true")
	s2 := e.submit("--job-name=solo", "--dependency=singleton", testDuration("0.01s"), "true")
	e.waitEvent(s2, "dependency-add")
	// a job of that name without the dependency runs at once, and then
	// holds the singletons back too, though it came after them
	x := e.submit("--job-name=solo", testDuration("60s"), "true")
	e.waitEvent(x, "start")
	e.must("cancel", a.String())
	e.waitEvent(a, "clean")
	if _, ok := find(e.events(s1), "dependency-remove"); ok {
		t.Fatalf("singleton %s released while %s (same name) still runs", s1, x)
	}
	e.must("cancel", x.String())
	if r := e.result(s1); r != "COMPLETED" {
		t.Fatalf("first singleton: %s", r)
	}
	if r := e.result(s2); r != "COMPLETED" {
		t.Fatalf("second singleton: %s", r)
	}
	// one at a time, in submit order
	clean, _ := find(e.events(s1), "clean")
	alloc, _ := find(e.events(s2), "alloc")
	if alloc.Timestamp < clean.Timestamp {
		t.Errorf("second singleton ran before the first was inactive")
	}
}

// TestLifecycleExitMessages checks how flux job attach and flux job wait
// describe a failed job, as flux-core words it: tasks killed by a signal
// are "task(s) Terminated", a fatal exception "Fatal exception type=T
// NOTE"; a single flux job wait prints the error after "flux-job: ".
func TestLifecycleExitMessages(t *testing.T) {
	e := start(t)
	run := e.submit("sleep", "300")
	e.waitEvent(run, "start")
	e.must("cancel", run.String())
	r := e.flux("job", "attach", run.String())
	if r.Code != 143 || !strings.Contains(r.Stderr, "flux-job: task(s) Terminated\n") {
		t.Errorf("attach to a canceled job: %+v", r)
	}

	held := e.submit("--flags=waitable", "--urgency=hold", "true")
	e.must("cancel", "-m", "not today", held.String())
	e.waitEvent(held, "clean")
	r = e.flux("job", "wait", held.String())
	if r.Code != 1 || strings.TrimSpace(r.Stderr) != "flux-job: Fatal exception type=cancel not today" {
		t.Errorf("wait for a job canceled while pending: %+v", r)
	}

	killed := e.submit("--flags=waitable", "sleep", "300")
	e.waitEvent(killed, "start")
	e.must("job", "kill", "-s", "SIGUSR1", killed.String())
	r = e.flux("job", "wait", killed.String())
	if r.Code != 1 || strings.TrimSpace(r.Stderr) != "flux-job: task(s) User defined signal 1" {
		t.Errorf("wait for a job whose task was killed: %+v", r)
	}
}
