package integration

import (
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// failing is the --setattr that makes a test-executor job exit 1.
const failing = "--setattr=system.exec.test.wait_status=256"

// ranBefore fails unless job a was allocated before b (alloc events).
func ranBefore(t *testing.T, e *env, a, b jobid.ID) {
	t.Helper()
	ea, ok := find(e.events(a), "alloc")
	if !ok {
		t.Fatalf("job %s never ran", a)
	}
	eb, ok := find(e.events(b), "alloc")
	if !ok {
		t.Fatalf("job %s never ran", b)
	}
	if ea.Timestamp >= eb.Timestamp {
		t.Fatalf("job %s ran at %f, not before job %s at %f", a, ea.Timestamp, b, eb.Timestamp)
	}
}

// dependencyException checks a job ended with a fatal exception of type
// dependency, before it ever ran.
func dependencyException(t *testing.T, e *env, id jobid.ID) {
	t.Helper()
	e.waitEvent(id, "clean")
	evs := e.events(id)
	ex, ok := find(evs, "exception")
	if !ok {
		t.Fatalf("job %s: no exception in %v", id, e.eventNames(id))
	}
	c := ctxOf(t, ex)
	if c["type"] != "dependency" || c["severity"] != 0.0 {
		t.Fatalf("job %s exception %s, want type=dependency severity=0", id, ex.Context)
	}
	if _, ran := find(evs, "alloc"); ran {
		t.Fatalf("job %s ran despite an unsatisfiable dependency", id)
	}
	if r := e.field(id, "{result}"); r == "COMPLETED" {
		t.Fatalf("job %s result %s", id, r)
	}
}

func TestDependencies(t *testing.T) {
	e := start(t)

	t.Run("afterany", func(t *testing.T) {
		e := e.sub(t)
		a := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		bad := e.submit(testDuration("0.1s"), failing, "false")
		b := e.submit("--dependency=afterany:"+a.String(), testDuration("0.01s"), "true")
		c := e.submit("--dependency=afterany:"+bad.String(), testDuration("0.01s"), "true")
		e.waitEvent(b, "dependency-add")
		if st := e.field(b, "{state}"); st != "DEPEND" {
			t.Errorf("dependent job state %s while its target runs, want DEPEND", st)
		}
		// flux-core describes the dependency as after-finish=ID
		if deps := e.field(b, "{dependencies}"); !strings.Contains(deps, "after-finish="+a.String()) {
			t.Errorf("flux jobs {dependencies} = %q, want after-finish=%s", deps, a)
		}
		e.must("job", "urgency", a.String(), "default")
		for _, id := range []jobid.ID{b, c} {
			if r := e.result(id); r != "COMPLETED" {
				t.Errorf("afterany job %s: %s", id, r)
			}
		}
		ranBefore(t, e, a, b)
		if clean, _ := find(e.events(a), "clean"); true {
			alloc, _ := find(e.events(b), "alloc")
			if alloc.Timestamp < clean.Timestamp {
				t.Errorf("afterany job started before its target was inactive")
			}
		}
		if r := e.result(bad); r != "FAILED" {
			t.Errorf("target with wait_status 256: %s", r)
		}
	})

	t.Run("afterok", func(t *testing.T) {
		e := e.sub(t)
		// held until the dependents are in: a target already inactive
		// and failed makes the submission fail instead
		ok := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		bad := e.submit("--urgency=hold", testDuration("0.01s"), failing, "false")
		b := e.submit("--dependency=afterok:"+ok.String(), testDuration("0.01s"), "true")
		c := e.submit("--dependency=afterok:"+bad.String(), testDuration("0.01s"), "true")
		e.must("job", "urgency", ok.String(), "default")
		e.must("job", "urgency", bad.String(), "default")
		if r := e.result(b); r != "COMPLETED" {
			t.Errorf("afterok on a successful job: %s", r)
		}
		ranBefore(t, e, ok, b)
		dependencyException(t, e, c)
		// the target is inactive and failed: the dependency can never be
		// satisfied, so the submission fails or the job gets an exception
		if r := e.flux("submit", "--dependency=afterok:"+bad.String(), testDuration("0.01s"), "true"); r.Code == 0 {
			dependencyException(t, e, jobid.MustParse(strings.TrimSpace(r.Stdout)))
		}
	})

	t.Run("afternotok", func(t *testing.T) {
		e := e.sub(t)
		ok := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		bad := e.submit("--urgency=hold", testDuration("0.01s"), failing, "false")
		b := e.submit("--dependency=afternotok:"+bad.String(), testDuration("0.01s"), "true")
		c := e.submit("--dependency=afternotok:"+ok.String(), testDuration("0.01s"), "true")
		e.must("job", "urgency", ok.String(), "default")
		e.must("job", "urgency", bad.String(), "default")
		if r := e.result(b); r != "COMPLETED" {
			t.Errorf("afternotok on a failed job: %s", r)
		}
		ranBefore(t, e, bad, b)
		dependencyException(t, e, c)
		// a target canceled before it ran never entered RUN: only
		// afterany is satisfied by it (flux-submit(1))
		held := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		d := e.submit("--dependency=afternotok:"+held.String(), testDuration("0.01s"), "true")
		f := e.submit("--dependency=afterany:"+held.String(), testDuration("0.01s"), "true")
		e.waitEvent(d, "dependency-add")
		e.must("cancel", held.String())
		dependencyException(t, e, d)
		if r := e.result(f); r != "COMPLETED" {
			t.Errorf("afterany on a job canceled while pending: %s", r)
		}
	})

	t.Run("after", func(t *testing.T) {
		e := e.sub(t)
		a := e.submit(testDuration("60s"), "true")
		b := e.submit("--dependency=after:"+a.String(), testDuration("0.01s"), "true")
		// satisfied once the target starts: b finishes while a still runs
		if r := e.result(b); r != "COMPLETED" {
			t.Errorf("after: %s", r)
		}
		if st := e.field(a, "{state}"); st != "RUN" {
			t.Errorf("target state %s when the after job finished, want RUN", st)
		}
		start, _ := find(e.events(a), "start")
		alloc, _ := find(e.events(b), "alloc")
		if alloc.Timestamp < start.Timestamp {
			t.Errorf("after job allocated before its target started")
		}
		e.must("cancel", a.String())
		// a job canceled before it started can never satisfy "after"
		held := e.submit("--urgency=hold", "true")
		c := e.submit("--dependency=after:"+held.String(), testDuration("0.01s"), "true")
		e.waitEvent(c, "dependency-add")
		e.must("cancel", held.String())
		dependencyException(t, e, c)
	})

	t.Run("singleton", func(t *testing.T) {
		e := e.sub(t)
		// a held job of the same name holds a singleton back
		a := e.submit("--job-name=solo", "--urgency=hold", testDuration("0.01s"), "true")
		b := e.submit("--job-name=solo", "--dependency=singleton", testDuration("0.01s"), "true")
		other := e.submit("--job-name=other", "--dependency=singleton", testDuration("0.01s"), "true")
		e.waitEvent(b, "dependency-add")
		if st := e.field(b, "{state}"); st != "DEPEND" {
			t.Errorf("second singleton state %s, want DEPEND", st)
		}
		e.must("job", "urgency", a.String(), "default")
		for _, id := range []jobid.ID{a, b, other} {
			if r := e.result(id); r != "COMPLETED" {
				t.Errorf("singleton job %s: %s", id, r)
			}
		}
		clean, _ := find(e.events(a), "clean")
		alloc, _ := find(e.events(b), "alloc")
		if alloc.Timestamp < clean.Timestamp {
			t.Errorf("second singleton ran before the first was inactive")
		}
	})

	t.Run("rejected", func(t *testing.T) {
		e := e.sub(t)
		// the target must be a known job (flux-submit(1)): otherwise the
		// submission itself fails
		e.fail("not found", "submit", "--dependency=afterok:ƒ2PbTxYF", "true")
		e.fail("bar", "submit", "--dependency=afterany:bar", "true")
		e.fail("nosuch", "submit", "--dependency=nosuch:1", "true")
		e.fail("job name", "submit", "--dependency=singleton", "true")
	})
}

func TestBeginTime(t *testing.T) {
	e := start(t)
	id := e.submit("--begin-time=+2s", testDuration("0.01s"), "true")
	e.waitEvent(id, "dependency-add")
	if st := e.field(id, "{state}"); st != "DEPEND" {
		t.Fatalf("state %s, want DEPEND until the begin time", st)
	}
	if deps := e.field(id, "{dependencies}"); !strings.Contains(deps, "begin-time") && !strings.Contains(deps, "begin@") {
		t.Errorf("dependencies %q", deps)
	}
	if r := e.result(id); r != "COMPLETED" {
		t.Fatalf("result %s", r)
	}
	evs := e.events(id)
	submit, _ := find(evs, "submit")
	alloc, _ := find(evs, "alloc")
	if wait := alloc.Timestamp - submit.Timestamp; wait < 1.9 {
		t.Fatalf("job ran %.2fs after submission, want >= 2s", wait)
	}
}
