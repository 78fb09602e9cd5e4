package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPreemptRequeue: a running job preempted in requeue mode is killed,
// freed and goes back to the queue under its id, runs again, and once it
// was requeued max-requeue times the next preemption cancels it with a
// note naming the limit.
func TestPreemptRequeue(t *testing.T) {
	e := start(t, false)
	ctx := brokertest.Ctx(t)
	id := e.submit("sleep", 16, nil)
	e.waitEvent(id, "start")
	preempt := func(mode string, max int) (wire.PreemptResponse, error) {
		var resp wire.PreemptResponse
		err := e.h.Call(ctx, "job-manager.preempt", flux.NodeidAny,
			wire.PreemptRequest{ID: id, Note: "preempted by job ƒtest", Mode: mode, MaxRequeue: max}, &resp)
		return resp, err
	}
	if _, err := preempt("suspend", 1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "preempt-mode") {
		t.Fatalf("unknown mode: %v", err)
	}
	if _, err := preempt("requeue", wire.MaxRequeueLimit+1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "max-requeue") {
		t.Fatalf("max-requeue beyond its bound: %v", err)
	}
	if resp, err := preempt("requeue", 1); err != nil || !resp.Requeued {
		t.Fatalf("preempt: %+v %v", resp, err)
	}
	evs := waitCount(t, e, id, "start", 2)
	run1 := []string{"submit", "validate", "depend", "priority", "alloc", "start", "exception", "finish", "release", "free", "requeue", "priority", "alloc", "start"}
	if !eq(evs, run1...) {
		t.Fatalf("events: %v", evs)
	}
	log := e.kvs.Value(jobDir(id) + ".eventlog")
	if !strings.Contains(string(log), `"type":"preempt","severity":1,"note":"preempted by job ƒtest; requeue 1 of max-requeue=1"`) ||
		!strings.Contains(string(log), `"name":"requeue","context":{"count":1}`) {
		t.Fatalf("eventlog:\n%s", log)
	}
	if R := e.kvs.Value(jobDir(id) + ".requeue.1.R"); len(R) == 0 {
		t.Error("the first run's R was not kept as requeue.1.R")
	}
	// requeued once already: the limit cancels it
	if resp, err := preempt("requeue", 1); err != nil || resp.Requeued {
		t.Fatalf("preempt past max-requeue: %+v %v", resp, err)
	}
	e.waitEvent(id, "clean")
	log = e.kvs.Value(jobDir(id) + ".eventlog")
	if !strings.Contains(string(log), `"type":"preempt","severity":0,"note":"preempted by job ƒtest; not requeued: requeued 1 times already (max-requeue=1)"`) {
		t.Fatalf("eventlog:\n%s", log)
	}
	if _, err := preempt("requeue", 1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("preempt of an inactive job: %v", err)
	}
}

// TestPreemptRequeueCanceled: a cancel while a requeue is under way ends
// the job instead (CANCELED, no requeue event).
func TestPreemptRequeueCanceled(t *testing.T) {
	e := start(t, false)
	ctx := brokertest.Ctx(t)
	id := e.submit("sleep", 16, map[string]any{"preempt-mode": "requeue"})
	e.waitEvent(id, "start")
	// the job's own preempt-mode overrides the scheduler's cancel
	var resp wire.PreemptResponse
	if err := e.h.Call(ctx, "job-manager.preempt", flux.NodeidAny,
		wire.PreemptRequest{ID: id, Note: "preempted", Mode: wire.PreemptCancel, MaxRequeue: 5}, &resp); err != nil || !resp.Requeued {
		t.Fatalf("preempt: %+v %v", resp, err)
	}
	waitCount(t, e, id, "start", 2)
	if err := e.h.Call(ctx, "job-manager.raise", flux.NodeidAny, map[string]any{"id": id, "type": "cancel", "severity": 0}, nil); err != nil {
		t.Fatal(err)
	}
	evs := e.waitEvent(id, "clean")
	if n := count(evs, "requeue"); n != 1 {
		t.Fatalf("%d requeue events: %v", n, evs)
	}
}

