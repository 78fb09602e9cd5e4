package sched

import (
	"slices"
	"testing"
)

// backfillCase runs one pass of a policy over testPool (4 nodes × 4
// cores) with running allocations made by run, and returns the IDs of the
// jobs started and the reservations made.
func backfillCase(t *testing.T, pol Policy, running []Request, jobs []*Job) ([]uint64, []Reservation) {
	t.Helper()
	p := testPool(t)
	var allocs []*Alloc
	for i := range running {
		a, err := p.Allocate(&running[i], 0)
		if err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, a)
	}
	var resv []Reservation
	if b, ok := pol.(*Backfill); ok {
		b.Running = func() []*Alloc { return allocs }
		b.Reservations = func(r []Reservation) { resv = r }
	}
	q := NewQueue()
	for _, j := range jobs {
		if err := q.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	_, freeBefore, _, _ := p.Counts()
	var started []uint64
	taken := 0
	for _, d := range pol.Schedule(q, p, 1) {
		started = append(started, d.Job.ID)
		taken += d.Alloc.NCores()
	}
	// the pool holds exactly the running and started jobs' cores: the
	// reservation search gave back everything it tried
	if _, free, _, _ := p.Counts(); free != freeBefore-taken {
		t.Errorf("%s: %d cores free after the pass, want %d", pol.Name(), free, freeBefore-taken)
	}
	slices.Sort(started)
	return started, resv
}

func job(id uint64, prio int64, req Request) *Job {
	return &Job{ID: id, Priority: prio, TSubmit: float64(id), Req: &req}
}

// TestBackfillProtectsHead: the head job needs the whole machine when
// the running job ends at t=100. FCFS lets a long 4-core job take the
// free node and delay it; EASY and conservative only let the short job,
// which ends before t=100, backfill.
func TestBackfillProtectsHead(t *testing.T) {
	running := []Request{{Nodes: 3, Slots: 3, SlotCores: 4, Duration: 100}}
	jobs := func() []*Job {
		return []*Job{
			job(1, 3, Request{Nodes: 4, Slots: 4, SlotCores: 4, Duration: 50}),
			job(2, 2, Request{Slots: 4, SlotCores: 1, Duration: 200}),
			job(3, 1, Request{Slots: 4, SlotCores: 1, Duration: 50}),
		}
	}
	if got, _ := backfillCase(t, &FCFS{}, running, jobs()); !slices.Equal(got, []uint64{2}) {
		t.Errorf("fcfs started %v, want [2]", got)
	}
	for _, name := range []string{"easy", "conservative"} {
		got, resv := backfillCase(t, NewBackfill(name, 0, 0), running, jobs())
		if !slices.Equal(got, []uint64{3}) {
			t.Errorf("%s started %v, want [3]", name, got)
		}
		if len(resv) == 0 || resv[0].Job.ID != 1 || resv[0].Start != 100 || resv[0].End != 150 || resv[0].Alloc.NCores() != 16 {
			t.Errorf("%s: head reservation %+v, want job 1 at 100-150 on 16 cores", name, resv)
		}
	}
}

// TestConservativeProtectsEveryJob: the head job will take nodes 0-2 at
// t=100, the next one all four nodes at t=150. A long job on node 3
// delays only the second: EASY starts it, conservative and hybrid (2
// reservations) do not.
func TestConservativeProtectsEveryJob(t *testing.T) {
	running := []Request{{Nodes: 3, Slots: 3, SlotCores: 4, Duration: 100}}
	jobs := func() []*Job {
		return []*Job{
			job(1, 3, Request{Nodes: 3, Slots: 3, SlotCores: 4, Duration: 50}),
			job(2, 2, Request{Nodes: 4, Slots: 4, SlotCores: 4, Duration: 50}),
			job(3, 1, Request{Slots: 4, SlotCores: 1, Duration: 500}),
		}
	}
	got, resv := backfillCase(t, NewBackfill("easy", 0, 0), running, jobs())
	if !slices.Equal(got, []uint64{3}) || len(resv) != 1 {
		t.Errorf("easy started %v with %d reservations, want [3] and 1", got, len(resv))
	}
	for _, pol := range []*Backfill{NewBackfill("conservative", 0, 0), NewBackfill("hybrid", 0, 2)} {
		got, resv := backfillCase(t, pol, running, jobs())
		if len(got) != 0 {
			t.Errorf("%s started %v, want nothing", pol.Name(), got)
		}
		if len(resv) < 2 || resv[0].Start != 100 || resv[1].Job.ID != 2 || resv[1].Start != 150 {
			t.Errorf("%s reservations %+v, want job 1 at 100, job 2 at 150", pol.Name(), resv)
		}
	}
}

// TestBackfillUnlimitedJobs: a running job without an expiration never
// frees its resources, so a job needing them gets no reservation and
// does not block others.
func TestBackfillUnlimitedJobs(t *testing.T) {
	running := []Request{{Nodes: 3, Slots: 3, SlotCores: 4}}
	jobs := []*Job{
		job(1, 3, Request{Nodes: 4, Slots: 4, SlotCores: 4, Duration: 50}),
		job(2, 2, Request{Slots: 4, SlotCores: 1}),
	}
	got, resv := backfillCase(t, NewBackfill("conservative", 0, 0), running, jobs)
	if !slices.Equal(got, []uint64{2}) || len(resv) != 0 {
		t.Errorf("started %v, reservations %+v; want [2] and none", got, resv)
	}
}
