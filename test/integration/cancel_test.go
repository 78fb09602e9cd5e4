package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// canceled checks a job canceled in some state ends CANCELED, with one
// cancel exception, and whether it was ever allocated.
func canceled(t *testing.T, e *env, id jobid.ID, allocated bool) {
	t.Helper()
	if r := e.result(id); r != "CANCELED" {
		t.Fatalf("job %s: result %s, want CANCELED (events %v)", id, r, e.eventNames(id))
	}
	evs := e.events(id)
	ex, ok := find(evs, "exception")
	if !ok {
		t.Fatalf("job %s: no exception event", id)
	}
	if c := ctxOf(t, ex); c["type"] != "cancel" || c["severity"] != 0.0 {
		t.Fatalf("job %s: exception %s", id, ex.Context)
	}
	if _, ok := find(evs, "alloc"); ok != allocated {
		t.Fatalf("job %s: allocated=%v, want %v (events %v)", id, ok, allocated, e.eventNames(id))
	}
	if allocated {
		if _, ok := find(evs, "free"); !ok {
			t.Fatalf("job %s: resources never freed", id)
		}
	}
	if st := e.field(id, "{status_abbrev}"); st != "CA" {
		t.Fatalf("job %s: status_abbrev %q", id, st)
	}
}

func TestCancel(t *testing.T) {
	e := start(t)

	t.Run("DEPEND", func(t *testing.T) {
		e := e.sub(t)
		held := e.submit("--urgency=hold", "true")
		id := e.submit("--dependency=afterany:"+held.String(), "true")
		e.waitEvent(id, "dependency-add")
		if st := e.field(id, "{state}"); st != "DEPEND" {
			t.Fatalf("state %s", st)
		}
		e.must("cancel", id.String())
		canceled(t, e, id, false)
		// the target is unaffected; release and finish it
		e.must("job", "urgency", held.String(), "default")
		e.waitEvent(held, "clean")
	})

	t.Run("SCHED held", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit("--urgency=hold", "true")
		e.waitEvent(id, "priority")
		e.must("cancel", "-m", "not needed", id.String())
		canceled(t, e, id, false)
		ex, _ := find(e.events(id), "exception")
		if ctxOf(t, ex)["note"] != "not needed" {
			t.Errorf("cancel note: %s", ex.Context)
		}
	})

	t.Run("SCHED resources busy", func(t *testing.T) {
		e := e.sub(t)
		blocker := e.submit(append(whole, testDuration("30s"), "true")...)
		e.waitEvent(blocker, "start")
		id := e.submit(append(whole, testDuration("0.01s"), "true")...)
		e.waitEvent(id, "priority")
		if st := e.field(id, "{state}"); st != "SCHED" {
			t.Fatalf("state %s", st)
		}
		e.must("cancel", id.String())
		canceled(t, e, id, false)
		// RUN: cancel the blocker; its resources come back
		e.must("cancel", blocker.String())
		canceled(t, e, blocker, true)
		after := e.submit(append(whole, testDuration("0.01s"), "true")...)
		if r := e.result(after); r != "COMPLETED" {
			t.Fatalf("job after the cancellations: %s", r)
		}
	})

	t.Run("RUN", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit(testDuration("30s"), "true")
		e.waitEvent(id, "start")
		e.must("cancel", id.String())
		canceled(t, e, id, true)
		if _, ok := find(e.events(id), "finish"); !ok {
			t.Fatalf("canceled running job never finished: %v", e.eventNames(id))
		}
	})

	t.Run("CLEANUP", func(t *testing.T) {
		e := e.sub(t)
		// an epilog keeps the job in CLEANUP for a while
		e.must("jobtap", "load", "perilog.so", `epilog={"command":["sleep","2"]}`)
		defer e.must("jobtap", "remove", "perilog.so")
		id := e.submit(testDuration("0.01s"), "true")
		e.waitEvent(id, "epilog-start")
		if st := e.field(id, "{state}"); st != "CLEANUP" {
			t.Fatalf("state %s during the epilog", st)
		}
		e.must("cancel", id.String())
		// The job had already finished successfully: as in flux-core's
		// job-list, a fatal exception after the finish event is recorded
		// but the result stays COMPLETED. The job must still end.
		if r := e.result(id); r != "COMPLETED" {
			t.Errorf("job canceled during its epilog: %s", r)
		}
		if got := e.field(id, "{exception.occurred} {exception.type}"); got != "True cancel" {
			t.Errorf("exception fields %q", got)
		}
		if _, ok := find(e.events(id), "epilog-finish"); !ok {
			t.Errorf("the epilog of a job canceled in CLEANUP did not finish: %v", e.eventNames(id))
		}
	})

	t.Run("inactive", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit(testDuration("0.01s"), "true")
		e.waitEvent(id, "clean")
		r := e.flux("cancel", id.String())
		if r.Code == 0 {
			t.Fatalf("canceling an inactive job succeeded")
		}
		if r := e.field(id, "{result}"); r != "COMPLETED" {
			t.Fatalf("result changed to %s", r)
		}
	})

	t.Run("all", func(t *testing.T) {
		e := e.sub(t)
		a := e.submit("--urgency=hold", "true")
		b := e.submit("--urgency=hold", "true")
		e.waitEvent(b, "priority")
		if r := e.flux("cancel", "--all", "--dry-run"); r.Code != 0 || !strings.Contains(r.Stderr, "Would cancel 2 jobs") {
			t.Errorf("cancel --all --dry-run: %+v", r)
		}
		r := e.flux("cancel", "--all")
		if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "Canceled 2 jobs") {
			t.Fatalf("cancel --all: %+v", r)
		}
		canceled(t, e, a, false)
		canceled(t, e, b, false)
	})
}