func count(evs []string, name string) int {
	n := 0
	for _, ev := range evs {
		if ev == name {
			n++
		}
	}
	return n
}

// waitCount waits until job id has posted event name n times and
// returns its events.
func waitCount(t *testing.T, e *env, id jobid.ID, name string, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if evs := e.waitEvent(id, name); count(evs, name) >= n {
			return evs
		}
		select {
		case <-e.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("job %s: fewer than %d %s events", id.String(), n, name)
		}
	}
}

// TestReplayRequeue: the eventlog of a requeued job, replayed at a
// restart, reaches the state the job manager was in at each point: a
// requeue under way (CLEANUP, to be requeued, resources held or freed),
// requeued (PRIORITY, then SCHED, nothing of the first run left), in its
// second run, and done (COMPLETED: the preempt exception was not fatal);
// a cancel during the requeue ends it CANCELED.
func TestReplayRequeue(t *testing.T) {
	ev := func(name, ctx string) string {
		if ctx == "" {
			return fmt.Sprintf(`{"timestamp":1,"name":%q}`, name)
		}
		return fmt.Sprintf(`{"timestamp":1,"name":%q,"context":%s}`, name, ctx)
	}
	run := []string{ev("alloc", ""), ev("start", "")}
	pending := []string{ev("validate", ""), ev("depend", ""), ev("priority", `{"priority":16}`)}
	requeueExc := ev("exception", `{"type":"preempt","severity":1,"note":"preempted by job ƒX; requeue 1 of max-requeue=5","userid":0,"requeue":true}`)
	killed := []string{ev("finish", `{"status":15}`), ev("release", `{"ranks":"all","final":true}`)}
	join := func(parts ...any) []string {
		var out []string
		for _, p := range parts {
			switch x := p.(type) {
			case string:
				out = append(out, x)
			case []string:
				out = append(out, x...)
			}
		}
		return out
	}
	type want struct {
		state     jobtap.State
		requeuing bool
		requeues  int
		hasAlloc  bool
		started   bool
		finished  bool
		result    string
	}
	for _, tc := range []struct {
		name string
		log  []string
		want want
	}{
		{"running", join(pending, run), want{state: jobtap.StateRun, hasAlloc: true, started: true}},
		{"requeue raised", join(pending, run, requeueExc), want{state: jobtap.StateCleanup, requeuing: true, hasAlloc: true, started: true}},
		{"killed", join(pending, run, requeueExc, killed), want{state: jobtap.StateCleanup, requeuing: true, hasAlloc: true, started: true, finished: true}},
		{"freed", join(pending, run, requeueExc, killed, ev("free", "")), want{state: jobtap.StateCleanup, requeuing: true, started: true, finished: true}},
		{"requeued", join(pending, run, requeueExc, killed, ev("free", ""), ev("requeue", `{"count":1}`)), want{state: jobtap.StatePriority, requeues: 1}},
		{"pending again", join(pending, run, requeueExc, killed, ev("free", ""), ev("requeue", `{"count":1}`), ev("priority", `{"priority":16}`)), want{state: jobtap.StateSched, requeues: 1}},
		{"second run", join(pending, run, requeueExc, killed, ev("free", ""), ev("requeue", `{"count":1}`), ev("priority", `{"priority":16}`), run),
			want{state: jobtap.StateRun, requeues: 1, hasAlloc: true, started: true}},
		{"done", join(pending, run, requeueExc, killed, ev("free", ""), ev("requeue", `{"count":1}`), ev("priority", `{"priority":16}`), run,
			ev("finish", `{"status":0}`), ev("release", `{"ranks":"all","final":true}`), ev("free", ""), ev("clean", "")),
			want{state: jobtap.StateInactive, requeues: 1, started: true, finished: true, result: "COMPLETED"}},
		{"canceled while requeued", join(pending, run, requeueExc, ev("exception", `{"type":"cancel","severity":0,"userid":0}`), killed, ev("free", ""), ev("clean", "")),
			want{state: jobtap.StateInactive, started: true, finished: true, result: "CANCELED"}},
		// a user's own non-fatal exception named preempt is no requeue
		{"not a requeue", join(pending, run, ev("exception", `{"type":"preempt","severity":1,"userid":1000}`)), want{state: jobtap.StateRun, hasAlloc: true, started: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(ev("submit", `{"userid":0,"urgency":16,"flags":0,"version":1}`) + "\n" + strings.Join(tc.log, "\n") + "\n")
			evs, err := eventlog.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			m := &manager{}
			j := newJob(1, 0, 16, 0, evs[0].Timestamp)
			m.applyEvents(j, evs[1:])
			got := want{state: j.State, requeuing: j.requeuing, requeues: j.requeues, hasAlloc: j.hasAlloc,
				started: j.started, finished: j.finished}
			if j.State == jobtap.StateInactive {
				got.result = j.result()
			}
			if got != tc.want {
				t.Errorf("replayed to %+v, want %+v", got, tc.want)
			}
			if j.TSubmit != 1 {
				t.Errorf("t_submit %v, want the submit event's", j.TSubmit)
			}
		})
	}
}

