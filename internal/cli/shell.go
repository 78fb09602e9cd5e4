package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/shellproc"
)

func newShellCmd() *cobra.Command {
	var o shellproc.Options
	var dropUser uint32
	cmd := &cobra.Command{
		Use:   "shell --uri URI --dir DIR",
		Short: "Run job shells for a broker (started by the job-shell module)",
		Long: `flux shell is the job shell: the process that runs a job's tasks on one
node, holds their output, serves PMI and delivers signals. The job-shell
module of each broker starts shells as jobs need them and hands them the
jobs; users do not run it. A shell outlives its broker: when the broker
stops or crashes the tasks go on, and the shell connects to the broker
that comes back on the node (it reads its URI from DIR/broker.uri). See
docs/RESTART.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.URI == "" || o.Dir == "" {
				return errors.New("--uri and --dir are required (the job-shell module gives them)")
			}
			if cmd.Flags().Changed("user") {
				// become the job's user, then start again as that user
				argv := []string{"flux", "shell", "--uri", o.URI, "--dir", o.Dir}
				if o.DirFD > 0 {
					argv = append(argv, "--dir-fd", strconv.Itoa(o.DirFD))
				}
				return shellproc.DropTo(dropUser, argv, shellproc.ShellEnv())
			}
			// its user may not trace it, nor reach its descriptors (its
			// directory, its broker connection) through /proc: a process
			// that exec'd after a change of identity is dumpable again
			if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
				return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
			}
			o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			// A shell's work is light and comes in bursts (a job's start
			// and end): one thread running Go code wakes fewer threads per
			// message, which measured 10% less CPU per /bin/true job
			// (bench/exec); the tasks are processes of their own. Its
			// heap is small, so a collection costs little but comes often:
			// a higher GOGC halves them.
			runtime.GOMAXPROCS(1)
			debug.SetGCPercent(400)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			// the broker's session is not ours: a terminal's hangup or a
			// signal to the broker's process group must not end the jobs
			signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
			err := shellproc.Run(ctx, o)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URI, "uri", "", "the broker's local URI")
	f.StringVar(&o.Dir, "dir", "", "the shell's directory")
	f.IntVar(&o.DirFD, "dir-fd", 0, "a descriptor of --dir, through which the shell reaches it")
	f.Uint32Var(&dropUser, "user", 0, "become this user first (root only: the job-shell module starts a guest's shell so)")
	return cmd
}