func TestExceptions(t *testing.T) {
	e := start(t)

	t.Run("non-fatal", func(t *testing.T) {
		e := e.sub(t)
		// on a running job, and on a pending one: neither changes state
		run := e.submit(testDuration("60s"), "true")
		e.waitEvent(run, "start")
		e.must("job", "raise", "--severity=1", "--type=test", run.String())
		e.waitEvent(run, "exception")
		if st := e.field(run, "{state}"); st != "RUN" {
			t.Fatalf("state %s after a severity 1 exception, want RUN", st)
		}
		e.must("cancel", run.String())
		id := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		e.waitEvent(id, "priority")
		e.must("job", "raise", "--severity=3", "--type=test", id.String(), "just a note")
		e.waitEvent(id, "exception")
		if st := e.field(id, "{state}"); st != "SCHED" {
			t.Fatalf("state %s after a severity 3 exception, want SCHED", st)
		}
		e.must("job", "urgency", id.String(), "default")
		if r := e.result(id); r != "COMPLETED" {
			t.Fatalf("result %s after a non-fatal exception", r)
		}
		ex, _ := find(e.events(id), "exception")
		c := ctxOf(t, ex)
		if c["type"] != "test" || c["severity"] != 3.0 || c["note"] != "just a note" {
			t.Fatalf("exception context %s", ex.Context)
		}
		// flux-core writes type, severity, note, userid in that order
		if !strings.HasPrefix(string(ex.Context), `{"type":"test","severity":3,"note":"just a note","userid":`) {
			t.Errorf("exception context key order: %s", ex.Context)
		}
	})

	t.Run("fatal", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit(testDuration("30s"), "true")
		e.waitEvent(id, "start")
		e.must("job", "raise", "--type=oops", id.String())
		if r := e.result(id); r != "FAILED" {
			t.Fatalf("result %s after a fatal exception", r)
		}
		if got := e.field(id, "{exception.occurred} {exception.type} {exception.severity}"); got != "True oops 0" {
			t.Errorf("exception fields: %q", got)
		}
		ev := e.must("job", "eventlog", id.String())
		if !strings.Contains(ev, `exception type="oops" severity=0`) {
			t.Errorf("flux job eventlog:\n%s", ev)
		}
	})

	t.Run("errors", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit(testDuration("0.01s"), "true")
		e.waitEvent(id, "clean")
		e.fail("inactive", "job", "raise", id.String())
		e.fail("", "job", "raise", "--severity=9", id.String())
		e.fail("", "job", "raise", "ƒ2PbTxYF")
	})
}

