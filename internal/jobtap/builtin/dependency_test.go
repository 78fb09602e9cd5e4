package builtin

import (
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

const (
	alice    uint32 = 1001
	bob      uint32 = 1002
	ownerUID uint32 = 500
)

// target is the job the waiters depend on in these tests.
var target = jobid.ID(1 << 30)

func loadAfter(t *testing.T) (*DependencyAfter, *testHost) {
	t.Helper()
	h := newTestHost(t)
	h.owner = ownerUID
	d := newDependencyAfter()
	if err := d.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	return d, h
}

// addTarget stores the target job of userid in state.
func addTarget(h *testHost, userid uint32, state jobtap.State) {
	h.addJob(&jobtap.Job{ID: target, Userid: userid, State: state, WaitStatus: -1})
}

// waiter is a job of userid in DEPEND with the dependencies uris.
func waiter(t *testing.T, h *testHost, id jobid.ID, userid uint32, uris ...string) *jobtap.Job {
	t.Helper()
	return h.addJob(&jobtap.Job{ID: id, Userid: userid, State: jobtap.StateDepend, Jobspec: withDeps(t, uris...)})
}

// endTarget makes the target inactive with result (ran: it was
// allocated and started) and shows the plugin the transition.
func endTarget(d *DependencyAfter, h *testHost, result string, ran bool, exception string) {
	tj := h.setJob(target, func(j *jobtap.Job) {
		j.State, j.Result, j.Ran, j.Started, j.Exception = jobtap.StateInactive, result, ran, ran, exception
	})
	d.JobState(tj, jobtap.StateCleanup)
}

func desc(prefix string) string { return prefix + "=" + target.String() }

// TestAfterSchemesAddFluxCoreDescriptions: each after* scheme on a
// pending job adds one dependency named as flux-core names it.
func TestAfterSchemesAddFluxCoreDescriptions(t *testing.T) {
	for scheme, prefix := range map[string]string{
		"after": "after-start", "afterstart": "after-start",
		"afterany": "after-finish", "afterfinish": "after-finish",
		"afterok": "after-success", "afternotok": "after-failure",
		"afterexcept": "after-except",
	} {
		t.Run(scheme, func(t *testing.T) {
			d, h := loadAfter(t)
			addTarget(h, alice, jobtap.StateSched)
			w := waiter(t, h, 1, alice, scheme+":"+target.String())
			if err := d.Validate(w, false); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := d.JobDepend(w); err != nil {
				t.Fatalf("JobDepend: %v", err)
			}
			if want := []depCall{{1, desc(prefix)}}; !reflect.DeepEqual(h.added, want) {
				t.Errorf("added %v, want %v", h.added, want)
			}
			if len(h.removed)+len(h.exceptions) != 0 {
				t.Errorf("removed %v, exceptions %v: want none yet", h.removed, h.exceptions)
			}
		})
	}
}

// TestAfterAcceptsAnyJobidEncoding: the target may be named in decimal
// or hex; the description uses its F58 form.
func TestAfterAcceptsAnyJobidEncoding(t *testing.T) {
	for _, v := range []string{"1073741824", "0x40000000", target.String()} {
		d, h := loadAfter(t)
		addTarget(h, alice, jobtap.StateSched)
		w := waiter(t, h, 1, alice, "afterok:"+v)
		if err := d.JobDepend(w); err != nil {
			t.Fatalf("afterok:%s: %v", v, err)
		}
		if want := []depCall{{1, desc("after-success")}}; !reflect.DeepEqual(h.added, want) {
			t.Errorf("afterok:%s: added %v, want %v", v, h.added, want)
		}
	}
}

// TestAfterStartReleasedByStartEvent: "after" waits through the target's
// RUN state (its shells have not started) and is released by the start
// event; later transitions of the target do nothing more.
func TestAfterStartReleasedByStartEvent(t *testing.T) {
	d, h := loadAfter(t)
	addTarget(h, alice, jobtap.StateSched)
	w := waiter(t, h, 1, alice, "after:"+target.String())
	if err := d.JobDepend(w); err != nil {
		t.Fatal(err)
	}
	d.JobState(h.setJob(target, func(j *jobtap.Job) { j.State, j.Ran = jobtap.StateRun, true }), jobtap.StateSched)
	d.JobEvent(h.setJob(target, func(*jobtap.Job) {}), "alloc", nil)
	if len(h.removed) != 0 {
		t.Fatalf("released before the start event: %v", h.removed)
	}
	d.JobEvent(h.setJob(target, func(j *jobtap.Job) { j.Started = true }), "start", nil)
	if want := []depCall{{1, desc("after-start")}}; !reflect.DeepEqual(h.removed, want) {
		t.Fatalf("removed %v, want %v", h.removed, want)
	}
	endTarget(d, h, "FAILED", true, "")
	if len(h.removed) != 1 || len(h.exceptions) != 0 {
		t.Errorf("after the release, the target's end gave removed %v exceptions %v", h.removed, h.exceptions)
	}
}

// TestAfterStartOnStartedJobIsSatisfiedAtOnce: a target already started
// adds no dependency at all.
func TestAfterStartOnStartedJobIsSatisfiedAtOnce(t *testing.T) {
	d, h := loadAfter(t)
	h.addJob(&jobtap.Job{ID: target, Userid: alice, State: jobtap.StateRun, Ran: true, Started: true})
	w := waiter(t, h, 1, alice, "after:"+target.String())
	if err := d.JobDepend(w); err != nil {
		t.Fatal(err)
	}
	if len(h.added) != 0 {
		t.Errorf("added %v for a started target", h.added)
	}
}

// TestAfterTargetEndsLater: the dependency waits while the target is
// active and, when it becomes inactive, is removed if the result
// satisfies it or else fails the waiter with a fatal dependency
// exception.
func TestAfterTargetEndsLater(t *testing.T) {
	never := func(prefix, result string) string {
		return "dependency " + desc(prefix) + " can never be satisfied: job " + target.String() + " result " + result
	}
	for _, c := range []struct {
		name, scheme, prefix string
		result               string
		ran                  bool
		exception            string
		note                 string // "": released
	}{
		{"afterany completed", "afterany", "after-finish", "COMPLETED", true, "", ""},
		{"afterany failed", "afterany", "after-finish", "FAILED", true, "", ""},
		{"afterany timeout", "afterany", "after-finish", "TIMEOUT", true, "timeout", ""},
		{"afterany canceled while running", "afterany", "after-finish", "CANCELED", true, "cancel", ""},
		{"afterfinish completed", "afterfinish", "after-finish", "COMPLETED", true, "", ""},
		{"afterok completed", "afterok", "after-success", "COMPLETED", true, "", ""},
		{"afterok failed", "afterok", "after-success", "FAILED", true, "", never("after-success", "FAILED")},
		{"afterok canceled", "afterok", "after-success", "CANCELED", true, "cancel", never("after-success", "CANCELED")},
		{"afterok timeout", "afterok", "after-success", "TIMEOUT", true, "timeout", never("after-success", "TIMEOUT")},
		{"afterok never ran", "afterok", "after-success", "CANCELED", false, "cancel", never("after-success", "CANCELED")},
		{"afternotok failed", "afternotok", "after-failure", "FAILED", true, "", ""},
		{"afternotok canceled while running", "afternotok", "after-failure", "CANCELED", true, "cancel", ""},
		{"afternotok timeout", "afternotok", "after-failure", "TIMEOUT", true, "timeout", ""},
		{"afternotok completed", "afternotok", "after-failure", "COMPLETED", true, "", never("after-failure", "COMPLETED")},
		{"afternotok never ran", "afternotok", "after-failure", "CANCELED", false, "cancel", never("after-failure", "CANCELED")},
		{"afterexcept exception", "afterexcept", "after-except", "FAILED", true, "exec", ""},
		{"afterexcept no exception", "afterexcept", "after-except", "FAILED", true, "", never("after-except", "FAILED")},
		{"afterexcept never ran", "afterexcept", "after-except", "CANCELED", false, "cancel", never("after-except", "CANCELED")},
		{"after never started", "after", "after-start", "CANCELED", false, "cancel", never("after-start", "CANCELED")},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, h := loadAfter(t)
			addTarget(h, alice, jobtap.StatePriority)
			w := waiter(t, h, 7, alice, c.scheme+":"+target.String())
			if err := d.JobDepend(w); err != nil {
				t.Fatal(err)
			}
			// intermediate states never settle an end dependency
			for _, s := range []jobtap.State{jobtap.StateSched, jobtap.StateRun, jobtap.StateCleanup} {
				if s == jobtap.StateSched || c.ran {
					d.JobState(h.setJob(target, func(j *jobtap.Job) { j.State, j.Ran = s, c.ran && s != jobtap.StateSched }), jobtap.StatePriority)
				}
			}
			if c.scheme != "after" && len(h.removed)+len(h.exceptions) != 0 {
				t.Fatalf("settled while the target was active: removed %v exceptions %v", h.removed, h.exceptions)
			}
			endTarget(d, h, c.result, c.ran, c.exception)
			if c.note == "" {
				if want := []depCall{{7, desc(c.prefix)}}; !reflect.DeepEqual(h.removed, want) || len(h.exceptions) != 0 {
					t.Errorf("removed %v exceptions %v, want %v removed", h.removed, h.exceptions, want)
				}
				return
			}
			want := []raisedException{{7, "dependency", 0, c.note}}
			if !reflect.DeepEqual(h.exceptions, want) || len(h.removed) != 0 {
				t.Errorf("exceptions %v removed %v,\nwant exception %v", h.exceptions, h.removed, want)
			}
		})
	}
}

