package job

import (
	"errors"
	"strconv"
	"testing"
)

type progEv struct {
	name string
	ts   float64
	ctx  string
}

func follow(t *testing.T, evs []progEv) Progress {
	t.Helper()
	p := NewProgress()
	for _, e := range evs {
		if _, err := p.Apply(e.name, e.ts, []byte(e.ctx)); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
	}
	return p
}

var (
	evSubmit   = progEv{"submit", 1, `{"userid":1000,"urgency":16,"flags":0,"version":1}`}
	evValidate = progEv{"validate", 1.1, ""}
	evDepend   = progEv{"depend", 1.2, ""}
	evPriority = progEv{"priority", 1.3, `{"priority":16}`}
	evAlloc    = progEv{"alloc", 2, ""}
	evStart    = progEv{"start", 2.1, ""}
	evClean    = progEv{"clean", 4, ""}
)

func finish(ts float64, status int) progEv {
	return progEv{"finish", ts, `{"status":` + strconv.Itoa(status) + `}`}
}

func exception(ts float64, typ string, sev int, extra string) progEv {
	return progEv{"exception", ts, `{"type":"` + typ + `","severity":` + strconv.Itoa(sev) + `,"note":"n","userid":1000` + extra + `}`}
}

// TestProgress: RFC 21's edges, each event sequence to the state, the
// states entered and the result it ends with.
func TestProgress(t *testing.T) {
	run := []progEv{evSubmit, evValidate, evDepend, evPriority, evAlloc, evStart}
	cat := func(parts ...[]progEv) []progEv {
		var out []progEv
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	all := StateNew | StateDepend | StatePriority | StateSched | StateRun | StateCleanup | StateInactive
	for _, tc := range []struct {
		name    string
		evs     []progEv
		state   State
		entered State
		result  Result // checked once inactive
		success bool
	}{
		{"submitted", []progEv{evSubmit}, StateNew, StateNew, 0, false},
		{"pending", []progEv{evSubmit, evValidate, evDepend}, StatePriority, StateNew | StateDepend | StatePriority, 0, false},
		{"sched", []progEv{evSubmit, evValidate, evDepend, evPriority}, StateSched, StateNew | StateDepend | StatePriority | StateSched, 0, false},
		{"a second priority keeps SCHED", []progEv{evSubmit, evValidate, evDepend, evPriority, {"priority", 1.5, `{"priority":3}`}}, StateSched, StateNew | StateDepend | StatePriority | StateSched, 0, false},
		{"running", run, StateRun, StateNew | StateDepend | StatePriority | StateSched | StateRun, 0, false},
		{"completed", cat(run, []progEv{finish(3, 0), evClean}), StateInactive, all, ResultCompleted, true},
		{"failed", cat(run, []progEv{finish(3, 256), evClean}), StateInactive, all, ResultFailed, false},
		{"canceled while running", cat(run, []progEv{exception(2.5, "cancel", 0, ""), finish(3, 15), evClean}), StateInactive, all, ResultCanceled, false},
		{"timeout", cat(run, []progEv{exception(2.5, "timeout", 0, ""), finish(3, 9), evClean}), StateInactive, all, ResultTimeout, false},
		{"fatal exception before a 0 finish fails it", cat(run, []progEv{exception(2.5, "oom", 0, ""), finish(3, 0), evClean}), StateInactive, all, ResultFailed, false},
		{"a fatal exception after the finish leaves it completed", cat(run, []progEv{finish(3, 0), exception(3.5, "epilog", 0, ""), evClean}), StateInactive, all, ResultCompleted, true},
		{"a non-fatal exception changes nothing", cat(run, []progEv{exception(2.5, "warn", 3, ""), finish(3, 0), evClean}), StateInactive, all, ResultCompleted, true},
		{"canceled while pending", []progEv{evSubmit, evValidate, evDepend, exception(1.4, "cancel", 0, ""), evClean},
			StateInactive, StateNew | StateDepend | StatePriority | StateCleanup | StateInactive, ResultCanceled, false},
		{"the most severe exception names the result", cat(run, []progEv{exception(2.4, "warn", 2, ""), exception(2.5, "cancel", 0, ""), exception(2.6, "timeout", 1, ""), finish(3, 15), evClean}),
			StateInactive, all, ResultCanceled, false},
		{"alloc before SCHED does nothing", []progEv{evSubmit, evValidate, evAlloc}, StateDepend, StateNew | StateDepend, 0, false},
		{"flux-restart takes SCHED back to PRIORITY", []progEv{evSubmit, evValidate, evDepend, evPriority, {"flux-restart", 1.6, ""}},
			StatePriority, StateNew | StateDepend | StatePriority, 0, false},
		{"flux-restart then priority: SCHED again", []progEv{evSubmit, evValidate, evDepend, evPriority, {"flux-restart", 1.6, ""}, {"priority", 1.7, `{"priority":5}`}},
			StateSched, StateNew | StateDepend | StatePriority | StateSched, 0, false},
		{"flux-restart of a running job does nothing", cat(run, []progEv{{"flux-restart", 2.5, ""}}), StateRun, StateNew | StateDepend | StatePriority | StateSched | StateRun, 0, false},
		{"a requeue exception ends the run, not the job", cat(run, []progEv{exception(2.5, "preempt", 1, `,"requeue":true`)}),
			StateCleanup, StateNew | StateDepend | StatePriority | StateSched | StateRun | StateCleanup, 0, false},
		{"requeued: back to PRIORITY and on to SCHED", cat(run, []progEv{exception(2.5, "preempt", 1, `,"requeue":true`), finish(2.6, 15), {"requeue", 2.7, `{"count":1}`}, {"priority", 2.8, `{"priority":16}`}}),
			StateSched, StateNew | StateDepend | StatePriority | StateSched, 0, false},
		{"requeued, run again and completed", cat(run, []progEv{exception(2.5, "preempt", 1, `,"requeue":true`), finish(2.6, 15), {"requeue", 2.7, `{"count":1}`}, {"priority", 2.8, `{"priority":16}`},
			{"alloc", 3, ""}, finish(3.5, 0), evClean}), StateInactive, all, ResultCompleted, true},
		{"a requeue outside CLEANUP does nothing", cat(run, []progEv{{"requeue", 2.7, `{"count":1}`}}), StateRun, StateNew | StateDepend | StatePriority | StateSched | StateRun, 0, false},
		{"events of no concern", cat(run, []progEv{{"memo", 2.2, `{"a":1}`}, {"annotations", 2.3, `{"annotations":null}`}, {"release", 2.4, `{"ranks":"all","final":true}`}}),
			StateRun, StateNew | StateDepend | StatePriority | StateSched | StateRun, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := follow(t, tc.evs)
			if p.State != tc.state || p.Entered != tc.entered {
				t.Fatalf("state %v entered %b, want %v %b", p.State, p.Entered, tc.state, tc.entered)
			}
			if tc.state == StateInactive && (p.Result != tc.result || p.Success != tc.success) {
				t.Errorf("result %v success %v, want %v %v", p.Result, p.Success, tc.result, tc.success)
			}
		})
	}
}

