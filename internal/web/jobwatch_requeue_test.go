package web

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestTrackRequeue: a preempted, requeued job goes back to PRIORITY
// and SCHED without the lost run's nodes, then runs and completes.
func TestTrackRequeue(t *testing.T) {
	tr := newJobTrack(7)
	tr.apply(&wire.JournalEntry{ID: 7, Events: submitted(7, 1000, "x").Events})
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(2, "alloc", "")},
		R: []byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a,b"]}}`)})
	if tr.p.State != job.StateRun || tr.Nnodes != 2 {
		t.Fatalf("after alloc: state %v nnodes %d", tr.p.State, tr.Nnodes)
	}
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{
		ev(3, "exception", `{"type":"preempt","severity":1,"note":"preempted by job f2; requeue 1 of max-requeue=5","requeue":true}`),
	}})
	if tr.p.State != job.StateCleanup {
		t.Fatalf("the requeue exception leaves the job in %v, not CLEANUP as job-list has it", tr.p.State)
	}
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{
		ev(3.1, "finish", `{"status":15}`), ev(3.2, "requeue", `{"count":1}`), ev(3.3, "priority", `{"priority":16}`),
	}})
	if tr.p.State != job.StateSched || tr.Nnodes != 0 || tr.Nodelist != "" || tr.p.TRun != 0 || tr.p.Waitstatus != -1 {
		t.Fatalf("after requeue: %+v", *tr)
	}
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(4, "alloc", "")},
		R: []byte(`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0"}}],"nodelist":["b"]}}`)})
	tr.apply(&wire.JournalEntry{ID: 7, Events: []wire.JournalEvent{ev(5, "finish", `{"status":0}`), ev(5.1, "clean", "")}})
	if tr.p.State != job.StateInactive || tr.p.Result != job.ResultCompleted || tr.Nodelist != "b" || tr.p.TRun != 4 {
		t.Errorf("second run: state %v result %v nodelist %q t_run %v", tr.p.State, tr.p.Result, tr.Nodelist, tr.p.TRun)
	}
	// the record is job-list's attributes: every state's time, the
	// result once inactive
	var rec map[string]any
	if err := json.Unmarshal(tr.appendJSON(nil), &rec); err != nil {
		t.Fatalf("record %s: %v", tr.appendJSON(nil), err)
	}
	want := map[string]any{"id": 7.0, "userid": 1000.0, "urgency": 16.0, "priority": 16.0, "state": 64.0, "result": 1.0,
		"nnodes": 1.0, "nodelist": "b", "waitstatus": 0.0,
		"t_submit": 1.0, "t_depend": 1.1, "t_priority": 3.2, "t_sched": 3.3, "t_run": 4.0, "t_cleanup": 5.0, "t_inactive": 5.1}
	if !reflect.DeepEqual(want, rec) {
		t.Errorf("record %v, want %v", rec, want)
	}
}

// TestTrackSpecAndR: the name, queue, node count and node list the
// jobs table shows, read without decoding the jobspec, and R's one-node
// shortcut agreeing with the whole parse.
func TestTrackSpecAndR(t *testing.T) {
	for _, tc := range []struct{ spec, name, queue string }{
		{`{"attributes":{"system":{"environment":{"A":"x"},"job":{"name":"sim"},"queue":"batch"}},"tasks":[{"command":["/bin/true"]}]}`, "sim", "batch"},
		{`{"tasks":[{"command":["/usr/bin/hostname","-s"]}],"attributes":{"system":{"cwd":"/"}}}`, "hostname", ""},
		{`{"tasks":[],"attributes":{}}`, "", ""},
		{`{"tasks":"x"`, "", ""},
	} {
		tr := newJobTrack(1)
		tr.setJobspec([]byte(tc.spec))
		if tr.Name != tc.name || tr.Queue != tc.queue {
			t.Errorf("%s: name %q queue %q, want %q %q", tc.spec, tr.Name, tr.Queue, tc.name, tc.queue)
		}
	}
	for _, tc := range []struct {
		r        string
		nnodes   int
		nodelist string
	}{
		{`{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"7"}}],"nodelist":["node3"]}}`, 1, "node3"},
		{`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a,b"]}}`, 2, "a,b"},
		{`{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0"}}],"nodelist":["n[0-3]"]}}`, 4, "n[0-3]"},
		{`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}},{"rank":"2","children":{"core":"1"}}],"nodelist":["x,z"]}}`, 2, "x,z"},
		{`{"version":1,"execution":{"R_lite":[{"rank":"5","children":{"core":"0"}}]}}`, 1, ""},
	} {
		tr := newJobTrack(1)
		tr.setR([]byte(tc.r))
		if tr.Nnodes != tc.nnodes || (tc.nodelist != "" && tr.Nodelist != tc.nodelist) {
			t.Errorf("%s: nnodes %d nodelist %q, want %d %q", tc.r, tr.Nnodes, tr.Nodelist, tc.nnodes, tc.nodelist)
		}
		// the whole parse agrees
		r, err := rset.Parse([]byte(tc.r))
		if err != nil {
			t.Fatalf("%s: %v", tc.r, err)
		}
		want := ""
		if r.HasHostnames() {
			want = r.Nodelist().String()
		}
		if r.Ranks().Count() != tr.Nnodes || want != tr.Nodelist {
			t.Errorf("%s: read %d %q, parsed %d %q", tc.r, tr.Nnodes, tr.Nodelist, r.Ranks().Count(), want)
		}
	}
}

// FuzzTrackSpecAndR: no jobspec or R makes the track panic.
func FuzzTrackSpecAndR(f *testing.F) {
	f.Add(`{"attributes":{"system":{"job":{"name":"a"}}},"tasks":[{"command":["b"]}]}`)
	f.Add(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["n0"]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		tr := newJobTrack(1)
		tr.setJobspec([]byte(s))
		tr.setR([]byte(s))
		if tr.Nnodes < 0 {
			t.Fatalf("%q: nnodes %d", s, tr.Nnodes)
		}
	})
}
