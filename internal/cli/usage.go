package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/usage"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// flux usage: usage reports from the job archive (seed 003: "collated
// usage by user+bank and user+project per day", and job records in plain
// text). It asks the instance's job-archive module (job-archive.query),
// which gives the owner and operators every job and other users their
// own; with --db it reads an archive file itself (a copy, or with the
// instance down).

type usageOptions struct {
	db, since, until, by, per, format string
	utc, jobs, cluster                bool
	byGiven                           bool // --by was on the command line
}

func newUsageCmd() *cobra.Command {
	var o usageOptions
	cmd := &cobra.Command{
		Use:   "usage [--by=user,bank] [--per=day] [--since=TIME] [--until=TIME] [-o table|csv|json] [--jobs]",
		Short: "Report resource usage from the job archive",
		Long: `Sum the node, core and GPU hours of the jobs in the job archive (the
job-archive module, enabled by an [archive] table in the configuration)
by user, bank, project or queue (--by, any combination), per day, week,
month or over the whole time (--per). A job running across a period's end
counts in each period for the time it ran in it. Periods are in local
time unless --utc.

--jobs prints the archived jobs themselves instead, one per line (with
-o csv, a plain-text export of the records).

--cluster reports, per period, how the instance's node time was spent:
allocated to jobs, down (offline or drained, from the resource eventlog),
reserved (advance reservation windows no job used) and idle, in percent of
the node time since the instance's first resource event. It needs the
instance (its resource eventlog and configuration).

TIME is YYYY-MM-DD[ HH:MM[:SS]] or a duration ago (7d, 12h). The archive
is the enclosing instance's, read through its job-archive module: the
instance owner sees every user's jobs (and first has the archive take
the jobs that ended since its last pass), an operator ([access]
operators) every user's jobs as of the last pass, other users only their
own; --cluster is the owner's. --db=PATH reads an
archive file instead (a copy, or the instance's with it down).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.byGiven = cmd.Flags().Changed("by")
			return runUsage(o, cmd.OutOrStdout(), time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.db, "db", "", "read the archive at `PATH`")
	f.StringVar(&o.since, "since", "", "only usage after `TIME`")
	f.StringVar(&o.until, "until", "", "only usage before `TIME`")
	f.StringVar(&o.by, "by", "user,bank", "group by `FIELDS`: user, bank, project, queue (comma-separated), or none")
	f.StringVar(&o.per, "per", "day", "one line per `PERIOD`: day, week, month or total")
	f.BoolVar(&o.utc, "utc", false, "periods and times in UTC")
	f.StringVarP(&o.format, "format", "o", "table", "output `FORMAT`: table, csv or json")
	f.BoolVar(&o.jobs, "jobs", false, "list the archived jobs instead of summing them")
	f.BoolVar(&o.cluster, "cluster", false, "report how the instance's node time was spent (allocated, down, reserved, idle) instead")
	return cmd
}

var usageGroupFields = map[string]bool{"user": true, "bank": true, "project": true, "queue": true}

func runUsage(o usageOptions, out io.Writer, now time.Time) error {
	loc := time.Local
	if o.utc {
		loc = time.UTC
	}
	var by []string
	if o.by != "none" {
		for _, f := range strings.Split(o.by, ",") {
			f = strings.TrimSpace(f)
			if !usageGroupFields[f] {
				return fmt.Errorf("--by=%s: unknown field %q (use user, bank, project, queue or none)", o.by, f)
			}
			by = append(by, f)
		}
	}
	switch o.per {
	case "day", "week", "month", "total":
	default:
		return fmt.Errorf("--per=%s: use day, week, month or total", o.per)
	}
	switch o.format {
	case "table", "csv", "json":
	default:
		return fmt.Errorf("--format=%s: use table, csv or json", o.format)
	}
	since, until := 0.0, float64(now.Unix())+1
	var err error
	if o.since != "" {
		if since, err = usageTime(o.since, now, loc); err != nil {
			return fmt.Errorf("--since: %w", err)
		}
	}
	if o.until != "" {
		if until, err = usageTime(o.until, now, loc); err != nil {
			return fmt.Errorf("--until: %w", err)
		}
	}
	if until <= since {
		return fmt.Errorf("--until must come after --since")
	}
	if o.cluster && (o.jobs || o.byGiven) {
		return fmt.Errorf("--cluster takes neither --jobs nor --by")
	}
	q := archivedb.QueryRequest{Since: since, Until: until, Inactive: o.jobs, Cluster: o.cluster}
	var recs []archivedb.Record
	var res clusterResources // from the archive for --cluster (instance mode)
	if o.db != "" {
		recs, err = fileRecords(o.db, q)
	} else {
		recs, res, err = instanceRecords(q)
	}
	if err != nil {
		return err
	}
	if o.cluster {
		return runClusterUsage(o, recs, res, since, until, loc, out)
	}
	if o.jobs {
		return printArchivedJobs(out, recs, o.format, loc)
	}
	rows := sumUsage(recs, by, o.per, since, until, loc)
	return printUsage(out, rows, by, o.format)
}

// usageTime reads YYYY-MM-DD[ HH:MM[:SS]] in loc, or a duration ago.
func usageTime(s string, now time.Time, loc *time.Location) (float64, error) {
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return float64(t.Unix()), nil
		}
	}
	if d, err := fsd.Parse(s); err == nil && d >= 0 {
		return float64(now.Unix()) - d, nil
	}
	return 0, fmt.Errorf("%q: want YYYY-MM-DD[ HH:MM[:SS]] or a duration ago (7d, 12h)", s)
}

// fileRecords reads the archive file at path itself (a copy, or the
// instance's with the instance down).
func fileRecords(path string, q archivedb.QueryRequest) ([]archivedb.Record, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("job archive: %w", err)
	}
	db, err := archivedb.Open(path, true)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var recs []archivedb.Record
	f := archivedb.Filter{Since: q.Since, Until: q.Until, Inactive: q.Inactive}
	err = archivedb.Query(context.Background(), db, f, func(r archivedb.Record) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// instanceRecords asks the enclosing instance's job-archive module: the
// owner and operators get every job, other users their own (and for
// --cluster, every job's nodes and times).
func instanceRecords(q archivedb.QueryRequest) ([]archivedb.Record, clusterResources, error) {
	var recs []archivedb.Record
	var res clusterResources
	err := withHandle(func(ctx context.Context, h *flux.Handle) error {
		// bring the archive up to date (the owner's privilege; others
		// read what the last periodic pass archived)
		err := h.Call(ctx, "job-archive.sync", flux.NodeidAny, nil, nil)
		switch {
		case errors.Is(err, syscall.ENOSYS):
			return fmt.Errorf("this instance keeps no job archive (no [archive] table in its configuration, or its job-archive module is not loaded): give --db=PATH")
		case err != nil && !errors.Is(err, syscall.EPERM):
			return fmt.Errorf("job archive: %w", err)
		}
		err = h.Stream(ctx, "job-archive.query", flux.NodeidAny, q, func(m *flux.Message) error {
			var resp archivedb.QueryResponse
			if err := m.UnmarshalPayload(&resp); err != nil {
				return fmt.Errorf("job-archive.query response: %w", err)
			}
			recs = append(recs, resp.Records...)
			if resp.ResourceEventlog != "" {
				res = clusterResources{eventlog: []byte(resp.ResourceEventlog), R: resp.R}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("job archive: %s", flux.ErrorText(err))
		}
		return nil
	})
	return recs, res, err
}

// The computations are internal/usage's (flux web's /v1/usage uses them
// too); these are their names here.
type (
	usageRow   = usage.Row
	clusterRow = usage.ClusterRow
	resvWindow = usage.Window
)

var (
	sumUsage     = usage.Sum
	clusterUsage = usage.Cluster
	unixTime     = usage.UnixTime
	jobEnd       = usage.JobEnd
)

func printUsage(out io.Writer, rows []*usageRow, by []string, format string) error {
	if format == "json" {
		if rows == nil {
			rows = []*usageRow{}
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	head := []string{"PERIOD"}
	for _, f := range by {
		head = append(head, strings.ToUpper(f))
	}
	head = append(head, "JOBS", "NODE-HOURS", "CORE-HOURS", "GPU-HOURS")
	lines := [][]string{}
	for _, r := range rows {
		l := []string{r.Period}
		for _, f := range by {
			v := r.Group[f]
			if v == "" && format == "table" {
				v = "-"
			}
			l = append(l, v)
		}
		l = append(l, strconv.Itoa(r.Jobs), fmt.Sprintf("%.2f", r.NodeHours), fmt.Sprintf("%.2f", r.CoreHours), fmt.Sprintf("%.2f", r.GPUHours))
		lines = append(lines, l)
	}
	return printRows(out, head, lines, format)
}

// printRows prints a table (aligned) or CSV (lower-case header).
func printRows(out io.Writer, head []string, lines [][]string, format string) error {
	if format == "csv" {
		w := csv.NewWriter(out)
		h := make([]string, len(head))
		for i, s := range head {
			h[i] = strings.ReplaceAll(strings.ToLower(s), "-", "_")
		}
		w.Write(h)
		w.WriteAll(lines)
		return w.Error()
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, l := range lines {
		fmt.Fprintln(w, strings.Join(l, "\t"))
	}
	return w.Flush()
}

func printArchivedJobs(out io.Writer, recs []archivedb.Record, format string, loc *time.Location) error {
	if format == "json" {
		type jobJSON struct {
			Jobid, User, Name, Queue, Bank, Project, Result string
			ExitCode                                        *int64  `json:",omitempty"`
			Exception                                       string  `json:",omitempty"`
			TSubmit, TRun, TEnd                             float64 `json:",omitempty"`
			Nnodes, Ncores, Ngpus                           int
			Nodelist                                        string
			PeakMemory                                      *int64   `json:",omitempty"`
			CPUTime                                         *float64 `json:",omitempty"`
		}
		list := make([]jobJSON, 0, len(recs))
		for _, r := range recs {
			j := jobJSON{Jobid: r.Jobid, User: r.Username, Name: r.Name, Queue: r.Queue, Bank: r.Bank, Project: r.Project,
				Result: r.Result, Exception: r.ExceptionType, TSubmit: r.TSubmit, TRun: r.TRun, TEnd: jobEnd(r),
				Nnodes: r.Nnodes, Ncores: r.Ncores, Ngpus: r.Ngpus, Nodelist: r.Nodelist}
			j.ExitCode, j.PeakMemory, j.CPUTime = r.ExitCode, r.PeakMemory, r.CPUTime
			list = append(list, j)
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	stamp := func(t float64) string {
		if t <= 0 {
			return ""
		}
		return unixTime(t, loc).Format("2006-01-02T15:04:05")
	}
	head := []string{"JOBID", "USER", "NAME", "QUEUE", "BANK", "PROJECT", "RESULT", "EXIT", "SUBMIT", "START", "END", "NNODES", "NCORES", "NGPUS", "MAXMEM", "CPUTIME", "NODELIST"}
	lines := make([][]string, 0, len(recs))
	for _, r := range recs {
		exit := ""
		if r.ExitCode != nil {
			exit = strconv.FormatInt(*r.ExitCode, 10)
		}
		// peak memory and CPU time (the job's cgroups): bytes and seconds
		// in CSV, readable in the table; empty when not measured
		mem, cpu := "", ""
		if r.PeakMemory != nil {
			mem = strconv.FormatInt(*r.PeakMemory, 10)
			if format == "table" {
				mem = usageBytes(*r.PeakMemory)
			}
		}
		if r.CPUTime != nil {
			cpu = strconv.FormatFloat(*r.CPUTime, 'f', 3, 64)
		}
		l := []string{r.Jobid, r.Username, r.Name, r.Queue, r.Bank, r.Project, r.Result, exit,
			stamp(r.TSubmit), stamp(r.TRun), stamp(jobEnd(r)), strconv.Itoa(r.Nnodes), strconv.Itoa(r.Ncores), strconv.Itoa(r.Ngpus),
			mem, cpu, r.Nodelist}
		if format == "table" {
			for i, v := range l {
				if v == "" {
					l[i] = "-"
				}
			}
		}
		lines = append(lines, l)
	}
	return printRows(out, head, lines, format)
}

// usageBytes is n bytes as a short size: 512B, 33.5M, 2.0G.
func usageBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	v, suffix := float64(n)/unit, "K"
	for _, s := range []string{"M", "G", "T", "P"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + suffix
}
