package joblist

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestListsCompactWithoutListing: in an instance whose jobs nobody
// lists, the pending and running lists do not keep an entry for every
// job that passed through them (nor the inactive list one for every
// purged job): before, 150,000 jobs with 10,000 kept left 35 MB of
// records pinned by the stale entries. The order of what is left stands.
func TestListsCompactWithoutListing(t *testing.T) {
	x := newIndex()
	const n, keep = 50000, 100
	var recs []*record
	for i := 1; i <= n; i++ {
		r := x.slab.get(jobid.ID(i))
		x.jobs[r.id] = r
		for _, st := range []job.State{job.StateSched, job.StateRun, job.StateInactive} {
			r.State = st
			r.TInactive = float64(i)
			x.relist(r, false)
		}
		recs = append(recs, r)
		if len(recs) > keep { // purged, oldest first
			x.remove(recs[0])
			recs = recs[1:]
		}
	}
	for name, l := range map[string]*orderedList{"pending": &x.pending, "running": &x.running, "inactive": &x.inactive} {
		if len(l.recs) > keep+2*compactMin {
			t.Errorf("%s list holds %d entries for %d jobs", name, len(l.recs), l.len())
		}
	}
	got := x.inactive.ordered()
	if len(got) != keep {
		t.Fatalf("inactive: %d records, want %d", len(got), keep)
	}
	for i, r := range got { // stored reversed: the newest (listed first) last
		if want := jobid.ID(n - keep + 1 + i); r.id != want {
			t.Fatalf("inactive[%d] = %d, want %d", i, r.id, want)
		}
	}
}
