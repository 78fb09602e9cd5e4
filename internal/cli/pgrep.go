package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux pgrep / flux pkill [OPTIONS] EXPRESSION...: list or cancel the jobs
// whose name matches a pattern and/or whose id is in a range
// (flux-pgrep(1)).

// pgrepFormats are flux pgrep's named formats (flux-pgrep.toml files may
// add more).
var pgrepFormats = &formatSet{prog: "flux-pgrep", env: "FLUX_PGREP_FORMAT_DEFAULT", builtin: []namedFormat{
	{"default", "Print the job ID only", "{id.f58}"},
	{"full", "The default flux jobs format", jobsFormats[0].format},
	{"long", "The long flux jobs format", jobsFormats[2].format},
	{"deps", "Show job urgency, priority, and dependencies", jobsFormats[3].format},
}}

type pgrepOptions struct {
	jobsOptions
	maxEntries int
	wait       bool
	kill       bool
}

// pgrepExpr is one expression: a name pattern, an id range, or both.
type pgrepExpr struct {
	name   *regexp.Regexp
	lo, hi jobid.ID
	isIDs  bool
}

func parsePgrepExpr(s string) (*pgrepExpr, error) {
	e := &pgrepExpr{}
	if pat, ok := strings.CutPrefix(s, "name:"); ok {
		s = pat
	} else if a, b, ok := strings.Cut(s, ".."); ok {
		lo, err1 := jobid.Parse(a)
		hi, err2 := jobid.Parse(b)
		if err1 == nil && err2 == nil {
			e.lo, e.hi, e.isIDs = lo, hi, true
			return e, nil
		}
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("invalid expression %q: %v", s, err)
	}
	e.name = re
	return e, nil
}

func (e *pgrepExpr) match(j *job.Info) bool {
	if e.isIDs && (j.ID < e.lo || j.ID > e.hi) {
		return false
	}
	if e.name != nil && !e.name.MatchString(j.Name) {
		return false
	}
	return true
}

func newPgrepCmd() *cobra.Command { return newPgrepKillCmd(false) }
func newPkillCmd() *cobra.Command { return newPgrepKillCmd(true) }