// TestReplayRequeueYieldTo: the preemptor named in a requeue exception's
// context is replayed (the requeued job yields to it after a restart),
// and is the job's yield target only while that job is pending.
func TestReplayRequeueYieldTo(t *testing.T) {
	raw := []byte(`{"timestamp":1,"name":"submit","context":{"userid":0,"urgency":16,"flags":0,"version":1}}
{"timestamp":1,"name":"validate"}
{"timestamp":1,"name":"depend"}
{"timestamp":1,"name":"priority","context":{"priority":16}}
{"timestamp":1,"name":"alloc"}
{"timestamp":1,"name":"start"}
{"timestamp":1,"name":"exception","context":{"type":"preempt","severity":1,"note":"preempted by job ƒX; requeue 1 of max-requeue=5","userid":0,"requeue":true,"preemptor":"ƒ8"}}
`)
	evs, err := eventlog.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	m := &manager{jobs: map[jobid.ID]*job{}}
	j := newJob(1, 0, 16, 0, 1)
	m.applyEvents(j, evs[1:])
	if j.yieldTo != 7 || !j.requeuing {
		t.Fatalf("replayed: yieldTo %v requeuing %v", j.yieldTo, j.requeuing)
	}
	if p := m.yieldTarget(j); p != nil {
		t.Errorf("an unknown preemptor is a target: %v", p.ID)
	}
	p := newJob(7, 0, 16, 0, 2)
	m.jobs[7] = p
	for state, want := range map[jobtap.State]bool{jobtap.StateNew: false, jobtap.StateDepend: true, jobtap.StatePriority: true,
		jobtap.StateSched: true, jobtap.StateRun: false, jobtap.StateCleanup: false, jobtap.StateInactive: false} {
		p.State = state
		if got := m.yieldTarget(j) != nil; got != want {
			t.Errorf("preemptor in %s: a target %v, want %v", state, got, want)
		}
	}
}

// yieldSched is a scheduler that grants every alloc request except a
// job named "hold" and a request with yield_to (both wait), and reports
// each request's id and yield_to.
type yieldSched struct{ allocs chan [2]jobid.ID }

