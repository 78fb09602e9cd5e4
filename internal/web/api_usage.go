package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/usage"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Bounds of GET /v1/usage.
const (
	// maxUsageRange is the longest since..until range.
	maxUsageRange = 366 * 24 * time.Hour
	// maxUsageBins is the most bins one answer holds.
	maxUsageBins = 1000
	// defaultUsageRange is the range without since.
	defaultUsageRange = 7 * 24 * time.Hour
)

// UsageData is what a usage report is computed from: the archived jobs
// that ran in the range (every user's), the resource eventlog, the
// instance's node count and the reservation windows.
type UsageData struct {
	Records []archivedb.Record
	Events  []eventlog.Event
	Nodes   int
	Windows []usage.Window
}

// usageInstance is the part of an Instance GET /v1/usage needs; a Client
// has it.
type usageInstance interface {
	Usage(ctx context.Context, since, until float64) (UsageData, error)
}

// Usage asks the job archive for every job that ran in [since, until)
// with the resource eventlog and R (a cluster query, as flux usage
// --cluster makes; the server's own connection is the owner's), after
// bringing the archive up to date.
func (c *Client) Usage(ctx context.Context, since, until float64) (UsageData, error) {
	err := c.h.Call(ctx, "job-archive.sync", flux.NodeidAny, nil, nil)
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return UsageData{}, fmt.Errorf("this instance keeps no job archive (no [archive] table in its configuration): %w", err)
	case err != nil && !errors.Is(err, syscall.EPERM):
		return UsageData{}, fmt.Errorf("job-archive.sync: %w", err)
	}
	var d UsageData
	var rawEvents string
	var R []byte
	q := archivedb.QueryRequest{Since: since, Until: until, Cluster: true}
	err = c.h.Stream(ctx, "job-archive.query", flux.NodeidAny, q, func(m *flux.Message) error {
		var resp archivedb.QueryResponse
		if err := m.UnmarshalPayload(&resp); err != nil {
			return fmt.Errorf("job-archive.query response: %w", err)
		}
		d.Records = append(d.Records, resp.Records...)
		if resp.ResourceEventlog != "" {
			rawEvents, R = resp.ResourceEventlog, resp.R
		}
		return nil
	})
	if err != nil {
		return UsageData{}, fmt.Errorf("job-archive.query: %w", err)
	}
	if d.Events, err = eventlog.Parse([]byte(rawEvents)); err != nil {
		return UsageData{}, fmt.Errorf("resource.eventlog: %w", err)
	}
	if len(R) > 0 {
		inv, err := rset.Parse(R)
		if err != nil {
			return UsageData{}, fmt.Errorf("resource.R: %w", err)
		}
		d.Nodes = inv.NNodes()
		pol, err := policy.Fetch(ctx, c.h)
		if err != nil {
			return UsageData{}, err
		}
		if d.Windows, err = usage.Windows(pol, inv); err != nil {
			return UsageData{}, err
		}
	}
	return d, nil
}

// usageQuery is GET /v1/usage's parameters.
type usageQuery struct {
	since, until float64
	bin          string
}

