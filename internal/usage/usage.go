// Package usage computes usage reports from the job archive's records:
// node, core and GPU hours per period and group (Sum: flux usage), and
// how a cluster's node time was spent per period (Cluster: flux usage
// --cluster and flux web's /v1/usage). Periods are hour, day, week
// (from Monday), month or total.
package usage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Cluster: how the instance's node time was spent (seed
// 003: "track overall cluster usage as a function of time for reporting
// (%down, %idle, %running, %reserved)"). Node time is counted from the
// instance's first resource event (resource.eventlog) on:
//
//   - allocated: the node time of the archived jobs;
//   - down: nodes offline or drained (the resource eventlog replayed);
//   - reserved: the node time of the configured advance reservations'
//     windows that no job used on those nodes;
//   - idle: the rest.

// Row is one line of a usage report.
type Row struct {
	Period    string            `json:"period"`
	Group     map[string]string `json:"group"`
	Jobs      int               `json:"jobs"`
	NodeHours float64           `json:"node_hours"`
	CoreHours float64           `json:"core_hours"`
	GPUHours  float64           `json:"gpu_hours"`
	start     int64
	key       string
}

// PeriodStart is the start of the period holding t.
func PeriodStart(t time.Time, per string) time.Time {
	y, m, d := t.Date()
	switch per {
	case "hour":
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, t.Location())
	case "day":
		return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	case "week": // weeks start on Monday
		day := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
		return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	case "month":
		return time.Date(y, m, 1, 0, 0, 0, 0, t.Location())
	}
	return time.Time{}
}

func NextPeriod(t time.Time, per string) time.Time {
	switch per {
	case "hour":
		return t.Add(time.Hour)
	case "day":
		return t.AddDate(0, 0, 1)
	case "week":
		return t.AddDate(0, 0, 7)
	}
	return t.AddDate(0, 1, 0)
}

func PeriodLabel(t time.Time, per string) string {
	switch per {
	case "month":
		return t.Format("2006-01")
	case "total":
		return "total"
	case "hour":
		return t.Format("2006-01-02T15:00")
	}
	return t.Format("2006-01-02")
}

// Sum splits each job's run over the periods and groups.
func Sum(recs []archivedb.Record, by []string, per string, since, until float64, loc *time.Location) []*Row {
	rows := map[string]*Row{}
	add := func(start time.Time, label string, r archivedb.Record, secs float64) {
		group := map[string]string{}
		var k strings.Builder
		for _, f := range by {
			v := map[string]string{"user": r.Username, "bank": r.Bank, "project": r.Project, "queue": r.Queue}[f]
			group[f] = v
			k.WriteString(v + "\x00")
		}
		key := label + "\x00" + k.String()
		row := rows[key]
		if row == nil {
			row = &Row{Period: label, Group: group, start: start.Unix(), key: k.String()}
			rows[key] = row
		}
		row.Jobs++
		h := secs / 3600
		row.NodeHours += h * float64(r.Nnodes)
		row.CoreHours += h * float64(r.Ncores)
		row.GPUHours += h * float64(r.Ngpus)
	}
	for _, r := range recs {
		end := r.TCleanup
		if end <= 0 {
			end = r.TInactive
		}
		SplitPeriods(max(r.TRun, since), min(end, until), per, loc, func(start time.Time, label string, secs float64) {
			add(start, label, r, secs)
		})
	}
	out := make([]*Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		return out[i].key < out[j].key
	})
	return out
}

// SplitPeriods calls fn for each part of [lo, hi) in one period, with the
// period's start and label ("total" for per=total).
func SplitPeriods(lo, hi float64, per string, loc *time.Location, fn func(start time.Time, label string, secs float64)) {
	if hi <= lo {
		return
	}
	if per == "total" {
		fn(time.Time{}, "total", hi-lo)
		return
	}
	for p := PeriodStart(UnixTime(lo, loc), per); float64(p.Unix()) < hi; p = NextPeriod(p, per) {
		a, b := max(lo, float64(p.Unix())), min(hi, float64(NextPeriod(p, per).Unix()))
		if b > a {
			fn(p, PeriodLabel(p, per), b-a)
		}
	}
}

func UnixTime(t float64, loc *time.Location) time.Time {
	sec := int64(t)
	return time.Unix(sec, int64((t-float64(sec))*1e9)).In(loc)
}