// TestAfterOnInactiveTarget: an inactive target that satisfies the
// dependency adds none; one that never can is refused at submission
// (Validate) and at DEPEND with the reason.
func TestAfterOnInactiveTarget(t *testing.T) {
	id := target.String()
	for _, c := range []struct {
		name, uri string
		result    string
		ran       bool
		exception string
		want      string // "": satisfied
	}{
		{"afterany completed", "afterany", "COMPLETED", true, "", ""},
		{"afterok completed", "afterok", "COMPLETED", true, "", ""},
		{"afternotok failed", "afternotok", "FAILED", true, "", ""},
		{"afterexcept exception", "afterexcept", "FAILED", true, "exec", ""},
		{"after started", "after", "COMPLETED", true, "", ""},
		{"afterok failed", "afterok", "FAILED", true, "", "dependency: afterok: job " + id + " did not succeed (result FAILED)"},
		{"afterok never ran", "afterok", "CANCELED", false, "cancel", "dependency: afterok: job " + id + " never started (result CANCELED)"},
		{"afternotok completed", "afternotok", "COMPLETED", true, "", "dependency: afternotok: job " + id + " succeeded"},
		{"afternotok never ran", "afternotok", "CANCELED", false, "cancel", "dependency: afternotok: job " + id + " never started (result CANCELED)"},
		{"after never ran", "after", "CANCELED", false, "cancel", "dependency: after: job " + id + " never started (result CANCELED)"},
		{"afterstart never ran", "afterstart", "CANCELED", false, "cancel", "dependency: afterstart: job " + id + " never started (result CANCELED)"},
		{"afterexcept completed", "afterexcept", "COMPLETED", true, "", "dependency: afterexcept: job " + id + " ended without a fatal exception (result COMPLETED)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, h := loadAfter(t)
			h.addJob(&jobtap.Job{ID: target, Userid: alice, State: jobtap.StateInactive,
				Result: c.result, Ran: c.ran, Started: c.ran, Exception: c.exception})
			w := waiter(t, h, 1, alice, c.uri+":"+id)
			verr, derr := d.Validate(w, false), d.JobDepend(w)
			for what, err := range map[string]error{"Validate": verr, "JobDepend": derr} {
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v, want it satisfied", what, err)
				case c.want != "" && (err == nil || err.Error() != c.want):
					t.Errorf("%s: %v, want %q", what, err, c.want)
				}
			}
			if len(h.added)+len(h.removed)+len(h.exceptions) != 0 {
				t.Errorf("added %v removed %v exceptions %v: want no calls", h.added, h.removed, h.exceptions)
			}
		})
	}
}

