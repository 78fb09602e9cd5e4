package jobmanager

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/jobtap"
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
