package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// flux startlog: the instance's runs on its state directory, from the
// start and finish events rank 0 posts to admin.eventlog
// (flux-startlog(1)).

func newStartlogCmd() *cobra.Command {
	var check, quiet, showVersion bool
	cmd := &cobra.Command{
		Use:   "startlog [--check] [--quiet] [-v]",
		Short: "List the instance's start and stop times",
		Long: `List each run of the instance (on its state directory): when it started,
when it stopped and for how long it ran, "running" for the current run,
"crashed" for a run that ended without its shutdown sequence (jobs and
KVS changes of its last moments may have been lost). For the instance
owner only.

  --check   exit 1 if the instance last restarted after a crash
  --quiet   print nothing but errors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				raw, err := kvs.GetRaw(ctx, h, "", "admin.eventlog")
				if errors.Is(err, syscall.ENOENT) {
					raw, err = nil, nil
				}
				if err != nil {
					return fmt.Errorf("admin.eventlog: %s", flux.ErrorText(err))
				}
				evs, err := eventlog.Parse(raw)
				if err != nil {
					return fmt.Errorf("admin.eventlog: %w", err)
				}
				runs := startlogRuns(evs)
				if !quiet {
					printStartlog(cmd.OutOrStdout(), runs, showVersion, time.Now())
				}
				if check && len(runs) > 1 && runs[len(runs)-2].crashed {
					return exitCode(1)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&check, "check", false, "Exit 1 if the instance last restarted after a crash")
	f.BoolVar(&quiet, "quiet", false, "Suppress non-error output")
	f.BoolVarP(&showVersion, "show-version", "v", false, "Show the version that posted each start")
	return cmd
}

// startlogRun is one run: a start event and the finish that ended it.
type startlogRun struct {
	start, finish float64 // finish 0: running, or crashed
	crashed       bool    // another start came with no finish between
	version       string
}

func startlogRuns(evs []eventlog.Event) []startlogRun {
	var runs []startlogRun
	for _, ev := range evs {
		switch ev.Name {
		case "start":
			if n := len(runs); n > 0 && runs[n-1].finish == 0 {
				runs[n-1].crashed = true
			}
			r := startlogRun{start: ev.Timestamp}
			var c struct {
				Version string `json:"version"`
			}
			if json.Unmarshal(ev.Context, &c) == nil {
				r.version = c.Version
			}
			runs = append(runs, r)
		case "finish":
			if n := len(runs); n > 0 && runs[n-1].finish == 0 {
				runs[n-1].finish = ev.Timestamp
			}
		}
	}
	return runs
}

func printStartlog(w io.Writer, runs []startlogRun, showVersion bool, now time.Time) {
	stamp := func(t float64) string {
		return time.Unix(0, int64(t*1e9)).Format("2006-01-02 15:04:05")
	}
	for i, r := range runs {
		line := stamp(r.start) + " - "
		switch {
		case r.finish > 0:
			line += fmt.Sprintf("%s (%s)", stamp(r.finish), fsd.FormatPrecision(r.finish-r.start, 2))
		case r.crashed:
			line += "crashed"
		case i == len(runs)-1:
			line += fmt.Sprintf("running (%s)", fsd.FormatPrecision(float64(now.UnixNano())/1e9-r.start, 2))
		}
		if showVersion && r.version != "" {
			line += " fluxgo-" + r.version
		}
		fmt.Fprintln(w, line)
	}
}
