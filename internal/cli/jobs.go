package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux jobs [OPTIONS] [JOBID...]: list jobs (flux-jobs(1)).

// jobsFormats are the named formats (flux jobs --format=help).
var jobsFormats = []namedFormat{
	{"default", "Default flux-jobs format string",
		"{id.f58:>12} ?:{queue:<8.8} +:{username:<8.8} {name:<10.10+} {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h} {contextual_info}"},
	{"cute", "Cute flux-jobs format string (default with emojis)",
		"{id.f58:>12} ?:{queue:<8.8} +:{username:<8.8} {name:<10.10+} {status_emoji:>5.5} {ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h} {contextual_info}"},
	{"long", "Extended flux-jobs format string",
		"{id.f58:>12} ?:{queue:<8.8} +:{username:<8.8} {name:<10.10+} {status:>9.9} {ntasks:>6} {nnodes:>6h} {t_submit!d:%b%d %R::>12} {t_remaining!F:>12h} {contextual_time!F:>8h} {contextual_info}"},
	{"deps", "Show job urgency, priority, and dependencies",
		"{id.f58:>12} ?:{queue:<8.8} {name:<10.10+} {urgency:<3} {priority:<12} {state:<8.8} {dependencies}"},
	{"endreason", "Show why each job ended",
		"{id.f58:>12} ?:{queue:<8.8} +:{username:<8.8} {name:<10.10+} {status_abbrev:>2.2} {t_inactive!d:%b%d %R::>12h} {inactive_reason}"},
}

// jobsOptions are the inputs of flux jobs.
type jobsOptions struct {
	all, allUsers bool
	count         int
	filters       []string
	since         string
	noHeader      bool
	user          string
	name          string
	queues        []string
	include       string
	format        string
	sort          string
	json          bool
	color         string
	stats         bool
	statsOnly     bool
	ids           []string
	userChanged   bool
	now           time.Time
	recurse       jobsRecursion // -R, --recurse-all, -L (jobs_recursive.go)
	fromStdin     bool          // testing: job-list objects on stdin, one per line
	width         int           // -w: truncate lines at N columns (0: the terminal's, -1: never)
	filtered      bool          // a filtering option was given
	filterSet     bool          // --filter was given
	stderr        io.Writer
	stdin         io.Reader
}