// JobEnd is when a job stopped using its resources (0: it never ran).
func JobEnd(r archivedb.Record) float64 {
	if r.TRun <= 0 {
		return 0
	}
	if r.TCleanup > 0 {
		return r.TCleanup
	}
	return r.TInactive
}

// ClusterRow is one period of a cluster report (node-seconds).
type ClusterRow struct {
	Period                   string  `json:"period"`
	Nodes                    int     `json:"nodes"`
	Reported                 float64 `json:"node_hours"`
	Alloc                    float64 `json:"allocated_pct"`
	Down                     float64 `json:"down_pct"`
	Resv                     float64 `json:"reserved_pct"`
	Idle                     float64 `json:"idle_pct"`
	start                    int64   // the period's start (Unix seconds)
	total, alloc, down, resv float64
}

// Window is a reservation's nodes and time.
type Window struct {
	Ranks      idset.Set
	Start, End float64
}

// Cluster sums node time per period.
func Cluster(recs []archivedb.Record, events []eventlog.Event, nnodes int, resvs []Window, since, until float64, per string, loc *time.Location) []*ClusterRow {
	rows := map[string]*ClusterRow{}
	row := func(start time.Time, label string) *ClusterRow {
		r := rows[label]
		if r == nil {
			r = &ClusterRow{Period: label, Nodes: nnodes, start: start.Unix()}
			rows[label] = r
		}
		return r
	}
	if len(events) == 0 {
		return nil
	}
	from := max(events[0].Timestamp, since)
	SplitPeriods(from, until, per, loc, func(start time.Time, label string, secs float64) {
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
			SplitPeriods(max(t, from), next, per, loc, func(start time.Time, label string, secs float64) {
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
		end := JobEnd(r)
		SplitPeriods(max(r.TRun, from), min(end, until), per, loc, func(start time.Time, label string, secs float64) {
			row(start, label).alloc += secs * float64(r.Nnodes)
		})
		ranks, err := idset.Parse(r.Ranks)
		if err != nil {
			continue
		}
		for i, w := range resvs {
			lo, hi := max(r.TRun, w.Start, from), min(end, w.End, until)
			if hi > lo {
				used[i] += (hi - lo) * float64(ranks.Intersect(w.Ranks).Count())
			}
		}
	}
	// reserved: the windows' node time, less what jobs used of it
	// (spread over the window's periods in proportion)
	for i, w := range resvs {
		lo, hi := max(w.Start, from), min(w.End, until)
		if hi <= lo {
			continue
		}
		whole := (hi - lo) * float64(w.Ranks.Count())
		idleShare := max(whole-used[i], 0) / whole
		SplitPeriods(lo, hi, per, loc, func(start time.Time, label string, secs float64) {
			row(start, label).resv += secs * float64(w.Ranks.Count()) * idleShare
		})
	}
	out := make([]*ClusterRow, 0, len(rows))
	for _, r := range rows {
		if r.total <= 0 {
			continue
		}
		pct := func(x float64) float64 { return min(100*x/r.total, 100) }
		r.Reported = r.total / 3600
		r.Alloc, r.Down, r.Resv = pct(r.alloc), pct(r.down), pct(r.resv)
		// a node both down and allocated (a job on a node that failed)
		// is counted twice: scale the shares so they add up to 100
		if s := r.Alloc + r.Down + r.Resv; s > 100 {
			r.Alloc, r.Down, r.Resv = 100*r.Alloc/s, 100*r.Down/s, 100*r.Resv/s
		}
		r.Idle = max(100-r.Alloc-r.Down-r.Resv, 0)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// Start is the period's start (Unix seconds; 0 for the total).
func (r *Row) Start() int64 { return r.start }

// Start is the period's start (Unix seconds; 0 for the total).
func (r *ClusterRow) Start() int64 { return r.start }

// Windows returns the configured advance reservations' nodes (ranks of
// inv) and times.
func Windows(pol *policy.Config, inv *rset.R) ([]Window, error) {
	var resvs []Window
	for name, r := range pol.Reservations {
		var ranks idset.Set
		if r.Hosts != "" {
			hl, err := hostlist.Parse(r.Hosts)
			if err == nil {
				ranks, err = inv.RanksOf(hl)
			}
			if err != nil {
				return nil, fmt.Errorf("reservations.%s: %w", name, err)
			}
		} else {
			ranks, _ = idset.Parse(r.Ranks)
		}
		resvs = append(resvs, Window{Ranks: ranks, Start: r.Start, End: r.End})
	}
	return resvs, nil
}