// parseUsageQuery reads and bounds since, until (Unix seconds) and bin
// (hour or day); the error names the parameter and the limit.
func parseUsageQuery(get func(string) string, now time.Time) (usageQuery, error) {
	q := usageQuery{until: float64(now.Unix()), bin: "day"}
	q.since = q.until - defaultUsageRange.Seconds()
	num := func(name string, v *float64) error {
		s := get(name)
		if s == "" {
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1<<40 {
			return fmt.Errorf("%s=%q: want a time in Unix seconds", name, s)
		}
		*v = f
		return nil
	}
	untilGiven := get("until") != ""
	if err := num("until", &q.until); err != nil {
		return q, err
	}
	if untilGiven && get("since") == "" {
		q.since = q.until - defaultUsageRange.Seconds()
	}
	if err := num("since", &q.since); err != nil {
		return q, err
	}
	if q.until <= q.since {
		return q, fmt.Errorf("until=%v must come after since=%v", q.until, q.since)
	}
	if q.until-q.since > maxUsageRange.Seconds() {
		return q, fmt.Errorf("since..until spans %.0f days: the limit is %.0f days", (q.until-q.since)/86400, maxUsageRange.Hours()/24)
	}
	if b := get("bin"); b != "" {
		q.bin = b
	}
	per := time.Hour
	switch q.bin {
	case "hour":
	case "day":
		per = 24 * time.Hour
	default:
		return q, fmt.Errorf("bin=%q: want hour or day", q.bin)
	}
	if n := math.Ceil((q.until - q.since) / per.Seconds()); n > maxUsageBins {
		return q, fmt.Errorf("since..until holds %.0f %s bins: the limit is %d (use a shorter range or bin=day)", n, q.bin, maxUsageBins)
	}
	return q, nil
}

// UsageBin is one bin of GET /v1/usage: the shares (percent, adding up
// to 100) of the instance's node time allocated, down, reserved and idle.
type UsageBin struct {
	Start     int64   `json:"start"`
	End       int64   `json:"end"`
	Nodes     int     `json:"nodes"`
	NodeHours float64 `json:"node_hours"`
	Allocated float64 `json:"allocated"`
	Down      float64 `json:"down"`
	Reserved  float64 `json:"reserved"`
	Idle      float64 `json:"idle"`
}

// UsageGroup is one entry of by_user, by_bank or by_project: the node,
// core and GPU hours the group's jobs used in the range, and how many
// jobs ran in it.
type UsageGroup struct {
	User      string  `json:"user,omitempty"`
	Bank      string  `json:"bank,omitempty"`
	Project   string  `json:"project,omitempty"`
	NodeHours float64 `json:"node_hours"`
	CoreHours float64 `json:"core_hours"`
	GPUHours  float64 `json:"gpu_hours"`
	Jobs      int     `json:"jobs"`
}

// usageReport computes GET /v1/usage's answer from d: the cluster bins
// from every job; the groups from the caller's own jobs unless the
// caller sees all.
func usageReport(d UsageData, q usageQuery, as Caller) map[string]any {
	rows := usage.Cluster(d.Records, d.Events, d.Nodes, d.Windows, q.since, q.until, q.bin, time.UTC)
	bins := make([]UsageBin, 0, len(rows))
	for _, r := range rows {
		start := max(r.Start(), int64(q.since))
		end := usage.NextPeriod(time.Unix(r.Start(), 0).UTC(), q.bin).Unix()
		bins = append(bins, UsageBin{Start: start, End: min(end, int64(math.Ceil(q.until))), Nodes: r.Nodes, NodeHours: r.Reported,
			Allocated: r.Alloc, Down: r.Down, Reserved: r.Resv, Idle: r.Idle})
	}
	recs := d.Records
	if !as.all() {
		recs = nil
		for _, r := range d.Records {
			if r.Userid == as.Userid {
				recs = append(recs, r)
			}
		}
	}
	groups := func(field string) []UsageGroup {
		out := []UsageGroup{}
		for _, r := range usage.Sum(recs, []string{field}, "total", q.since, q.until, time.UTC) {
			g := UsageGroup{NodeHours: r.NodeHours, CoreHours: r.CoreHours, GPUHours: r.GPUHours, Jobs: r.Jobs}
			switch field {
			case "user":
				g.User = r.Group[field]
			case "bank":
				g.Bank = r.Group[field]
			case "project":
				g.Project = r.Group[field]
			}
			out = append(out, g)
		}
		return out
	}
	return map[string]any{"since": q.since, "until": q.until, "bin": q.bin, "bins": bins,
		"by_user": groups("user"), "by_bank": groups("bank"), "by_project": groups("project")}
}

func (s *Server) getUsage(w http.ResponseWriter, r *http.Request, as Caller) {
	ui, ok := s.o.Instance.(usageInstance)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this server's instance gives no usage reports"})
		return
	}
	q, err := parseUsageQuery(r.URL.Query().Get, s.o.Now())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, reply{Message: err.Error()})
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	d, err := ui.Usage(ctx, q.since, q.until)
	if err != nil {
		s.instanceError(w, "usage report", err, nil)
		return
	}
	writeJSON(w, http.StatusOK, usageReport(d, q, as))
}