func newJobsCmd() *cobra.Command {
	var o jobsOptions
	cmd := &cobra.Command{
		Use:   "jobs [OPTIONS] [JOBID...]",
		Short: "List jobs",
		Long: `List jobs. By default only pending and running jobs of the current user
are listed; -a adds inactive jobs, -A lists every user's jobs.

Formats use Python's format syntax; see flux-jobs(1) for the field names.
Named formats: ` + jobsFormatNames() + ` (--format=help describes them,
with those configured in flux-jobs.toml files; --format=get-config=NAME
prints one as configuration to start from).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ids = args
			o.userChanged = cmd.Flags().Changed("user")
			for _, name := range []string{"all", "all-users", "count", "filter", "since", "user", "name", "queue"} {
				if cmd.Flags().Changed(name) {
					o.filtered = true
				}
			}
			o.filterSet = cmd.Flags().Changed("filter")
			o.stderr = cmd.ErrOrStderr()
			o.recurse.levelSet = cmd.Flags().Changed("level")
			o.now = time.Now()
			ctx, cancel := cmdContext()
			defer cancel()
			if done, err := jobsFormatSet.special(cmd.OutOrStdout(), o.format); done {
				return err
			}
			if o.fromStdin && !o.stats && !o.statsOnly && !o.recurse.enabled() {
				o.stdin = cmd.InOrStdin()
				return runJobs(ctx, nil, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			return runJobs(ctx, h, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "a", false, "List jobs in all states")
	f.BoolVarP(&o.allUsers, "all-users", "A", false, "List all jobs for all users")
	f.IntVarP(&o.count, "count", "c", 1000, "Limit output to `N` jobs (0: no limit)")
	f.StringSliceVarP(&o.filters, "filter", "f", nil, "List jobs with specific job state or result")
	f.StringVar(&o.since, "since", "", "Include jobs that have become inactive since WHEN (implies -a if no other --filter option is specified)")
	f.BoolVarP(&o.noHeader, "no-header", "n", false, "Suppress printing of header line")
	f.BoolVar(&o.noHeader, "suppress-header", false, "Suppress printing of header line")
	f.MarkHidden("suppress-header")
	f.StringVarP(&o.user, "user", "u", "", "Limit output to specific username or userid (Specify \"all\" for all users)")
	f.StringVar(&o.name, "name", "", "Limit output to specific job name")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Limit output to specific queue or queues")
	f.StringVarP(&o.include, "include", "i", "", "Limit output to jobs that were allocated to the specified HOSTS or RANKS provided as a hostlist or idset")
	f.StringVarP(&o.format, "format", "o", "default", "Specify output format using Python's string format syntax or a defined format by name (use 'help' to get a list of names)")
	f.StringVar(&o.sort, "sort", "", "Specify sort order")
	f.BoolVar(&o.json, "json", false, "Output jobs in JSON instead of formatted output")
	addColorFlag(f, &o.color, false)
	f.BoolVar(&o.stats, "stats", false, "Print job statistics before header")
	f.BoolVar(&o.statsOnly, "stats-only", false, "Print job statistics only and exit")
	addRecursionFlags(f, &o.recurse)
	f.IntVarP(&o.width, "width", "w", -1, "truncate output at width `N` (N=0, the default without N: the terminal's width, when stdout is one)")
	f.Lookup("width").NoOptDefVal = "0"
	f.BoolVar(&o.fromStdin, "from-stdin", false, "read jobs from stdin as job-list JSON objects, one per line (testing; filters are ignored)")
	f.MarkHidden("from-stdin")
	// -A and -a are single-letter flags in flux-core; keep the long names hidden
	f.Lookup("all-users").Hidden = true
	return cmd
}

func jobsFormatNames() string {
	var names []string
	for _, f := range jobsFormats {
		names = append(names, f.name)
	}
	return strings.Join(names, ", ")
}

// jobsFormatSet adds the formats users and sites configure
// (flux-jobs.toml ...) to the built-in ones.
var jobsFormatSet = &formatSet{prog: "flux-jobs", env: "FLUX_JOBS_FORMAT_DEFAULT", builtin: jobsFormats}

// jobsFormatString resolves a named format (or FLUX_JOBS_FORMAT_DEFAULT).
func jobsFormatString(name string) (string, error) { return jobsFormatSet.resolve(name) }

// jobsLookupUser resolves a user name or numeric uid.
func jobsLookupUser(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		// a number as Python's int() reads one ("+0", " 7")
		if n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(s), "+"), 10, 64); err == nil && n >= 0 && n <= math.MaxUint32 {
			return uint32(n), nil
		}
		return 0, fmt.Errorf("Invalid user %s specified", s)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("Invalid user %s specified", s)
	}
	return uint32(n), nil
}

// parseSince reads --since: a timestamp, or a point in time as
// --begin-time takes one (parseDatetime: -FSD from now, a date and time,
// "yesterday 8am").
func parseSince(s string, now time.Time) (float64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "+") {
		return f, nil
	}
	t, err := parseDatetime(s, now)
	if err != nil {
		return 0, fmt.Errorf("invalid --since: %w (or a timestamp)", err)
	}
	return float64(t.UnixNano()) / 1e9, nil
}

// jobsConstraint builds the job-list constraint and the user filter.
func jobsConstraint(o *jobsOptions) (any, float64, error) {
	var since float64
	filtered := len(o.filters) > 0
	if o.since != "" {
		t, err := parseSince(o.since, o.now)
		if err != nil {
			return nil, 0, err
		}
		if t > float64(o.now.UnixNano())/1e9 {
			return nil, 0, fmt.Errorf("--since=%s appears to be in the future", o.since)
		}
		since = t
		if !filtered {
			o.all = true
		}
	}
	var states job.State
	var results job.Result
	filters := o.filters
	if o.all {
		if o.filterSet {
			if o.stderr != nil {
				fmt.Fprintln(o.stderr, "flux-jobs: WARNING: Both -a and --filter specified, ignoring -a")
			}
		} else {
			filters = []string{"pending", "running", "inactive"}
		}
	}
	if len(filters) == 0 {
		filters = []string{"pending", "running"}
	}
	for _, f := range filters {
		for _, w := range strings.Split(f, ",") {
			if w == "" {
				continue
			}
			s, r, err := job.ParseStateOrResult(w)
			if err != nil {
				return nil, 0, fmt.Errorf("Invalid filter specified: %s", strings.ToLower(w))
			}
			states |= s
			results |= r
		}
	}
	var and []any
	uid := uint64(os.Getuid())
	switch {
	case o.allUsers || o.user == "all":
		uid = math.MaxUint32
	case o.user != "":
		n, err := jobsLookupUser(o.user)
		if err != nil {
			return nil, 0, err
		}
		uid = uint64(n)
	case o.include != "":
		uid = math.MaxUint32 // --include implies every user
	}
	if uid != math.MaxUint32 {
		and = append(and, map[string]any{"userid": []uint64{uid}})
	}
	switch {
	case states != 0 && results != 0:
		and = append(and, map[string]any{"or": []any{
			map[string]any{"states": []uint32{uint32(states)}},
			map[string]any{"results": []uint32{uint32(results)}}}})
	case states != 0:
		and = append(and, map[string]any{"states": []uint32{uint32(states)}})
	case results != 0:
		and = append(and, map[string]any{"results": []uint32{uint32(results)}})
	}
	if o.name != "" {
		and = append(and, map[string]any{"name": []string{o.name}})
	}
	if len(o.queues) > 0 {
		and = append(and, map[string]any{"queue": o.queues})
	}
	if o.include != "" {
		if ids, err := idset.Parse(o.include); err == nil {
			and = append(and, map[string]any{"ranks": []string{ids.String()}})
		} else if hl, err := hostlist.Parse(o.include); err == nil {
			and = append(and, map[string]any{"hostlist": []string{hl.String()}})
		} else {
			return nil, 0, fmt.Errorf("-i/--include: invalid targets: %s", o.include)
		}
	}
	if and == nil {
		and = []any{}
	}
	return map[string]any{"and": and}, since, nil
}

// runJobs fetches and prints jobs.
func runJobs(ctx context.Context, h *flux.Handle, o jobsOptions, out, errw io.Writer) error {
	color, err := useColor(o.color, out)
	if err != nil {
		return err
	}
	if o.json && (o.stats || o.statsOnly) {
		return fmt.Errorf("--json incompatible with --stats or --stats-only")
	}
	if o.stats || o.statsOnly {
		active, err := printJobStats(ctx, h, out, o.queues)
		if err != nil {
			return err
		}
		if o.statsOnly {
			if !active {
				return exitCode(1)
			}
			return nil
		}
	}
	format, err := jobsFormatString(o.format)
	if err != nil {
		return err
	}
	of, err := compileFormat(format, jobFieldSource)
	if err != nil {
		return fmt.Errorf("Error in user format: %w", err)
	}
	if o.sort == "" {
		o.sort = of.sortKeys // a sort: prefix of the format
	}
	// the attributes of the fields shown and of the sort keys
	fields := of.fields
	for _, k := range strings.Split(o.sort, ",") {
		if k = strings.TrimPrefix(k, "-"); k != "" {
			fields = append(fields[:len(fields):len(fields)], fmtField{name: k})
		}
	}
	attrs := jobFieldsAttrs(fields)
	if color {
		attrs = append(attrs, "state", "result", "annotations")
	}
	if o.json {
		o.noHeader = true
		attrs = []string{job.AttrAll}
	}
	attrs = o.recurse.attrs(attrs)
	now := float64(o.now.UnixNano()) / 1e9
	var rows []jobRow
	truncated := false
	missing := 0 // ids not found: listed as errors, and the exit is 1
	if o.fromStdin {
		if rows, err = jobsFromStdin(o.stdin, now); err != nil {
			return err
		}
	} else if len(o.ids) > 0 {
		ids := make([]jobid.ID, len(o.ids))
		for i, s := range o.ids {
			id, err := parseJobIDArg(s)
			if err != nil {
				return usageError{fmt.Errorf("argument jobids: invalid JobID value: '%s'", s)}
			}
			ids[i] = id
		}
		if o.filtered && !o.recurse.enabled() {
			fmt.Fprintln(errw, "flux-jobs: WARNING: Filtering options ignored with jobid list")
		}
		for i, id := range ids {
			j, err := job.ListID(ctx, h, id, attrs, 0)
			if err != nil {
				// flux-core's wording, without a prefix
				if errors.Is(err, syscall.ENOENT) {
					fmt.Fprintf(errw, "JobID %s unknown\n", o.ids[i])
				} else {
					fmt.Fprintf(errw, "rpc: %s\n", flux.ErrorText(err))
				}
				continue
			}
			rows = append(rows, jobRow{Info: j, now: now})
		}
		if len(rows) == 0 {
			return exitCode(1) // none found; some found is success, as in flux-core
		}
	} else {
		c, since, err := jobsConstraint(&o)
		if err != nil {
			return err
		}
		max := o.count
		if max > 0 {
			max++
		}
		rows, err = listRows(ctx, h, job.ListRequest{MaxEntries: max, Attrs: attrs, Since: since, Constraint: c}, now)
		if err != nil {
			return err
		}
		if o.count > 0 && len(rows) > o.count {
			rows = rows[:o.count]
			truncated = true
		}
	}
	if needsInstances(of.fields) || strings.Contains(o.sort, "instance.") {
		fetchInstances(ctx, rows)
	}
	if needsFairShare(of.fields, o.sort) {
		fetchFairShare(ctx, h, rows)
	}
	if o.sort != "" {
		if err := sortItems(rows, o.sort, jobFieldSource); err != nil {
			return err
		}
	}
	if o.json {
		list := make([]map[string]any, len(rows))
		for i, r := range rows {
			list[i] = jobJSON(r)
		}
		var v any = map[string]any{"jobs": list}
		if len(o.ids) == 1 {
			if len(list) == 0 {
				return exitCode(1)
			}
			v = list[0]
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
		if missing > 0 {
			return exitCode(1)
		}
		return nil
	}
	if err := of.prepareHeader(rows, !o.noHeader); err != nil {
		return err
	}
	width := o.width
	if width == 0 {
		if width, _, _ = terminalSize(out); width <= 0 {
			width = -1 // no terminal: no limit
		}
	}
	bw := newJobsOut(out)
	if !o.noHeader {
		bw.line(string(truncateLine([]byte(of.header()), width)))
	}
	for _, r := range rows {
		code := ""
		if color {
			code = jobRowColor(r)
		}
		if err := bw.format(func(b []byte) ([]byte, error) {
			b = append(b, code...)
			start := len(b)
			b, err := of.appendLine(b, r)
			if err == nil && width > 0 {
				b = append(b[:start], truncateLine(b[start:], width)...)
			}
			return b, err
		}); err != nil {
			return err
		}
		if code != "" {
			bw.buf = append(bw.buf, sgrResetFlux...) // after the newline, as flux-core writes it
		}
	}
	if err := bw.flush(); err != nil {
		return err
	}
	if !o.noHeader && truncated {
		fmt.Fprintf(errw, "warning: output truncated at %d jobs.\n", o.count)
		fmt.Fprintln(errw, "Use --count to increase returned results or use filters to alter results.")
	}
	if err := recurseJobs(ctx, o, rows, out, errw); err != nil {
		return err
	}
	if missing > 0 {
		return exitCode(1)
	}
	return nil
}

// jobRowColor is the color of a job's line with --color, flux-core's: by
// result (completed green, failed and timed out red, canceled gray),
// else blue for a running Flux instance; "" for none.
func jobRowColor(r jobRow) string {
	if r.Has.Has(job.AttrResult) && r.State == job.StateInactive {
		switch r.Result.String() {
		case "COMPLETED":
			return sgrBoldGreen
		case "FAILED", "TIMEOUT":
			return sgrBoldRed
		case "CANCELED":
			return sgrWhite
		}
		return ""
	}
	if instanceURI(r.Info) != "" {
		return sgrBoldBlue
	}
	return ""
}

// printJobStats prints the --stats line; it reports whether any job is
// active.
func printJobStats(ctx context.Context, h *flux.Handle, out io.Writer, queues []string) (bool, error) {
	all, err := getJobStats(ctx, h)
	if err != nil {
		return false, fmt.Errorf("error retrieving job stats: %w", err)
	}
	st := &all.jobStats
	if names := queues; len(names) > 0 {
		// the statistics of the queues asked for (flux-jobs(1) --stats)
		st = &jobStats{JobStates: map[string]int{}}
		for _, name := range names {
			for _, q := range all.Queues {
				if q.Name == name {
					st.addUp(&q.jobStats)
				}
			}
		}
	}
	fmt.Fprintf(out, "%d running, %d completed, %d failed, %d pending, %d inactive purged\n",
		st.running(), st.Successful, st.failed(), st.pending(), st.InactivePurged)
	return st.pending()+st.running() > 0, nil
}

// jobStats is a job-list.job-stats answer: counts for all jobs, and for
// the jobs of each named queue.
type jobStats struct {
	JobStates  map[string]int `json:"job_states"`
	Successful int            `json:"successful"`
	Failed     int            `json:"failed"`
	Canceled   int            `json:"canceled"`
	Timeout    int            `json:"timeout"`
	// InactivePurged: per queue in the queues' entries
	InactivePurged int `json:"inactive_purged"`
}

type allJobStats struct {
	jobStats
	Queues []struct {
		Name string `json:"name"`
		jobStats
	} `json:"queues"`
}

func (st *jobStats) addUp(o *jobStats) {
	for k, n := range o.JobStates {
		st.JobStates[k] += n
	}
	st.Successful += o.Successful
	st.Failed += o.Failed
	st.Canceled += o.Canceled
	st.Timeout += o.Timeout
	st.InactivePurged += o.InactivePurged
}

func getJobStats(ctx context.Context, h *flux.Handle) (*allJobStats, error) {
	var st allJobStats
	if err := h.Call(ctx, "job-list.job-stats", flux.NodeidAny, map[string]any{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func (st *jobStats) pending() int {
	return st.JobStates["depend"] + st.JobStates["priority"] + st.JobStates["sched"]
}

func (st *jobStats) running() int { return st.JobStates["run"] + st.JobStates["cleanup"] }

// failed counts every unsuccessful job, canceled and timed out ones too
// (as flux-core's JobStats does).
func (st *jobStats) failed() int { return st.Failed + st.Canceled + st.Timeout }

// listRows fetches a listing, decoding its chunks on other goroutines
// while the next ones arrive (a listing of every job of a busy instance
// is tens of megabytes); the rows keep job-list's order.
func listRows(ctx context.Context, h *flux.Handle, req job.ListRequest, now float64) ([]jobRow, error) {
	type chunk struct {
		rows []jobRow
		err  error
	}
	var chunks []*chunk
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	err := job.ListPages(ctx, h, req, func(p []byte) error {
		c := &chunk{}
		chunks = append(chunks, c)
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			c.err = job.DecodeJobs(p, func(j *job.Info) { c.rows = append(c.rows, jobRow{Info: j, now: now}) })
		}()
		return nil
	})
	wg.Wait()
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range chunks {
		if c.err != nil {
			return nil, c.err
		}
		n += len(c.rows)
	}
	rows := make([]jobRow, 0, n)
	for _, c := range chunks {
		rows = append(rows, c.rows...)
	}
	return rows, nil
}

// jobsOut buffers output lines (listings can be long).
type jobsOut struct {
	w   io.Writer
	buf []byte
	err error
}

func newJobsOut(w io.Writer) *jobsOut { return &jobsOut{w: w, buf: make([]byte, 0, 64*1024)} }

func (l *jobsOut) line(s string) {
	l.buf = append(append(l.buf, s...), '\n')
	if len(l.buf) > 60*1024 {
		l.flush()
	}
}

// format appends a line made by appendLine.
func (l *jobsOut) format(appendLine func([]byte) ([]byte, error)) error {
	b, err := appendLine(l.buf)
	if err != nil {
		return err
	}
	l.buf = append(b, '\n')
	if len(l.buf) > 60*1024 {
		l.flush()
	}
	return nil
}

func (l *jobsOut) flush() error {
	if l.err == nil && len(l.buf) > 0 {
		_, l.err = l.w.Write(l.buf)
	}
	l.buf = l.buf[:0]
	return l.err
}

// sortJobIDs orders ids newest first (for flux job last fallbacks).
func sortJobIDs(ids []jobid.ID) {
	sort.Slice(ids, func(a, b int) bool { return ids[a] > ids[b] })
}

// maxStdinJobLine bounds one line of --from-stdin input.
const maxStdinJobLine = 1 << 20

// jobsFromStdin reads --from-stdin's input: one job-list job object per
// line (flux-core's testing option).
func jobsFromStdin(r io.Reader, now float64) ([]jobRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxStdinJobLine)
	var rows []jobRow
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		j, err := job.DecodeJob(line)
		if err != nil {
			return nil, fmt.Errorf("JSON input error: line %d: %v", n, err)
		}
		rows = append(rows, jobRow{Info: j, now: now})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("JSON input error: %v", err)
	}
	return rows, nil
}

// truncateLine cuts a line longer than width characters to width-1 of
// them and a "+", as flux-core's --width does (width <= 0: no limit).
func truncateLine(line []byte, width int) []byte {
	if width <= 0 || utf8.RuneCount(line) <= width {
		return line
	}
	n, i := 0, 0
	for i < len(line) && n < width-1 {
		_, size := utf8.DecodeRune(line[i:])
		i += size
		n++
	}
	return append(line[:i:i], '+')
}

// jobsWidthArgs joins "-w N" and "--width N" into "--width=N" for flux
// jobs: the option's value is optional (argparse's nargs="?"), which the
// flag parser only reads in the attached form.
func jobsWidthArgs(args []string) []string {
	if len(args) == 0 || args[0] != "jobs" {
		return args
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-w" || a == "--width") && i+1 < len(args) {
			if _, err := strconv.Atoi(args[i+1]); err == nil {
				out = append(out, "--width="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}