func newPgrepKillCmd(kill bool) *cobra.Command {
	o := pgrepOptions{kill: kill}
	name, short := "pgrep", "List jobids that match a name pattern or id range"
	if kill {
		name, short = "pkill", "Cancel jobs that match a name pattern or id range"
	}
	cmd := &cobra.Command{
		Use:   name + " [OPTIONS] EXPRESSION...",
		Short: short,
		Long: short + `. An expression is a regular expression matched against
the job name, a range of jobids JOBID1..JOBID2, or name:PATTERN to force a
name match. By default only active jobs of the current user are considered.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && cmd.Flags().Lookup("format") != nil && (o.format == "help" || strings.HasPrefix(o.format, "get-config=")) {
				return nil // flux pgrep -o help needs no expression
			}
			if len(args) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "flux-%s: at least one EXPRESSION is required (a name pattern, JOBID1..JOBID2 or name:PATTERN)\n", name)
				return exitCode(2) // a command line error (flux-pgrep(1))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := pgrepFormats.special(cmd.OutOrStdout(), o.format); done {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			o.now = time.Now()
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			return runPgrep(ctx, h, args, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "flux-%s: %v\n", name, err)
		return exitCode(2)
	})
	f := cmd.Flags()
	if !kill {
		f.BoolVarP(&o.all, "all", "a", false, "Include jobs in all states")
		f.StringVarP(&o.format, "format", "o", "default", "Specify output format (default, full, long, deps or a format string)")
		f.BoolVarP(&o.noHeader, "no-header", "n", false, "Suppress printing of header line")
	} else {
		f.BoolVarP(&o.wait, "wait", "w", false, "Wait for jobs to finish after cancel")
	}
	f.BoolVarP(&o.allUsers, "all-users", "A", false, "Include jobs for all users")
	f.Lookup("all-users").Hidden = true
	f.StringVarP(&o.user, "user", "u", "", "Fetch jobs only for the given user, instead of the current UID")
	f.StringSliceVarP(&o.filters, "filter", "f", nil, "Include jobs with specific job state or result")
	f.StringSliceVarP(&o.queues, "queue", "q", nil, "Only include jobs in the named queue(s)")
	f.IntVarP(&o.count, "count", "c", 1000, "Limit output to the first N matches")
	f.IntVar(&o.maxEntries, "max-entries", 1000, "Limit the number of jobs to consider to N entries")
	return cmd
}

func runPgrep(ctx context.Context, h *flux.Handle, args []string, o pgrepOptions, out, errw io.Writer) error {
	prog := "flux-pgrep"
	if o.kill {
		prog = "flux-pkill"
	}
	var exprs []*pgrepExpr
	for _, a := range args {
		e, err := parsePgrepExpr(a)
		if err != nil {
			fmt.Fprintf(errw, "%s: %v\n", prog, err)
			return exitCode(2)
		}
		exprs = append(exprs, e)
	}
	if done, err := pgrepFormats.special(out, o.format); done {
		if err != nil {
			fmt.Fprintf(errw, "%s: %v\n", prog, err)
			return exitCode(2)
		}
		return nil
	}
	arg := o.format
	if o.kill && (arg == "" || arg == "default") {
		arg = pgrepFormats.builtin[0].format // pkill: not the user's default
		o.noHeader = true
	}
	if arg == "" || arg == "default" {
		if env := os.Getenv(pgrepFormats.env); env != "" {
			arg = env
		}
		if arg == "" || arg == "default" {
			o.noHeader = true // bare IDs, one per line
		}
	}
	format, err := pgrepFormats.resolve(arg)
	if err != nil {
		fmt.Fprintf(errw, "%s: %v\n", prog, err)
		return exitCode(2)
	}
	if o.kill {
		o.all = false
		if len(o.filters) == 0 {
			o.filters = []string{"pending", "running"}
		}
	}
	of, err := compileFormat(format, jobFieldSource)
	if err != nil {
		fmt.Fprintf(errw, "%s: Error in user format: %v\n", prog, err)
		return exitCode(2)
	}
	attrs := jobFieldsAttrs(of.fields)
	hasName := false
	for _, a := range attrs {
		hasName = hasName || a == "name"
	}
	if !hasName {
		attrs = append(attrs, "name")
	}
	c, _, err := jobsConstraint(&o.jobsOptions)
	if err != nil {
		fmt.Fprintf(errw, "%s: %v\n", prog, err)
		return exitCode(2)
	}
	jobs, err := job.List(ctx, h, job.ListRequest{MaxEntries: o.maxEntries, Attrs: attrs, Constraint: c})
	if err != nil {
		return err
	}
	now := float64(o.now.UnixNano()) / 1e9
	var rows []jobRow
	for _, j := range jobs {
		for _, e := range exprs {
			if e.match(j) {
				rows = append(rows, jobRow{Info: j, now: now})
				break
			}
		}
		if o.count > 0 && len(rows) >= o.count {
			break
		}
	}
	if len(rows) == 0 {
		return exitCode(1)
	}
	if o.kill {
		return pkill(ctx, h, rows, o.wait, prog, errw)
	}
	if err := of.prepareHeader(rows, !o.noHeader); err != nil {
		return err
	}
	w := newJobsOut(out)
	if !o.noHeader {
		w.line(of.header())
	}
	for _, r := range rows {
		l, err := of.line(r)
		if err != nil {
			return err
		}
		w.line(l)
	}
	return w.flush()
}

// pkill cancels the jobs (and with wait, waits for them to be inactive).
func pkill(ctx context.Context, h *flux.Handle, rows []jobRow, wait bool, prog string, errw io.Writer) error {
	failed := false
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range rows {
		id := r.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := job.Raise(h, id, "cancel", 0, "")
			if err == nil {
				err = f.Decode(ctx, nil)
			}
			if err == nil && wait {
				_, err = job.WaitEvent(ctx, h, id, "eventlog", 0, job.EventNamed("clean"))
			}
			if err != nil {
				mu.Lock()
				failed = true
				fmt.Fprintf(errw, "%s: %s: %s\n", prog, id.String(), flux.ErrorText(err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed {
		return exitCode(1)
	}
	return nil
}