// TestAfterRefusals: malformed URIs and jobids, unknown jobs and schemes
// are refused with the reason, at submission and at DEPEND.
func TestAfterRefusals(t *testing.T) {
	for _, c := range []struct{ uri, want string }{
		{"afterok:notajob", `dependency: afterok: "notajob" is not a valid jobid`},
		{"afterany:", `dependency: afterany: "" is not a valid jobid`},
		{"afternotok:ƒ0OIl", `dependency: afternotok: "ƒ0OIl" is not a valid jobid`},
		{"afterok:12345", "dependency: afterok: id 12345: job not found"},
		{"after:" + jobid.ID(99).String(), "dependency: after: id " + jobid.ID(99).String() + ": job not found"},
		{"afterdark:" + target.String(), `dependency scheme "afterdark" is not supported`},
		{"AfterOK:notajob", `dependency: afterok: "notajob" is not a valid jobid`}, // schemes are lower-cased
	} {
		d, h := loadAfter(t)
		addTarget(h, alice, jobtap.StateSched)
		w := waiter(t, h, 1, alice, c.uri)
		if err := d.Validate(w, false); err == nil || err.Error() != c.want {
			t.Errorf("%s: Validate: %v, want %q", c.uri, err, c.want)
		}
		if err := d.JobDepend(w); err == nil || err.Error() != c.want {
			t.Errorf("%s: JobDepend: %v, want %q", c.uri, err, c.want)
		}
		if len(h.added) != 0 {
			t.Errorf("%s: added %v", c.uri, h.added)
		}
	}
}

