package cli

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// TestSumUsageSplitsPeriods checks a job running across midnight counts
// in both days for the time it ran in each, grouped by user and bank.
func TestSumUsageSplitsPeriods(t *testing.T) {
	at := func(s string) float64 {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return float64(tm.Unix())
	}
	recs := []archivedb.Record{
		{Username: "ann", Bank: "phys", Nnodes: 2, Ncores: 8, Ngpus: 1, TRun: at("2026-11-30 23:00"), TCleanup: at("2026-12-01 01:00")},
		{Username: "ann", Bank: "phys", Nnodes: 1, Ncores: 4, TRun: at("2026-12-01 10:00"), TCleanup: at("2026-12-01 10:30")},
		{Username: "bob", Bank: "chem", Nnodes: 1, Ncores: 1, TRun: at("2026-12-01 12:00"), TInactive: at("2026-12-01 13:00")},
	}
	rows := sumUsage(recs, []string{"user", "bank"}, "day", 0, at("2026-12-02 00:00"), time.UTC)
	type want struct {
		period, user    string
		jobs            int
		node, core, gpu float64
	}
	wants := []want{
		{"2026-11-30", "ann", 1, 2, 8, 1},
		{"2026-12-01", "ann", 2, 2 + 0.5, 8 + 2, 1},
		{"2026-12-01", "bob", 1, 1, 1, 0},
	}
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(wants), rows)
	}
	for i, w := range wants {
		r := rows[i]
		if r.Period != w.period || r.Group["user"] != w.user || r.Jobs != w.jobs || r.NodeHours != w.node || r.CoreHours != w.core || r.GPUHours != w.gpu {
			t.Errorf("row %d: %+v, want %+v", i, *r, w)
		}
	}
	// --since clips: only what ran after midnight
	rows = sumUsage(recs, nil, "total", at("2026-12-01 00:00"), at("2026-12-02 00:00"), time.UTC)
	if len(rows) != 1 || rows[0].NodeHours != 2+0.5+1 || rows[0].Jobs != 3 {
		t.Errorf("clipped total: %+v", rows)
	}
	// weeks start on Monday (2026-11-30 is one)
	rows = sumUsage(recs, nil, "week", 0, at("2026-12-02 00:00"), time.UTC)
	if len(rows) != 1 || rows[0].Period != "2026-11-30" {
		t.Errorf("week rows: %+v", rows)
	}
}

// TestClusterUsage: 4 nodes for 4 hours; a 2-node job for 2 hours, rank
// 3 drained for an hour, rank 2 reserved and unused for 2 hours.
func TestClusterUsage(t *testing.T) {
	const t0, h = 1_800_000_000.0, 3600.0
	ev := func(at float64, name, ids string) eventlog.Event {
		e, err := eventlog.NewAt(time.Unix(int64(at), 0), name, map[string]any{"idset": ids})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	events := []eventlog.Event{
		ev(t0, "resource-define", ""), ev(t0, "online", "0-3"),
		ev(t0+h, "drain", "3"), ev(t0+2*h, "undrain", "3"),
	}
	recs := []archivedb.Record{{Nnodes: 2, Ranks: "0-1", TRun: t0, TCleanup: t0 + 2*h}}
	resvs := []resvWindow{{Ranks: idset.Range(2, 2), Start: t0 + 2*h, End: t0 + 4*h}}
	rows := clusterUsage(recs, events, 4, resvs, 0, t0+4*h, "total", time.UTC)
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.Reported != 16 || r.Alloc != 25 || r.Down != 6.25 || r.Resv != 12.5 || r.Idle != 56.25 {
		t.Errorf("got %+v; want 16 node-hours: 25%% allocated, 6.25%% down, 12.5%% reserved, 56.25%% idle", *r)
	}
	// a job using the reserved node takes it out of "reserved"
	recs = append(recs, archivedb.Record{Nnodes: 1, Ranks: "2", TRun: t0 + 2*h, TCleanup: t0 + 3*h})
	r = clusterUsage(recs, events, 4, resvs, 0, t0+4*h, "total", time.UTC)[0]
	if r.Alloc != 31.25 || r.Resv != 6.25 || r.Idle != 56.25 {
		t.Errorf("with a job in the reservation: %+v", *r)
	}
}
