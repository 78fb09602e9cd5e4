package usage

import (
	"math"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// TestHourBins splits 3 hours of a 2-node instance into hours: a job on
// one node for 90 minutes from the start (hour 1: 50%, hour 2: 25%),
// rank 1 drained over hour 3 (50% down), and a reservation of rank 0 over hour 3 that no job used (50%
// reserved); every bin adds up to 100.
func TestHourBins(t *testing.T) {
	const t0 = 1_800_000_000.0 // 2027-01-15T08:00:00Z, on the hour
	if int64(t0)%3600 != 0 {
		t.Fatal("t0 is not on the hour")
	}
	ev := func(at float64, name, ids string) eventlog.Event {
		e, err := eventlog.NewAt(time.Unix(int64(at), 0), name, map[string]any{"idset": ids})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	events := []eventlog.Event{ev(t0, "online", "0-1"), ev(t0+2*3600, "drain", "1")}
	recs := []archivedb.Record{{TRun: t0, TInactive: t0 + 5400, Nnodes: 1, Ranks: "0"}}
	resvs := []Window{{Ranks: idset.Range(0, 0), Start: t0 + 2*3600, End: t0 + 3*3600}}
	rows := Cluster(recs, events, 2, resvs, t0, t0+3*3600, "hour", time.UTC)
	if len(rows) != 3 {
		t.Fatalf("%d bins, want 3: %+v", len(rows), rows)
	}
	want := [][4]float64{{50, 0, 0, 50}, {25, 0, 0, 75}, {0, 50, 50, 0}}
	for i, r := range rows {
		got := [4]float64{r.Alloc, r.Down, r.Resv, r.Idle}
		if got != want[i] {
			t.Errorf("bin %d (%s): allocated, down, reserved, idle = %v, want %v", i, r.Period, got, want[i])
		}
		if r.Start() != int64(t0)+int64(i)*3600 {
			t.Errorf("bin %d starts at %d", i, r.Start())
		}
		if s := r.Alloc + r.Down + r.Resv + r.Idle; math.Abs(s-100) > 1e-9 {
			t.Errorf("bin %d adds up to %v", i, s)
		}
	}
	if rows[0].Period != "2027-01-15T08:00" {
		t.Errorf("first bin's label %q", rows[0].Period)
	}
}

// TestSharesAddUp: a job on a node that is down at the same time counts
// twice; the shares are scaled to add up to 100.
func TestSharesAddUp(t *testing.T) {
	const t0 = 1_800_000_000.0
	e1, _ := eventlog.NewAt(time.Unix(int64(t0), 0), "online", map[string]any{"idset": "0"})
	recs := []archivedb.Record{{TRun: t0, TInactive: t0 + 3600, Nnodes: 1, Ranks: "0"}}
	// rank 1 never comes online: down for the whole hour
	recs = append(recs, archivedb.Record{TRun: t0, TInactive: t0 + 3600, Nnodes: 1, Ranks: "1"})
	r := Cluster(recs, []eventlog.Event{e1}, 2, nil, t0, t0+3600, "total", time.UTC)[0]
	if s := r.Alloc + r.Down + r.Resv + r.Idle; math.Abs(s-100) > 1e-9 || r.Alloc <= r.Down {
		t.Errorf("shares %+v add up to %v", r, s)
	}
	t.Logf("allocated %.2f%% down %.2f%% idle %.2f%%", r.Alloc, r.Down, r.Idle)
}
