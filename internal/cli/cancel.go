package cli

import (
	"context"
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// State bits (RFC 21) for job-list constraints.
var stateBits = map[string]int{
	"new": 1, "depend": 2, "priority": 4, "sched": 8, "run": 16, "cleanup": 32, "inactive": 64,
	"pending": 14, "running": 48, "active": 62,
}

type cancelOptions struct {
	all     bool
	user    string
	states  []string
	dryRun  bool
	quiet   bool
	message string
}

func newCancelCmd() *cobra.Command {
	var o cancelOptions
	cmd := &cobra.Command{
		Use:   "cancel [OPTIONS] [JOBID...]",
		Short: "Cancel one or more jobs",
		Long: `Cancel the given jobs, or every active job of the current user selected
with --all, --user or --states (--user=all: every user, for the instance
owner and operators).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCancel(o, args, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "A", false, "cancel all of the user's active jobs")
	f.StringVarP(&o.user, "user", "u", "", "cancel jobs of `USER` (name, id, or \"all\"; owner or operator for another user); implies --all")
	f.StringSliceVarP(&o.states, "states", "S", nil, "only jobs in these `STATES` (depend, priority, sched, run, pending, running, active; default active); implies --all")
	f.BoolVarP(&o.dryRun, "dry-run", "n", false, "only print how many jobs would be canceled")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing when no jobs match")
	f.StringVarP(&o.message, "message", "m", "", "add a message to the cancel exception")
	return cmd
}

// userid resolves a user name or number.
func lookupUserid(s string) (int64, error) {
	if s == "all" {
		return -1, nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return int64(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("unknown user %q", s)
	}
	n, _ := strconv.ParseUint(u.Uid, 10, 32)
	return int64(n), nil
}

// jobCount is "1 job" or "N jobs".
func jobCount(n int) string {
	if n == 1 {
		return "1 job"
	}
	return fmt.Sprintf("%d jobs", n)
}

func runCancel(o cancelOptions, args []string, errw io.Writer) error {
	// like flux-core, --user and --states select jobs just as --all does
	selecting := o.all || o.user != "" || len(o.states) > 0
	switch {
	case selecting && len(args) > 0:
		return fmt.Errorf("job ids cannot be combined with --all, --user or --states")
	case !selecting && len(args) == 0:
		return fmt.Errorf("no jobs given: name job ids or use --all, --user or --states")
	}
	if !selecting {
		ids, err := parseJobIDs(args)
		if err != nil {
			return err
		}
		if o.dryRun {
			fmt.Fprintf(errw, "flux-cancel: Would cancel %s\n", jobCount(len(ids)))
			return nil
		}
		return withHandle(func(ctx context.Context, h *flux.Handle) error {
			if raiseJobs(ctx, h, ids, "cancel", 0, o.message, errw, "flux-cancel") > 0 {
				return exitCode(1)
			}
			return nil
		})
	}
	states := "active"
	if len(o.states) > 0 {
		states = strings.Join(o.states, ",")
		// flux-core's flux cancel (Python) words a bad state so
		for _, s := range strings.Split(states, ",") {
			if _, ok := stateBits[strings.ToLower(strings.TrimSpace(s))]; !ok {
				return fmt.Errorf("Invalid state %s specified", s)
			}
		}
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		// one request: the job manager picks and cancels the jobs
		count, errs, err := raiseAll(ctx, h, o.dryRun, o.user, states, "cancel", 0, o.message)
		if err != nil {
			return err
		}
		switch {
		case count == 0:
			if !o.quiet {
				fmt.Fprintf(errw, "flux-cancel: Matched 0 jobs\n")
			}
		case o.dryRun:
			fmt.Fprintf(errw, "flux-cancel: Would cancel %s\n", jobCount(count))
		default:
			errWord := "errors"
			if errs == 1 {
				errWord = "error"
			}
			fmt.Fprintf(errw, "flux-cancel: Canceled %s (%d %s)\n", jobCount(count), errs, errWord)
		}
		if errs > 0 {
			return exitCode(1)
		}
		return nil
	})
}
