package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

// flux sproc (flux-sproc(1)): list, signal and wait for the processes of
// a broker's subprocess server (rexec), by pid or by the label given to
// flux exec --label.

type sprocCommon struct {
	rank    string
	service string
}

func (c *sprocCommon) flags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&c.rank, "rank", "r", "", "send the request to broker `RANK` (default: any)")
	cmd.Flags().StringVarP(&c.service, "service", "s", subprocess.Service, "subprocess server `NAME`")
}

func (c *sprocCommon) nodeid() (uint32, error) {
	if c.rank == "" {
		return flux.NodeidAny, nil
	}
	n, err := strconv.ParseUint(c.rank, 10, 32)
	if err != nil || uint32(n) == flux.NodeidAny {
		return 0, usageError{fmt.Errorf("argument -r/--rank: invalid int value: '%s'", c.rank)}
	}
	return uint32(n), nil
}

// sprocTarget reads PID|LABEL: an integer is a pid, anything else a
// label.
func sprocTarget(arg, service string) subprocess.Target {
	if n, err := strconv.ParseInt(arg, 10, 64); err == nil {
		return subprocess.Target{Service: service, Pid: int(n)}
	}
	return subprocess.Target{Service: service, Label: arg}
}

func newSprocCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sproc COMMAND [OPTIONS]",
		Short: "List, signal and wait for subprocesses of a broker's subprocess server",
	}
	cmd.AddCommand(newSprocPsCmd(), newSprocKillCmd(), newSprocWaitCmd())
	return cmd
}

// sprocPsFormat is flux-core's default ps format.
const sprocPsFormat = "{pid:>9} {state:<2} {label:<12} {cmd}"

type sprocItem struct {
	subprocess.ProcInfo
	rank int
}

var sprocFields = fieldSource[sprocItem]{
	get: func(name string) (func(sprocItem) fmtVal, error) {
		switch name {
		case "pid":
			return func(p sprocItem) fmtVal { return vInt(int64(p.Pid)) }, nil
		case "state":
			return func(p sprocItem) fmtVal { return vStr(p.State) }, nil
		case "label":
			return func(p sprocItem) fmtVal { return vStr(p.Label) }, nil
		case "rank":
			return func(p sprocItem) fmtVal { return vInt(int64(p.rank)) }, nil
		case "cmd":
			return func(p sprocItem) fmtVal { return vStr(p.Cmd) }, nil
		}
		return nil, fmt.Errorf("Unknown format field: %s", name)
	},
	heading: func(name string) string {
		return map[string]string{"pid": "PID", "state": "ST", "label": "LABEL", "rank": "RANK", "cmd": "COMMAND"}[name]
	},
	printable: true,
}

func newSprocPsCmd() *cobra.Command {
	var c sprocCommon
	var format string
	var noHeader bool
	cmd := &cobra.Command{
		Use:   "ps [-n] [--rank=RANK] [--service=NAME] [--format=FORMAT]",
		Short: "List running (R) and zombie (Z) subprocesses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nodeid, err := c.nodeid()
			if err != nil {
				return err
			}
			if format == "" {
				format = sprocPsFormat
			}
			of, err := compileFormat(format, sprocFields)
			if err != nil {
				return err
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			resp, err := subprocess.ListService(context.Background(), h, nodeid, c.service)
			if err != nil {
				return fmt.Errorf("ps: %s", flux.ErrorText(err))
			}
			items := make([]sprocItem, len(resp.Procs))
			for i, p := range resp.Procs {
				items[i] = sprocItem{ProcInfo: p, rank: resp.Rank}
			}
			return printFormatted(of, items, noHeader, cmd.OutOrStdout())
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVarP(&format, "format", "o", "", "output `FORMAT` (fields pid, state, label, rank, cmd)")
	cmd.Flags().BoolVarP(&noHeader, "no-header", "n", false, "suppress the header line")
	return cmd
}

func newSprocKillCmd() *cobra.Command {
	var c sprocCommon
	var wait bool
	cmd := &cobra.Command{
		Use:   "kill [-w] [--rank=RANK] [--service=NAME] SIGNUM PID|LABEL",
		Short: "Send a signal to a subprocess",
		Long: `Send SIGNUM to the subprocess PID|LABEL. With --wait, also wait for it
to end and exit with its exit code (128+N for signal N); the wait is sent
before the signal, so a waitable process is collected even if it ends
first.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodeid, err := c.nodeid()
			if err != nil {
				return err
			}
			sig, err := signalNumber(args[0])
			if err != nil {
				return usageError{err}
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			return runSprocKill(context.Background(), h, nodeid, sprocTarget(args[1], c.service), sig, wait, cmd.ErrOrStderr())
		},
	}
	c.flags(cmd)
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait for the process after signalling it and exit with its code")
	return cmd
}

func runSprocKill(ctx context.Context, h *flux.Handle, nodeid uint32, t subprocess.Target, sig int, wait bool, stderr io.Writer) error {
	var w *subprocess.Waiter
	if wait {
		var err error
		if w, err = subprocess.StartWait(h, nodeid, t); err != nil {
			return fmt.Errorf("kill: %s", flux.ErrorText(err))
		}
	}
	if err := subprocess.Kill(ctx, h, nodeid, t, syscall.Signal(sig)); err != nil {
		fmt.Fprintf(stderr, "flux-sproc: ERROR: kill: %s\n", flux.ErrorText(err))
		// the wait may have reaped the process already: its status
		// still decides the exit code
		if !wait || !errors.Is(err, syscall.ESRCH) {
			return exitCode(1)
		}
	}
	if !wait {
		return nil
	}
	resp, err := w.Result(ctx)
	if err != nil {
		return fmt.Errorf("kill: wait failed: %s", flux.ErrorText(err))
	}
	return statusExit(resp.Status)
}

func newSprocWaitCmd() *cobra.Command {
	var c sprocCommon
	var output bool
	cmd := &cobra.Command{
		Use:   "wait [-o] [--rank=RANK] [--service=NAME] PID|LABEL",
		Short: "Wait for a waitable subprocess and exit with its exit code",
		Long: `Wait for a subprocess started with flux exec --bg --waitable to end, then
exit with its exit code (128+N when signal N ended it). --output writes
the output the server kept for it (its most recent 8 KiB, possibly
incomplete) to stdout and stderr by stream.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodeid, err := c.nodeid()
			if err != nil {
				return err
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			resp, err := subprocess.WaitFor(context.Background(), h, nodeid, sprocTarget(args[0], c.service))
			if err != nil {
				return fmt.Errorf("wait: %s", flux.ErrorText(err))
			}
			if output {
				for _, o := range resp.Output {
					data, err := o.Bytes()
					if err != nil {
						continue
					}
					if o.Stream == "stdout" {
						cmd.OutOrStdout().Write(data)
					} else {
						cmd.ErrOrStderr().Write(data)
					}
				}
			}
			return statusExit(resp.Status)
		},
	}
	c.flags(cmd)
	cmd.Flags().BoolVarP(&output, "output", "o", false, "write the output the server kept for the process")
	return cmd
}

// statusExit turns a wait status into the command's exit.
func statusExit(status int) error {
	if code := subprocess.Status(status).Code(); code != 0 {
		return exitCode(code)
	}
	return nil
}
