package cli

import (
	"context"
	"fmt"
	"io"
	"os/user"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// State bits (RFC 21) for job-list constraints.
var stateBits = map[string]int{
	"new": 1, "depend": 2, "priority": 4, "sched": 8, "run": 16, "cleanup": 32, "inactive": 64,
	"pending": 14, "running": 48, "active": 62,
}

type cancelOptions struct {
	all     bool
	user    string
	states  string
	dryRun  bool
	quiet   bool
	message string
}

func newCancelCmd() *cobra.Command {
	var o cancelOptions
	cmd := &cobra.Command{
		Use:   "cancel [OPTIONS] [JOBID...]",
		Short: "Cancel one or more jobs",
		Long: `Cancel the given jobs, or with --all every active job of the current user
(or of --user, for the instance owner), optionally only those in --states.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCancel(o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.all, "all", "A", false, "cancel all of the user's active jobs")
	f.StringVarP(&o.user, "user", "u", "", "with --all: cancel jobs of `USER` (name, id, or \"all\"; owner only)")
	f.StringVarP(&o.states, "states", "S", "active", "with --all: only jobs in these `STATES` (comma list: pending, running, sched, ...)")
	f.BoolVarP(&o.dryRun, "dry-run", "n", false, "with --all: only print how many jobs would be canceled")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "with --all: do not print the number of jobs canceled")
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

func runCancel(o cancelOptions, args []string, out, errw io.Writer) error {
	if o.all == (len(args) > 0) {
		return fmt.Errorf("give job ids or --all (not both)")
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		var err error
		var ids []jobid.ID
		if o.all {
			// one request: the job manager picks and cancels the jobs
			count, errs, err := raiseAll(ctx, h, o.dryRun, o.user, o.states, "cancel", 0, o.message)
			if err != nil {
				return err
			}
			switch {
			case o.dryRun:
				fmt.Fprintf(errw, "flux-cancel: Would cancel %d jobs\n", count)
			case !o.quiet:
				fmt.Fprintf(errw, "flux-cancel: Canceled %d jobs (%d errors)\n", count-errs, errs)
			}
			if errs > 0 {
				return exitCode(1)
			}
			return nil
		} else if ids, err = parseJobIDs(args); err != nil {
			return err
		}
		failed := raiseJobs(ctx, h, ids, "cancel", 0, o.message, errw, "flux-cancel")
		if failed > 0 {
			return exitCode(1)
		}
		return nil
	})
}