// TestAfterMalformedDependencyList: a dependencies attribute that is not
// RFC 26 is refused with the jobspec's reason.
func TestAfterMalformedDependencyList(t *testing.T) {
	d, h := loadAfter(t)
	js := newSpec(t)
	if err := js.SetAttribute("system.dependencies", []any{map[string]any{"scheme": "afterok"}}); err != nil {
		t.Fatal(err)
	}
	w := h.addJob(&jobtap.Job{ID: 1, Userid: alice, State: jobtap.StateDepend, Jobspec: js})
	want := "attributes.system.dependencies[0].value: required key is missing"
	if err := d.Validate(w, false); err == nil || err.Error() != want {
		t.Errorf("Validate: %v, want %q", err, want)
	}
	if err := d.JobDepend(w); err == nil || err.Error() != want {
		t.Errorf("JobDepend: %v, want %q", err, want)
	}
}

// TestAfterOtherUsersJobRefused: a guest may not depend on another
// user's job.
func TestAfterOtherUsersJobRefused(t *testing.T) {
	d, h := loadAfter(t)
	addTarget(h, bob, jobtap.StateSched)
	w := waiter(t, h, 1, alice, "afterok:"+target.String())
	want := "dependency: afterok: job " + target.String() + " belongs to another user: Permission denied"
	if err := d.Validate(w, false); err == nil || err.Error() != want {
		t.Errorf("Validate: %v, want %q", err, want)
	}
	if err := d.JobDepend(w); err == nil || err.Error() != want {
		t.Errorf("JobDepend: %v, want %q", err, want)
	}
	if len(h.added) != 0 {
		t.Errorf("added %v", h.added)
	}
}

// TestAfterOwnerMayDependOnOtherUsersJob documents that the instance
// owner's jobs may wait on any user's job (flux-core's dependency-after
// refuses any userid mismatch, the owner's included).
func TestAfterOwnerMayDependOnOtherUsersJob(t *testing.T) {
	d, h := loadAfter(t)
	addTarget(h, bob, jobtap.StateSched)
	w := waiter(t, h, 1, ownerUID, "afterok:"+target.String())
	if err := d.Validate(w, true); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if err := d.JobDepend(w); err != nil {
		t.Errorf("JobDepend: %v", err)
	}
	if want := []depCall{{1, desc("after-success")}}; !reflect.DeepEqual(h.added, want) {
		t.Errorf("added %v, want %v", h.added, want)
	}
}