// TestProgressTimes: each state's time is its first entry's, the
// requeue clears the lost run's, and the finish gives the wait status.
func TestProgressTimes(t *testing.T) {
	p := follow(t, []progEv{evSubmit, evValidate, evDepend, evPriority, evAlloc,
		exception(2.5, "preempt", 1, `,"requeue":true`), finish(2.6, 15)})
	if p.TSubmit != 1 || p.TDepend != 1.1 || p.TPriority != 1.2 || p.TSched != 1.3 || p.TRun != 2 || p.TCleanup != 2.5 || p.Waitstatus != 15 {
		t.Fatalf("before the requeue: %+v", p)
	}
	st, err := p.Apply("requeue", 2.7, []byte(`{"count":1}`))
	if err != nil || !st.Requeued || st.Entered != StatePriority {
		t.Fatalf("requeue: %+v %v", st, err)
	}
	if p.TPriority != 2.7 || p.TRun != 0 || p.TCleanup != 0 || p.Waitstatus != -1 || p.Has(StateRun) || !p.Has(StateDepend) {
		t.Fatalf("after the requeue: %+v", p)
	}
	for _, e := range []progEv{{"priority", 2.8, `{"priority":1}`}, {"alloc", 3, ""}, finish(3.5, 0), evClean} {
		if _, err := p.Apply(e.name, e.ts, []byte(e.ctx)); err != nil {
			t.Fatal(err)
		}
	}
	if p.TSched != 2.8 || p.TRun != 3 || p.TCleanup != 3.5 || p.TInactive != 4 || p.Waitstatus != 0 {
		t.Errorf("second run: %+v", p)
	}
	if !p.ExcOccurred || p.ExcSeverity != 1 {
		t.Errorf("the preemption is still the job's exception: %+v", p)
	}
	// a state is entered once: a second clean changes nothing
	if st, _ := p.Apply("clean", 9, nil); st.Entered != 0 || p.TInactive != 4 {
		t.Errorf("second clean: %+v, t_inactive %v", st, p.TInactive)
	}
}

