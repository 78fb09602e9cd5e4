package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux usage --cluster: how the instance's node time was spent (seed
// 003: "track overall cluster usage as a function of time for reporting
// (%down, %idle, %running, %reserved)"). Node time is counted from the
// instance's first resource event (resource.eventlog) on:
//
//   - allocated: the node time of the archived jobs;
//   - down: nodes offline or drained (the resource eventlog replayed);
//   - reserved: the node time of the configured advance reservations'
//     windows that no job used on those nodes;
//   - idle: the rest.

// clusterRow is one period of a cluster report (node-seconds).
type clusterRow struct {
	Period                   string  `json:"period"`
	Nodes                    int     `json:"nodes"`
	Reported                 float64 `json:"node_hours"`
	Alloc                    float64 `json:"allocated_pct"`
	Down                     float64 `json:"down_pct"`
	Resv                     float64 `json:"reserved_pct"`
	Idle                     float64 `json:"idle_pct"`
	start                    int64
	total, alloc, down, resv float64
}

// resvWindow is a reservation's nodes and time.
type resvWindow struct {
	ranks      idset.Set
	start, end float64
}

// clusterUsage sums node time per period.
func clusterUsage(recs []archivedb.Record, events []eventlog.Event, nnodes int, resvs []resvWindow, since, until float64, per string, loc *time.Location) []*clusterRow {
	rows := map[string]*clusterRow{}
	row := func(start time.Time, label string) *clusterRow {
		r := rows[label]
		if r == nil {
			r = &clusterRow{Period: label, Nodes: nnodes, start: start.Unix()}
			rows[label] = r
		}
		return r
	}
	if len(events) == 0 {
		return nil
	}
	from := max(events[0].Timestamp, since)
	splitPeriods(from, until, per, loc, func(start time.Time, label string, secs float64) {
		row(start, label).total += secs * float64(nnodes)
	})
	// down: offline or drained, between events
	var offline, drained idset.Set
	// every rank starts offline until an online event says otherwise
	offline = idset.Range(0, uint(max(nnodes-1, 0)))
	t := events[0].Timestamp
	for i := 0; i <= len(events); i++ {
		next := until
		if i < len(events) {
			next = min(events[i].Timestamp, until)
		}
		if n := offline.Union(drained).Count(); n > 0 && next > t {
			splitPeriods(max(t, from), next, per, loc, func(start time.Time, label string, secs float64) {
				row(start, label).down += secs * float64(n)
			})
		}
		if i == len(events) || events[i].Timestamp >= until {
			break
		}
		t = max(t, events[i].Timestamp)
		var c struct {
			Idset string `json:"idset"`
		}
		events[i].DecodeContext(&c)
		ranks, _ := idset.Parse(c.Idset)
		switch events[i].Name {
		case "online":
			if ranks.Contains(0) {
				// rank 0 is the leader: it comes online once per boot of
				// the instance, first. What the log said of the others
				// is of the boot before (their offline events may never
				// have been written): they are offline until they join.
				offline = idset.Range(0, uint(max(nnodes-1, 0)))
			}
			offline = offline.Difference(ranks)
		case "offline":
			offline = offline.Union(ranks)
		case "drain":
			drained = drained.Union(ranks)
		case "undrain":
			drained = drained.Difference(ranks)
		}
		// resource-define says nothing of who is up: it may come after
		// the online events of the same boot (the ranks that joined
		// while the inventory was being found)
	}
	// allocated: the jobs' node time; per reservation, what jobs used of it
	used := make([]float64, len(resvs))
	for _, r := range recs {
		end := jobEnd(r)
		splitPeriods(max(r.TRun, from), min(end, until), per, loc, func(start time.Time, label string, secs float64) {
			row(start, label).alloc += secs * float64(r.Nnodes)
		})
		ranks, err := idset.Parse(r.Ranks)
		if err != nil {
			continue
		}
		for i, w := range resvs {
			lo, hi := max(r.TRun, w.start, from), min(end, w.end, until)
			if hi > lo {
				used[i] += (hi - lo) * float64(ranks.Intersect(w.ranks).Count())
			}
		}
	}
	// reserved: the windows' node time, less what jobs used of it
	// (spread over the window's periods in proportion)
	for i, w := range resvs {
		lo, hi := max(w.start, from), min(w.end, until)
		if hi <= lo {
			continue
		}
		whole := (hi - lo) * float64(w.ranks.Count())
		idleShare := max(whole-used[i], 0) / whole
		splitPeriods(lo, hi, per, loc, func(start time.Time, label string, secs float64) {
			row(start, label).resv += secs * float64(w.ranks.Count()) * idleShare
		})
	}
	out := make([]*clusterRow, 0, len(rows))
	for _, r := range rows {
		if r.total <= 0 {
			continue
		}
		pct := func(x float64) float64 { return min(100*x/r.total, 100) }
		r.Reported = r.total / 3600
		r.Alloc, r.Down, r.Resv = pct(r.alloc), pct(r.down), pct(r.resv)
		r.Idle = max(100-r.Alloc-r.Down-r.Resv, 0)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// clusterResources is the instance's resource eventlog and R, as the
// job archive sends them with a cluster query (nil: read the KVS).
type clusterResources struct {
	eventlog []byte
	R        json.RawMessage
}

// runClusterUsage is flux usage --cluster.
func runClusterUsage(o usageOptions, recs []archivedb.Record, res clusterResources, since, until float64, loc *time.Location, out io.Writer) error {
	var events []eventlog.Event
	var nnodes int
	var resvs []resvWindow
	err := withHandle(func(ctx context.Context, h *flux.Handle) error {
		raw, R := res.eventlog, res.R
		if raw == nil {
			var err error
			if raw, err = kvs.GetRaw(ctx, h, "", "resource.eventlog"); err != nil {
				return fmt.Errorf("resource.eventlog: %s", flux.ErrorText(err))
			}
			if err := kvs.GetJSON(ctx, h, "", "resource.R", &R); err != nil {
				return fmt.Errorf("resource.R: %s", flux.ErrorText(err))
			}
		}
		var err error
		if events, err = eventlog.Parse(raw); err != nil {
			return fmt.Errorf("resource.eventlog: %w", err)
		}
		inv, err := rset.Parse(R)
		if err != nil {
			return fmt.Errorf("resource.R: %w", err)
		}
		nnodes = inv.NNodes()
		pol, err := policy.Fetch(ctx, h)
		if err != nil {
			return err
		}
		for name, r := range pol.Reservations {
			var ranks idset.Set
			if r.Hosts != "" {
				hl, err := hostlist.Parse(r.Hosts)
				if err == nil {
					ranks, err = inv.RanksOf(hl)
				}
				if err != nil {
					return fmt.Errorf("reservations.%s: %w", name, err)
				}
			} else {
				ranks, _ = idset.Parse(r.Ranks)
			}
			resvs = append(resvs, resvWindow{ranks: ranks, start: r.Start, end: r.End})
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows := clusterUsage(recs, events, nnodes, resvs, since, until, o.per, loc)
	if o.format == "json" {
		if rows == nil {
			rows = []*clusterRow{}
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	head := []string{"PERIOD", "NODES", "NODE-HOURS", "ALLOCATED%", "DOWN%", "RESERVED%", "IDLE%"}
	lines := make([][]string, 0, len(rows))
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	for _, r := range rows {
		lines = append(lines, []string{r.Period, strconv.Itoa(r.Nodes), f(r.Reported), f(r.Alloc), f(r.Down), f(r.Resv), f(r.Idle)})
	}
	return printRows(out, head, lines, o.format)
}
