package accounting

import (
	"math"
	"reflect"
	"testing"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/archivedb"
)

func TestDayUsage(t *testing.T) {
	const day = 86400.0
	d0 := float64(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC).Unix())
	type job struct {
		user, bank         string
		ncores             int
		run, end, inactive float64
	}
	jobs := []job{
		{"alice", "physics", 2, d0 + 22*3600, d0 + day + 2*3600, d0 + day + 2*3600 + 1}, // over midnight
		{"alice", "physics", 1, d0 + 3600, d0 + 2*3600, d0 + 2*3600},
		{"bob", "chem", 4, d0 + day, d0 + day + 900, d0 + day + 901},
		{"bad name", "chem", 4, d0, d0 + 60, d0 + 60},   // no such association
		{"carol", "chem", 4, 0, d0 + 60, d0 + 60},       // never ran
		{"carol", "chem", 4, d0 + 60, d0 + 30, d0 + 60}, // ended before it ran
	}
	run := func(since, mark float64) *dayUsage {
		d := newDayUsage(time.UTC, since, mark)
		for _, j := range jobs {
			d.add(j.user, j.bank, j.ncores, j.run, j.end, j.inactive)
		}
		return d
	}
	all := run(0, 0)
	want := []acct.UsagePeriod{
		{Username: "alice", Bank: "physics", Start: int64(d0), Jobs: 1, CoreHours: 1 + 4},
		{Username: "alice", Bank: "physics", Start: int64(d0 + day), Jobs: 1, CoreHours: 4},
		{Username: "bob", Bank: "chem", Start: int64(d0 + day), Jobs: 1, CoreHours: 1},
	}
	if got := all.periods(); !reflect.DeepEqual(got, want) {
		t.Errorf("every day:\n got %+v\nwant %+v", got, want)
	}
	if again := run(0, 0).periods(); !reflect.DeepEqual(again, want) {
		t.Errorf("the same jobs again: %+v", again)
	}
	if all.maxInactive != d0+day+2*3600+1 {
		t.Errorf("maxInactive = %f", all.maxInactive)
	}
	// a window starting inside day 0 holds only day 1 whole
	if got := run(d0+3600, 0).periods(); !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("since the middle of day 0:\n got %+v\nwant %+v", got, want[1:])
	}
	// after a pass that saw bob's job, only the days of jobs newer than
	// it are rewritten: alice's over-midnight job ran on both days
	if got := run(0, d0+day+2*3600).periods(); !reflect.DeepEqual(got, want) {
		t.Errorf("after bob's job:\n got %+v\nwant %+v", got, want)
	}
	if got := run(0, d0+day+3*3600).periods(); len(got) != 0 {
		t.Errorf("nothing new: %+v", got)
	}
}

// Days follow the local clock: the day the clocks go forward is 23
// hours long.
func TestDayUsageDST(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	start := time.Date(2025, 3, 30, 0, 0, 0, 0, loc) // 23 hours
	end := time.Date(2025, 3, 31, 0, 0, 0, 0, loc)
	d := newDayUsage(loc, 0, 0)
	d.add("alice", "physics", 1, float64(start.Unix()), float64(end.Unix()), float64(end.Unix()))
	got := d.periods()
	if len(got) != 2 || got[0].Start != start.Unix() || got[0].CoreHours != 23 || got[1].Start != end.Unix() || got[1].Jobs != 1 {
		t.Errorf("over the change of clocks: %+v", got)
	}
}

// TestChargeRequeuedRuns: a job requeued on preemption is charged for
// every run, each decayed from its own end, and counted once in the
// day's jobs.
func TestChargeRequeuedRuns(t *testing.T) {
	const h = 3600.0
	d0 := float64(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC).Unix())
	r := &archivedb.Record{Ncores: 2, TRun: d0 + 3*h, TCleanup: d0 + 4*h, TInactive: d0 + 4*h,
		RequeuedRuns: []archivedb.Run{{TRun: d0, TEnd: d0 + h, Ncores: 2}, {TRun: d0 + h, TEnd: d0 + 2*h, Ncores: 2}}}
	// no decay: 2 cores × 3 hours
	if got := chargeJob(r, d0+4*h, 0); got != 6 {
		t.Errorf("undecayed: %v core-hours, want 6", got)
	}
	// a 1-hour half-life, now = the last run's end: 2 + 2×2^-2 + 2×2^-3
	if got, want := chargeJob(r, d0+4*h, time.Hour), 2+0.5+0.25; math.Abs(got-want) > 1e-9 {
		t.Errorf("decayed: %v core-hours, want %v", got, want)
	}
	d := newDayUsage(time.UTC, 0, 0)
	d.add("alice", "physics", r.Ncores, r.TRun, r.TCleanup, r.TInactive)
	for _, run := range r.RequeuedRuns {
		d.addTime("alice", "physics", run.Ncores, run.TRun, run.TEnd, r.TInactive)
	}
	want := []acct.UsagePeriod{{Username: "alice", Bank: "physics", Start: int64(d0), Jobs: 1, CoreHours: 6}}
	if got := d.periods(); !reflect.DeepEqual(got, want) {
		t.Errorf("the day: %+v, want %+v", got, want)
	}
}
