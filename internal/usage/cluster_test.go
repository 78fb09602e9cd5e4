package usage

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
)

// TestClusterUsageBoots replays the resource eventlog of a 4-broker
// instance as fluxgo writes it (ranks join before and after
// resource-define), booted twice, and checks the shares against a hand
// computation; they add up to 100% (issue 25: the resource-define
// event used to mark every rank offline again, 107%).
func TestClusterUsageBoots(t *testing.T) {
	const t0 = 1_800_000_000.0
	ev := func(at float64, name, ids string) eventlog.Event {
		ctx := map[string]any{"idset": ids}
		if name == "resource-define" {
			ctx = map[string]any{"method": "dynamic-discovery"}
		}
		e, err := eventlog.NewAt(time.Unix(0, int64(at*1e9)), name, ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	events := []eventlog.Event{
		// boot 1 at t0: ranks 0-2 at once, rank 3 ten seconds later
		ev(t0, "online", "0-1"), ev(t0, "online", "2"), ev(t0+0.5, "resource-define", ""), ev(t0+10, "online", "3"),
		// boot 2 at t0+100 (the first left no offline events): ranks
		// 1-3 join 20 s after rank 0
		ev(t0+100, "online", "0"), ev(t0+100.5, "resource-define", ""), ev(t0+120, "online", "1-3"),
	}
	// a 2-node job from t0+20 to t0+70, a 4-node one from t0+150 to t0+175
	recs := []archivedb.Record{
		{Nnodes: 2, Ranks: "0-1", TRun: t0 + 20, TCleanup: t0 + 70},
		{Nnodes: 4, Ranks: "0-3", TRun: t0 + 150, TCleanup: t0 + 175},
	}
	rows := Cluster(recs, events, 4, nil, 0, t0+200, "total", time.UTC)
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	// by hand, in node-seconds of 4 nodes x 200 s = 800:
	//   allocated: 2x50 + 4x25           = 200 -> 25%
	//   down:      rank 3 for 10 s, ranks 1-3 for 20 s = 10 + 60 = 70 -> 8.75%
	//   idle:      800 - 200 - 70         = 530 -> 66.25%
	const eps = 1e-6
	near := func(a, b float64) bool { return a-b < eps && b-a < eps }
	if !near(r.Alloc, 25) || !near(r.Down, 8.75) || !near(r.Idle, 66.25) || r.Resv != 0 {
		t.Errorf("got allocated %.4f%% down %.4f%% reserved %.4f%% idle %.4f%%; want 25, 8.75, 0, 66.25", r.Alloc, r.Down, r.Resv, r.Idle)
	}
	if sum := r.Alloc + r.Down + r.Resv + r.Idle; !near(sum, 100) {
		t.Errorf("shares add up to %.4f%%", sum)
	}
}
