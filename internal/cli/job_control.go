package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Job control through the job manager: cancel, raise, kill, urgency.

// parseJobIDs parses job ids in any RFC 19 encoding.
func parseJobIDs(args []string) ([]jobid.ID, error) {
	ids := make([]jobid.ID, 0, len(args))
	for _, a := range args {
		id, err := jobid.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("invalid jobid %q", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// raiseJobs raises an exception on each job, reporting per-job errors
// and returning the number that failed.
func raiseJobs(ctx context.Context, h *flux.Handle, ids []jobid.ID, typ string, severity int, note string, errw io.Writer, prog string) int {
	futs := make([]*flux.Future, len(ids))
	for i, id := range ids {
		futs[i], _ = job.Raise(h, id, typ, severity, note)
	}
	failed := 0
	for i, f := range futs {
		var err error
		if f == nil {
			err = flux.ErrClosed
		} else {
			_, err = f.Get(ctx)
		}
		if err != nil {
			failed++
			fmt.Fprintf(errw, "%s: %s: %v\n", prog, ids[i].String(), err)
		}
	}
	return failed
}

func newJobCancelCmd() *cobra.Command {
	var message string
	cmd := &cobra.Command{
		Use:   "cancel [--message=MSG] ID...",
		Short: "Cancel one or more jobs",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if raiseJobs(ctx, h, ids, "cancel", 0, message, cmd.ErrOrStderr(), "flux-job: cancel") > 0 {
					return exitCode(1)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "add a message to the cancel exception")
	return cmd
}

func newJobRaiseCmd() *cobra.Command {
	var severity int
	var typ, message string
	cmd := &cobra.Command{
		Use:   "raise [--severity=N] [--type=TYPE] [--message=NOTE] ID... [--] [MESSAGE...]",
		Short: "Raise an exception on one or more jobs",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			var idArgs, msg []string
			for i, a := range args {
				if _, err := jobid.Parse(a); err != nil {
					msg = args[i:]
					break
				}
				idArgs = append(idArgs, a)
			}
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				idArgs, msg = args[:dash], args[dash:]
			}
			if len(idArgs) == 0 {
				return fmt.Errorf("no job ids given")
			}
			if severity < 0 || severity > 7 {
				return fmt.Errorf("--severity=%d: must be 0-7", severity)
			}
			note := strings.Join(msg, " ")
			if cmd.Flags().Changed("message") {
				if len(msg) > 0 {
					return fmt.Errorf("give the note either with --message or after the job ids, not both")
				}
				note = message
			}
			ids, err := parseJobIDs(idArgs)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				if raiseJobs(ctx, h, ids, typ, severity, note, cmd.ErrOrStderr(), "flux-job: raise") > 0 {
					return exitCode(1)
				}
				return nil
			})
		}),
	}
	cmd.Flags().IntVarP(&severity, "severity", "s", 0, "exception severity (0 is fatal)")
	cmd.Flags().StringVarP(&typ, "type", "t", "cancel", "exception type")
	cmd.Flags().StringVarP(&message, "message", "m", "", "exception `NOTE` (instead of MESSAGE after the ids)")
	return cmd
}

// signalNumber parses a signal name (TERM, SIGTERM) or number.
func signalNumber(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		// a number past the last signal is the job manager's to refuse
		// ("Invalid signal number"), as in flux-core
		if n <= 0 || n > 1<<16 {
			return 0, fmt.Errorf("Invalid signal %s", s)
		}
		return n, nil
	}
	name := strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "SIG"))
	for i := syscall.Signal(1); i < 65; i++ {
		if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(unixSignalName(i)), "SIG"), name) {
			return int(i), nil
		}
	}
	return 0, fmt.Errorf("Invalid signal %s", s)
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP",
	syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
	syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
	syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF", syscall.SIGWINCH: "SIGWINCH",
	syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR", syscall.SIGSYS: "SIGSYS",
}

func unixSignalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

func newJobKillCmd() *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill [--signal=SIG] ID...",
		Short: "Send a signal to the tasks of running jobs",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			signum, err := signalNumber(sig)
			if err != nil {
				return err
			}
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				failed := 0
				for i, id := range ids {
					f, err := job.Kill(h, id, signum)
					if err == nil {
						err = f.Decode(ctx, nil)
					}
					if err != nil {
						failed++
						// flux-core's: the id as given, then the reason
						fmt.Fprintf(cmd.ErrOrStderr(), "flux-job: kill %s: %s\n", args[i], flux.ErrorText(err))
					}
				}
				if failed > 0 {
					return exitCode(1)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "SIGTERM", "signal to send")
	return cmd
}

func newJobUrgencyCmd() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "urgency [--verbose] ID URGENCY",
		Short: "Change the urgency of a pending job (0-31, hold, default, expedite)",
		Args:  cobra.ExactArgs(2),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := jobid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("invalid jobid %q", args[0])
			}
			// like flux-core, the keywords may be in any case here
			arg := args[1]
			if k := strings.ToLower(arg); k == "hold" || k == "default" || k == "expedite" {
				arg = k
			}
			urg, err := urgencyValue(arg)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var resp job.UrgencyResponse
				if err := h.Call(ctx, "job-manager.urgency", flux.NodeidAny, job.UrgencyRequest{ID: id, Urgency: urg}, &resp); err != nil {
					return err
				}
				if verbose {
					// flux-core reports only the old value, on stderr
					switch resp.Old {
					case 0:
						fmt.Fprintln(cmd.ErrOrStderr(), "old urgency: job held")
					case 31:
						fmt.Fprintln(cmd.ErrOrStderr(), "old urgency: job expedited")
					default:
						fmt.Fprintf(cmd.ErrOrStderr(), "old urgency: %d\n", resp.Old)
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the old urgency on stderr")
	return cmd
}