// TestAfterIgnoresOtherSchemes: begin-time and singleton belong to other
// plugins, and a job without dependencies is left alone.
func TestAfterIgnoresOtherSchemes(t *testing.T) {
	d, h := loadAfter(t)
	w := waiter(t, h, 1, alice, "begin-time:1700000000", "singleton")
	plain := h.addJob(&jobtap.Job{ID: 2, Userid: alice, State: jobtap.StateDepend, Jobspec: newSpec(t)})
	for _, j := range []*jobtap.Job{w, plain, {ID: 3}} {
		if err := d.Validate(j, false); err != nil {
			t.Errorf("job %d: Validate: %v", j.ID, err)
		}
		if err := d.JobDepend(j); err != nil {
			t.Errorf("job %d: JobDepend: %v", j.ID, err)
		}
	}
	if len(h.calls) != 0 {
		t.Errorf("calls %q, want none", h.calls)
	}
}

// TestAfterManyWaiters: several jobs on one target are each settled by
// their own scheme, and one job waiting on two targets is released by
// each separately.
func TestAfterManyWaiters(t *testing.T) {
	d, h := loadAfter(t)
	addTarget(h, alice, jobtap.StateRun)
	other := jobid.ID(1<<30 + 1)
	h.addJob(&jobtap.Job{ID: other, Userid: alice, State: jobtap.StateSched})
	ok := waiter(t, h, 1, alice, "afterok:"+target.String())
	notok := waiter(t, h, 2, alice, "afternotok:"+target.String())
	anyw := waiter(t, h, 3, alice, "afterany:"+target.String(), "afterany:"+other.String())
	for _, w := range []*jobtap.Job{ok, notok, anyw} {
		if err := d.JobDepend(w); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.added) != 4 {
		t.Fatalf("added %v, want 4", h.added)
	}
	endTarget(d, h, "FAILED", true, "")
	wantRemoved := []depCall{{2, desc("after-failure")}, {3, desc("after-finish")}}
	if !reflect.DeepEqual(h.removed, wantRemoved) {
		t.Errorf("removed %v, want %v", h.removed, wantRemoved)
	}
	wantExc := []raisedException{{1, "dependency", 0, "dependency " + desc("after-success") + " can never be satisfied: job " + target.String() + " result FAILED"}}
	if !reflect.DeepEqual(h.exceptions, wantExc) {
		t.Errorf("exceptions %v, want %v", h.exceptions, wantExc)
	}
	d.JobState(h.setJob(other, func(j *jobtap.Job) { j.State, j.Result = jobtap.StateInactive, "CANCELED" }), jobtap.StateSched)
	if want := append(wantRemoved, depCall{3, "after-finish=" + other.String()}); !reflect.DeepEqual(h.removed, want) {
		t.Errorf("removed %v, want %v", h.removed, want)
	}
}

// TestAfterWaiterThatEndedIsForgotten: a waiting job that becomes
// inactive before its target ends (canceled in DEPEND) must not be
// touched when the target ends: flux-core's dependency-after drops its
// references at the waiter's inactive state (release_dependency_references,
// "avoids prerequisite jobs from emitting erroneous dependencies for
// completed jobs").
func TestAfterWaiterThatEndedIsForgotten(t *testing.T) {
	d, h := loadAfter(t)
	addTarget(h, alice, jobtap.StateRun)
	w := waiter(t, h, 1, alice, "afterok:"+target.String(), "afternotok:"+target.String())
	if err := d.JobDepend(w); err != nil {
		t.Fatal(err)
	}
	d.JobState(h.setJob(1, func(j *jobtap.Job) { j.State, j.Result = jobtap.StateInactive, "CANCELED" }), jobtap.StateCleanup)
	endTarget(d, h, "COMPLETED", true, "")
	if len(h.removed)+len(h.exceptions) != 0 {
		t.Errorf("the ended waiter got removed %v exceptions %v", h.removed, h.exceptions)
	}
}
