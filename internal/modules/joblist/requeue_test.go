package joblist

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// TestRequeueRecord: a requeued job's record follows the job manager's
// backward edge (CLEANUP -> PRIORITY on the requeue event) to SCHED and
// a second run, forgetting where the first ran; it is listed once at
// every step, however many times it is requeued, with its submit time;
// its second run completing makes it COMPLETED (the preempt exception
// was not fatal), and shows as the job's exception.
func TestRequeueRecord(t *testing.T) {
	x := newIndex()
	r := x.slab.get(1)
	x.jobs[1] = r
	ts := 100.0
	apply := func(name, ctx string) {
		t.Helper()
		ts++
		ev := &event{Timestamp: ts, Name: name}
		if ctx != "" {
			ev.Context = []byte(ctx)
		}
		if !r.apply(ev) {
			t.Fatalf("%s: record dropped", name)
		}
		if name == "alloc" {
			r.setR([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0"}}],"nodelist":["node3"]}}`))
		}
		x.relist(r, true)
	}
	listed := func(want job.State) {
		t.Helper()
		if r.State != want {
			t.Fatalf("state %s, want %s", r.State, want)
		}
		n := 0
		for _, l := range []*orderedList{&x.pending, &x.running, &x.inactive} {
			for _, q := range l.ordered() {
				if q == r {
					n++
				}
			}
		}
		if n != 1 {
			t.Fatalf("in %s the record is listed %d times", want, n)
		}
	}
	apply("submit", `{"userid":1000,"urgency":16,"flags":0,"version":1}`)
	apply("validate", "")
	apply("depend", "")
	apply("priority", `{"priority":16}`)
	listed(job.StateSched)
	for i := 1; i <= 3; i++ {
		apply("alloc", "")
		apply("start", "")
		listed(job.StateRun)
		if r.nodelist == "" {
			t.Fatal("no nodelist while running")
		}
		apply("exception", `{"type":"preempt","severity":1,"note":"preempted by job ƒX; requeue","userid":0,"requeue":true}`)
		listed(job.StateCleanup)
		apply("finish", `{"status":15}`)
		apply("release", `{"ranks":"all","final":true}`)
		apply("free", "")
		apply("requeue", `{"count":1}`)
		listed(job.StatePriority)
		if r.nodelist != "" || r.ranks != "" || r.Waitstatus != -1 {
			t.Fatalf("requeued record keeps its run: nodelist %q ranks %q waitstatus %d", r.nodelist, r.ranks, r.Waitstatus)
		}
		apply("priority", `{"priority":16}`)
		listed(job.StateSched)
	}
	apply("alloc", "")
	apply("start", "")
	listed(job.StateRun)
	apply("finish", `{"status":0}`)
	listed(job.StateCleanup)
	apply("release", `{"ranks":"all","final":true}`)
	apply("free", "")
	apply("clean", "")
	listed(job.StateInactive)
	if r.Result != job.ResultCompleted || r.TSubmit != 101 || r.excType() != "preempt" {
		t.Fatalf("result %v, t_submit %v, exception %q", r.Result, r.TSubmit, r.excType())
	}
}
