package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux watch: copy the output of jobs, even inactive ones, to the
// terminal and exit with the largest exit code, as flux submit --watch
// does for the jobs it submits.

type watchOptions struct {
	active, all bool
	count       int
	since       string
	filters     []string
	progress    bool
	jps         bool
}

func newWatchCmd() *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch [OPTIONS] [JOBID...]",
		Short: "Copy the output of jobs to the terminal and wait for them to end",
		Long: `Copy the output of the given jobs, or of the jobs the options select, to
the terminal (stdout and stderr, as flux job attach shows them), one job
after another in submission order, waiting for each to end; exit with the
largest exit code (0 if no job matches, 2 on bad options). Inactive jobs
are shown too, so a batch script can end with

  flux watch --all

to wait for the jobs it submitted and keep their output with its own.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := runWatch(cmd, o, args)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "flux-watch: %v\n", err)
				return exitCode(2)
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.active, "active", "a", false, "Watch all active jobs (--filter=pending,running)")
	f.BoolVarP(&o.all, "all", "A", false, "Watch all jobs (--filter=pending,running,inactive)")
	f.IntVarP(&o.count, "count", "c", 1000, "Watch at most `N` jobs (0: no limit)")
	f.StringVar(&o.since, "since", "", "Only jobs active since `WHEN` (-FSD or a timestamp; implies --all without --filter)")
	f.StringSliceVarP(&o.filters, "filter", "f", nil, "Only jobs in these `STATES|RESULTS` (comma list)")
	f.BoolVar(&o.progress, "progress", false, "Show a progress bar of the jobs' completion on stderr")
	f.BoolVar(&o.jps, "jps", false, "With --progress, show jobs/s instead of the elapsed time")
	return cmd
}

func runWatch(cmd *cobra.Command, o watchOptions, args []string) (int, error) {
	if o.count < 0 {
		return 0, fmt.Errorf("--count=%d: must not be negative", o.count)
	}
	selecting := o.active || o.all || o.since != "" || len(o.filters) > 0
	if len(args) > 0 && selecting {
		return 0, fmt.Errorf("give job IDs or selection options, not both")
	}
	if len(args) == 0 && !selecting {
		return 0, fmt.Errorf("no jobs to watch: give job IDs, --active, --all, --since or --filter")
	}
	var ids []jobid.ID
	for _, a := range args {
		id, err := parseJobIDArg(a)
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	code := 0
	err := withHandle(func(ctx context.Context, h *flux.Handle) error {
		if selecting {
			var err error
			if ids, err = selectWatched(ctx, h, o); err != nil {
				return err
			}
		}
		out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
		if o.progress {
			bar := newWatchProgress(ctx, h, ids, o.jps, errw)
			defer bar.stop()
			// output goes above the bar: the bar's line is erased first
			out, errw = bar.above(out), bar.above(errw)
		}
		for _, id := range ids {
			c, err := attachJob(h, id, attachOptions{readOnly: true}, nil, out, errw)
			if err != nil {
				return fmt.Errorf("%s: %w", id.String(), err)
			}
			code = max(code, c)
		}
		return nil
	})
	return code, err
}

// selectWatched lists the jobs the options select, oldest first.
func selectWatched(ctx context.Context, h *flux.Handle, o watchOptions) ([]jobid.ID, error) {
	jo := jobsOptions{filters: o.filters, since: o.since, now: time.Now()}
	switch {
	case o.all:
		jo.all = true
	case o.active && len(o.filters) == 0:
		jo.filters = []string{"pending", "running"}
	}
	c, since, err := jobsConstraint(&jo)
	if err != nil {
		return nil, err
	}
	rows, err := listRows(ctx, h, job.ListRequest{MaxEntries: o.count, Attrs: []string{"t_submit"}, Since: since, Constraint: c}, 0)
	if err != nil {
		return nil, err
	}
	sort.Slice(rows, func(i, k int) bool { return rows[i].ID < rows[k].ID })
	ids := make([]jobid.ID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids, nil
}

// watchProgress shows "PD:n R:n CD:n F:n" and the share of the watched
// jobs that ended, refreshed while the output is copied.
type watchProgress struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	w      io.Writer
	shown  bool // the bar is on the terminal's last line
}

// above returns a writer for output that must not land on the bar's line.
func (p *watchProgress) above(w io.Writer) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.shown {
			fmt.Fprint(p.w, "\r\033[K")
			p.shown = false
		}
		return w.Write(b)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func newWatchProgress(ctx context.Context, h *flux.Handle, ids []jobid.ID, jps bool, w io.Writer) *watchProgress {
	ctx, cancel := context.WithCancel(ctx)
	p := &watchProgress{cancel: cancel, done: make(chan struct{}), w: w}
	start := time.Now()
	draw := func(ctx context.Context, final bool) {
		var pd, r, cd, f int
		first := 0.0
		for _, id := range ids {
			j, err := job.ListID(ctx, h, id, []string{"state", "result", "t_submit"}, 0)
			if err != nil {
				continue
			}
			if first == 0 || j.TSubmit < first {
				first = j.TSubmit
			}
			switch {
			case j.State&job.StatePending != 0:
				pd++
			case j.State&job.StateRunning != 0:
				r++
			case j.Result == job.ResultCompleted:
				cd++
			default:
				f++
			}
		}
		elapsed := time.Since(start)
		if first > 0 {
			elapsed = time.Since(time.Unix(0, int64(first*1e9)))
		}
		total := max(len(ids), 1)
		width := 30
		n := (cd + f) * width / total
		bar := "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
		tail := elapsed.Truncate(time.Second).String()
		if jps {
			tail = fmt.Sprintf("%.1f job/s", float64(cd+f)/max(elapsed.Seconds(), 1e-3))
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		fmt.Fprintf(w, "\rPD:%d R:%d CD:%d F:%d %s %3d%% %s", pd, r, cd, f, bar, (cd+f)*100/total, tail)
		p.shown = !final
		if final {
			fmt.Fprintln(w)
		}
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			draw(ctx, false)
			select {
			case <-ctx.Done():
				final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				draw(final, true)
				cancel()
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *watchProgress) stop() {
	p.cancel()
	<-p.done
}