// TestProgressStep: what Apply tells its caller.
func TestProgressStep(t *testing.T) {
	p := NewProgress()
	if st, _ := p.Apply("invalidate", 1, nil); !st.Invalid {
		t.Errorf("invalidate: %+v", st)
	}
	p = follow(t, []progEv{evSubmit, evValidate})
	st, err := p.Apply("exception", 1.5, []byte(`{"type":"cancel","severity":0,"note":"by hand","userid":7}`))
	if err != nil || !st.Worst || st.Exception != (Exception{Type: "cancel", Severity: 0, Note: "by hand", Userid: 7}) || st.Entered != StateCleanup {
		t.Fatalf("exception: %+v %v", st, err)
	}
	if st, _ := p.Apply("exception", 1.6, []byte(`{"type":"other","severity":2,"note":""}`)); st.Worst || st.Entered != 0 {
		t.Errorf("a milder exception: %+v", st)
	}
}

// TestProgressBadContext: a context that is not RFC 21's is an error
// naming the event; the event does what it can without it.
func TestProgressBadContext(t *testing.T) {
	for _, tc := range []struct {
		name, ctx string
		entered   State // what the event still does
	}{
		{"finish", ``, StateCleanup},
		{"finish", `{"status":"zero"}`, StateCleanup},
		{"finish", `{"status":4294967296}`, StateCleanup},
		{"finish", `{"status":0`, StateCleanup},
		{"exception", `{"type":"cancel"}`, 0},
		{"exception", `{"severity":0}`, 0},
		{"exception", `{"type":"cancel","severity":1000}`, 0},
		{"exception", `[]`, 0},
	} {
		p := follow(t, []progEv{evSubmit, evValidate, evDepend, evPriority, evAlloc})
		st, err := p.Apply(tc.name, 3, []byte(tc.ctx))
		if !errors.Is(err, errContext) || st.Entered != tc.entered {
			t.Errorf("%s %s: %+v, error %v", tc.name, tc.ctx, st, err)
		}
		if tc.name == "finish" && p.Waitstatus != -1 {
			t.Errorf("%s %s: wait status %d from a bad context", tc.name, tc.ctx, p.Waitstatus)
		}
		if tc.name == "exception" && p.ExcOccurred {
			t.Errorf("%s %s: a bad exception counted", tc.name, tc.ctx)
		}
	}
}

// FuzzProgressApply: no context makes Apply panic, and whatever it
// reads, the job is in one state it has entered.
func FuzzProgressApply(f *testing.F) {
	for _, c := range []string{`{"status":0}`, `{"type":"cancel","severity":0}`, `{"type":"preempt","severity":1,"requeue":true}`, ``, `{`, `{"status":-1}`} {
		f.Add("finish", c)
		f.Add("exception", c)
	}
	f.Fuzz(func(t *testing.T, name string, ctx string) {
		p := follow(t, []progEv{evSubmit, evValidate, evDepend, evPriority, evAlloc})
		p.Apply(name, 3, []byte(ctx))
		p.Apply("requeue", 4, nil)
		p.Apply("clean", 5, nil)
		if p.Entered&p.State == 0 {
			t.Fatalf("state %v not among those entered %b", p.State, p.Entered)
		}
	})
}