func (*yieldSched) Name() string { return "sched" }
func (s *yieldSched) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("sched.alloc", func(r *flux.Request) {
		var req struct {
			ID      jobid.ID `json:"id"`
			YieldTo jobid.ID `json:"yield_to"`
			Jobspec struct {
				Tasks []struct {
					Command []string `json:"command"`
				} `json:"tasks"`
			} `json:"jobspec"`
		}
		r.Decode(&req)
		s.allocs <- [2]jobid.ID{req.ID, req.YieldTo}
		if req.YieldTo != 0 || req.Jobspec.Tasks[0].Command[0] == "hold" {
			return
		}
		r.Respond(map[string]any{"id": req.ID, "type": 0,
			"R": json.RawMessage(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`)})
	})
	h.HandleFunc("sched.cancel", func(r *flux.Request) {})
	h.HandleFunc("sched.free", func(r *flux.Request) { r.Respond(nil) })
	h.HandleFunc("sched.prioritize", func(r *flux.Request) {})
	go func() {
		if err := h.Call(ctx, "job-manager.sched-hello", flux.NodeidAny, nil, nil); err != nil {
			return
		}
		h.Call(ctx, "job-manager.sched-ready", flux.NodeidAny, map[string]any{"mode": "unlimited"}, nil)
	}()
	return h.Serve(ctx)
}

// TestRequeueYieldTo: a job requeued on preemption asks the scheduler
// for resources naming the pending job it was preempted for (yield_to),
// and when both are sent again (a scheduler loaded again, as after a
// restart) the preemptor's request goes first although the requeued
// job, older, sorts ahead of it.
func TestRequeueYieldTo(t *testing.T) {
	allocs := make(chan [2]jobid.ID, 16)
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", New)
	reg.Register("sched", func() module.Module { return &yieldSched{allocs: allocs} })
	reg.Register("job-exec", func() module.Module { return &fakeExec{} })
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "job-manager"}, {Name: "sched"}, {Name: "job-exec"}}})
	e := &env{t: t, h: inst.Handle(0), kvs: fk, events: map[jobid.ID][]string{}, notify: make(chan struct{}, 1)}
	e.gen, _ = jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	ctx := brokertest.Ctx(t)
	next := func() [2]jobid.ID {
		t.Helper()
		select {
		case a := <-allocs:
			return a
		case <-time.After(20 * time.Second): // hang guard
			t.Fatal("no sched.alloc request")
		}
		return [2]jobid.ID{}
	}
	victim := e.submit("sleep", 16, nil)
	if a := next(); a != [2]jobid.ID{victim, 0} {
		t.Fatalf("the victim's request: %v", a)
	}
	preemptor := e.submit("hold", 16, nil)
	if a := next(); a != [2]jobid.ID{preemptor, 0} {
		t.Fatalf("the preemptor's request: %v", a)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(string(e.kvs.Value(jobDir(victim)+".eventlog")), `"name":"start"`); {
		if time.Now().After(deadline) { // hang guard
			t.Fatal("the victim did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var resp wire.PreemptResponse
	if err := e.h.Call(ctx, "job-manager.preempt", flux.NodeidAny, wire.PreemptRequest{ID: victim,
		Note: "preempted by job " + preemptor.String(), Mode: wire.PreemptRequeue, MaxRequeue: 5, For: preemptor}, &resp); err != nil || !resp.Requeued {
		t.Fatalf("preempt: %+v %v", resp, err)
	}
	if a := next(); a != [2]jobid.ID{victim, preemptor} {
		t.Fatalf("the requeued job's request: %v, want it to name %s", a, preemptor.String())
	}
	if log := e.kvs.Value(jobDir(victim) + ".eventlog"); !strings.Contains(string(log), fmt.Sprintf(`"preemptor":%q`, preemptor.String())) {
		t.Fatalf("eventlog:\n%s", log)
	}
	// a scheduler loaded again gets both again, the preemptor's first
	if err := e.h.Call(ctx, "module.remove", 0, map[string]any{"name": "sched"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Call(ctx, "module.load", 0, map[string]any{"name": "sched"}, nil); err != nil {
		t.Fatal(err)
	}
	if a, b := next(), next(); a != [2]jobid.ID{preemptor, 0} || b != [2]jobid.ID{victim, preemptor} {
		t.Fatalf("after the scheduler's reload: %v then %v", a, b)
	}
}
