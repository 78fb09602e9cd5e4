package web

import (
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// TestTrackRequeue: a preempted, requeued job goes back to PRIORITY
// and SCHED without the lost run's nodes, then runs and completes.
func TestTrackRequeue(t *testing.T) {
	var tr jobTrack
	tr.apply(&wire.JournalEntry{ID: 7, Events: submitted(7, 1000, "x").Events})
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(2, "alloc", "")},
		R: []byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a,b"]}}`)})
	if job.State(tr.State) != job.StateRun || tr.Nnodes != 2 {
		t.Fatalf("after alloc: state %v nnodes %d", job.State(tr.State), tr.Nnodes)
	}
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{
		ev(3, "exception", `{"type":"preempt","severity":1,"note":"preempted by job f2; requeue 1 of max-requeue=5","requeue":true}`),
		ev(3.1, "finish", `{"status":15}`), ev(3.2, "requeue", `{"count":1}`), ev(3.3, "priority", `{"priority":16}`),
	}})
	if job.State(tr.State) != job.StateSched || tr.Nnodes != 0 || tr.Nodelist != "" || tr.TRun != 0 || tr.Waitstatus != nil {
		t.Fatalf("after requeue: %+v", tr)
	}
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(4, "alloc", "")},
		R: []byte(`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0"}}],"nodelist":["b"]}}`)})
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(5, "finish", `{"status":0}`), ev(5.1, "clean", "")}})
	if job.State(tr.State) != job.StateInactive || job.Result(tr.Result) != job.ResultCompleted || tr.Nodelist != "b" || tr.TRun != 4 {
		t.Errorf("second run: state %v result %v nodelist %q t_run %v", job.State(tr.State), tr.Result, tr.Nodelist, tr.TRun)
	}
}