func TestUpdate(t *testing.T) {
	e := start(t)
	id := e.submit("--urgency=hold", "-t", "10m", testDuration("0.01s"), "true")
	e.waitEvent(id, "priority")
	e.must("update", id.String(), "duration=5m")
	ev, ok := find(e.events(id), "jobspec-update")
	if !ok {
		t.Fatalf("no jobspec-update event: %v", e.eventNames(id))
	}
	if d := ctxOf(t, ev)["attributes.system.duration"]; d != 300.0 {
		t.Fatalf("jobspec-update context %s", ev.Context)
	}
	if d := e.field(id, "{duration}"); d != "300.0" {
		t.Errorf("flux jobs {duration} after update: %q", d)
	}
	// relative updates adjust the current value
	e.must("update", id.String(), "duration=+1m")
	if d := e.field(id, "{duration}"); d != "360.0" {
		t.Errorf("flux jobs {duration} after +1m: %q", d)
	}
	// an adjustment that leaves no time, or of a job without a limit,
	// is refused with the reason
	e.fail("is not positive", "update", id.String(), "duration=-7m")
	unlimited := e.submit("--urgency=hold", testDuration("0.01s"), "true")
	e.fail("no time limit to adjust", "update", unlimited.String(), "duration=+1m")
	e.must("cancel", unlimited.String())
	js := e.must("job", "info", id.String(), "jobspec")
	if !strings.Contains(js, `"duration":360`) {
		t.Errorf("jobspec after update: %.200s", js)
	}
	e.must("job", "urgency", id.String(), "default")
	if r := e.result(id); r != "COMPLETED" {
		t.Fatalf("updated job: %s", r)
	}
	// inactive jobs may not be updated
	e.fail("", "update", id.String(), "duration=1m")
	if got := e.field(id, "{name}"); got != "true" {
		t.Errorf("name of the job: %q", got)
	}

	// the name of a pending job; a running job's name and, for the
	// instance owner, its duration (the time limit counts from the start)
	run := e.submit("-t", "4s", testDuration("1h"), "true")
	e.must("update", run.String(), "name=renamed")
	if got := e.field(run, "{name}"); got != "renamed" {
		t.Errorf("name after update: %q", got)
	}
	e.waitEvent(run, "start")
	e.must("update", run.String(), "name=running", "duration=1h")
	ev, ok = find(e.events(run), "resource-update")
	if !ok {
		t.Fatalf("no resource-update event: %v", e.eventNames(run))
	}
	start, _ := strconv.ParseFloat(e.field(run, "{t_run}"), 64)
	if exp, _ := ctxOf(t, ev)["expiration"].(float64); exp < start+3599 || exp > start+3601 {
		t.Errorf("resource-update %s: want the start (%f) + 1h", ev.Context, start)
	}
	if got := e.field(run, "{name} {duration}"); got != "running 3600.0" {
		t.Errorf("running job after update: %q", got)
	}
	time.Sleep(4500 * time.Millisecond) // past the first limit
	if got := e.field(run, "{state}"); got != "RUN" {
		t.Fatalf("job with its time limit extended: %s", got)
	}
	e.fail("before the update", "update", run.String(), "duration=1s")
	e.fail("update of queue for running job not supported", "update", run.String(), "queue=other")
	e.fail("only its name and duration", "update", run.String(), "attributes.system.exec.test.run_duration=1")
	e.must("cancel", run.String())
	e.waitEvent(run, "clean")
}

func TestPerilog(t *testing.T) {
	e := start(t)
	e.must("jobtap", "load", "perilog.so", `prolog={"command":["sleep","0.2"]}`, `epilog={"command":["true"]}`)
	id := e.submit(testDuration("0.01s"), "true")
	if r := e.result(id); r != "COMPLETED" {
		t.Fatalf("job with a prolog and an epilog: %s (events %v)", r, e.eventNames(id))
	}
	names := strings.Join(e.eventNames(id), " ")
	for _, want := range []string{"alloc prolog-start", "prolog-finish", "start", "finish epilog-start", "epilog-finish", "free clean"} {
		if !strings.Contains(names, want) {
			t.Errorf("events %q lack %q", names, want)
		}
	}
	// a failing prolog is a fatal exception: the job never starts
	e.must("jobtap", "load", "--remove=perilog.so", "perilog.so", `prolog={"command":["false"]}`)
	bad := e.submit(testDuration("0.01s"), "true")
	if r := e.result(bad); r != "FAILED" {
		t.Fatalf("job whose prolog failed: %s", r)
	}
	if _, ok := find(e.events(bad), "start"); ok {
		t.Fatalf("job started although its prolog failed")
	}
}
