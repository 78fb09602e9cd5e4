package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux job cancelall, raiseall and killall: exceptions or signals for
// every job of a user (or, for the instance owner, of all users) in the
// given states, through the job manager's raiseall and killall services;
// without --force they only count the jobs they would touch. flux cancel
// --all uses raiseall too.

// parseStatesMask turns a comma list of state names into RFC 21 bits.
func parseStatesMask(opt, list string) (int, error) {
	mask := 0
	for _, s := range strings.Split(list, ",") {
		bit, ok := stateBits[strings.ToLower(strings.TrimSpace(s))]
		if !ok {
			if strings.TrimSpace(s) == "" && list == "" {
				return 0, statesError{fmt.Errorf("no states specified")}
			}
			return 0, statesError{fmt.Errorf("error parsing %s: %s is unknown", opt, s)}
		}
		mask |= bit
	}
	if mask&stateBits["inactive"] != 0 {
		return 0, statesError{fmt.Errorf("Exceptions cannot be raised on inactive jobs")}
	}
	return mask, nil
}

// targetUserid resolves --user (empty: the caller).
func targetUserid(user string) (int64, error) {
	if user == "" {
		return int64(os.Getuid()), nil
	}
	return lookupUserid(user)
}

// raiseAll asks job-manager.raiseall for the jobs of user (--user; ""
// is the caller) in the comma list of states and returns how many
// matched.
func raiseAll(ctx context.Context, h *flux.Handle, dryRun bool, user, states string, typ string, severity int, note string) (count, errs int, err error) {
	userid, err := targetUserid(user)
	if err != nil {
		return 0, 0, err
	}
	mask, err := parseStatesMask("--states", states)
	if err != nil {
		return 0, 0, err
	}
	req := map[string]any{"dry_run": dryRun, "userid": userid, "states": mask, "type": typ, "severity": severity}
	if note != "" {
		req["note"] = note
	}
	var resp struct {
		Count  int `json:"count"`
		Errors int `json:"errors"`
	}
	if err := h.Call(ctx, "job-manager.raiseall", flux.NodeidAny, req, &resp); err != nil {
		return 0, 0, fmt.Errorf("%s", flux.ErrorText(err))
	}
	return resp.Count, resp.Errors, nil
}

type jobBulkOptions struct {
	user     string
	states   string
	force    bool
	quiet    bool
	severity int
	signal   string
}

func newJobCancelallCmd() *cobra.Command {
	var o jobBulkOptions
	cmd := &cobra.Command{
		Use:   "cancelall [OPTIONS] [MESSAGE...]",
		Short: "Cancel every job of a user in the given states (-f to confirm)",
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return o.raise(cmd, "cancel", 0, strings.Join(args, " "), "Canceled")
		}),
	}
	o.flags(cmd, true)
	return cmd
}

func newJobRaiseallCmd() *cobra.Command {
	o := jobBulkOptions{severity: 7}
	cmd := &cobra.Command{
		Use:   "raiseall [OPTIONS] TYPE [MESSAGE...]",
		Short: "Raise an exception of TYPE on every job of a user in the given states (-f to confirm)",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return o.raise(cmd, args[0], o.severity, strings.Join(args[1:], " "), "Raised exception on")
		}),
	}
	o.flags(cmd, true)
	cmd.Flags().IntVarP(&o.severity, "severity", "s", 7, "Set exception `SEVERITY` (0 fatal - 7 least severe)")
	return cmd
}

func newJobKillallCmd() *cobra.Command {
	var o jobBulkOptions
	cmd := &cobra.Command{
		Use:   "killall [OPTIONS]",
		Short: "Send a signal to every running job of a user (-f to confirm)",
		Args:  cobra.NoArgs,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			uid, err := targetUserid(o.user)
			if err != nil {
				return err
			}
			sig, err := signalNumber(o.signal)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var resp struct {
					Count  int `json:"count"`
					Errors int `json:"errors"`
				}
				req := map[string]any{"dry_run": !o.force, "userid": uid, "signum": sig}
				if err := h.Call(ctx, "job-manager.killall", flux.NodeidAny, req, &resp); err != nil {
					return fmt.Errorf("%s", flux.ErrorText(err))
				}
				// flux-core names the signal as strsignal(3) does
				o.report(cmd, resp.Count, resp.Errors, signalDescription(sig))
				return nil
			})
		}),
	}
	o.flags(cmd, false)
	cmd.Flags().StringVarP(&o.signal, "signal", "s", "SIGTERM", "Send signal `SIG`")
	return cmd
}

func (o *jobBulkOptions) flags(cmd *cobra.Command, states bool) {
	f := cmd.Flags()
	f.StringVarP(&o.user, "user", "u", "", "Target jobs of `USER` (name or id; \"all\" for every user: owner only)")
	if states {
		f.StringVarP(&o.states, "states", "S", "active", "Target jobs in these `STATES` (comma list: pending, running, sched, ...)")
	}
	f.BoolVarP(&o.force, "force", "f", false, "Confirm the command (without it, only count the jobs)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "Print nothing if no job matches")
}

func (o *jobBulkOptions) raise(cmd *cobra.Command, typ string, severity int, note, done string) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		count, errs, err := raiseAll(ctx, h, !o.force, o.user, o.states, typ, severity, note)
		var se statesError
		if errors.As(err, &se) {
			// flux-core reports these without the subcommand's name
			fmt.Fprintf(cmd.ErrOrStderr(), "flux-job: %v\n", err)
			return exitCode(1)
		}
		if err != nil {
			return err
		}
		o.report(cmd, count, errs, done)
		return nil
	})
}

func (o *jobBulkOptions) report(cmd *cobra.Command, count, errs int, done string) {
	switch {
	case count == 0 && o.quiet:
	case count == 0:
		fmt.Fprintln(cmd.ErrOrStderr(), "flux-job: Command matched 0 jobs")
	case !o.force:
		fmt.Fprintf(cmd.ErrOrStderr(), "flux-job: Command matched %d jobs (-f to confirm)\n", count)
	default:
		fmt.Fprintf(cmd.ErrOrStderr(), "flux-job: %s %d jobs (%d errors)\n", done, count, errs)
	}
}

// signalDescription is signal sig's description as strsignal(3) gives
// it ("Terminated", "Killed").
func signalDescription(sig int) string {
	s := syscall.Signal(sig).String()
	if s == "" {
		return "Signaled"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// statesError is a bad --states list.
type statesError struct{ error }

func (e statesError) Unwrap() error { return e.error }
