package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// shutdownOptions are the flux shutdown flags (flux-shutdown(1)).
type shutdownOptions struct {
	background bool
	cancelJobs bool
	gc, skipGC bool
	quiet      bool
	verbose    int
}

// logLevel is the highest severity shown while the instance shuts down.
func (o shutdownOptions) logLevel() int {
	switch {
	case o.verbose > 0:
		return 7 // debug: everything
	case o.quiet:
		return 4 // warning
	}
	return 6 // info
}

func newShutdownCmd() *cobra.Command {
	var o shutdownOptions
	cmd := &cobra.Command{
		Use:   "shutdown [OPTIONS] [TARGET]",
		Short: "Shut down a Flux instance",
		Long: `flux shutdown asks the rank 0 broker of the enclosing instance (or of the
instance at the local:// URI TARGET) to shut down; only the instance owner
may. An initial program is sent SIGHUP. Until the broker exits, its log
messages of severity info or more urgent are shown on stderr.

Running jobs: an instance without a statedir cancels them and waits for
them to end. An instance with a statedir (-Sstatedir=DIR) leaves them
running, as Slurm's daemons do: their job shells go on without a broker,
and the instance takes them back when it is started again from the same
statedir. --cancel-jobs ends them first in either case. Pending jobs
stay pending for the next start from the statedir (without one, nothing
is kept).

--gc collects the content store's garbage as the instance stops: the
superseded versions of KVS directories every commit leaves behind (most
of the statedir's size after many jobs) and blobs no KVS key names are
deleted, and the database file is rewritten. [kvs] gc-threshold = N in
the configuration does the same at any shutdown once the KVS has made N
commits since the last collection; --skip-gc skips that once.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var h *flux.Handle
			var err error
			if len(args) == 1 {
				if !strings.Contains(args[0], "://") {
					return fmt.Errorf("TARGET %q: only native URIs (local://PATH) are supported", args[0])
				}
				h, err = flux.Open(args[0])
			} else {
				h, err = openHandle()
			}
			if err != nil {
				return err
			}
			defer h.Close()
			ctx, cancel := cmdContext()
			defer cancel()
			return shutdown(ctx, h, o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.background, "background", false, "start the shutdown and exit at once, without showing log messages")
	f.BoolVar(&o.cancelJobs, "cancel-jobs", false, "end the running jobs first, even on an instance with a statedir (which otherwise keeps them running and takes them back when it restarts)")
	f.BoolVar(&o.gc, "gc", false, "collect the content store's garbage as the instance stops (it needs a statedir)")
	f.BoolVar(&o.skipGC, "skip-gc", false, "do not collect garbage this time, even if [kvs] gc-threshold says to")
	f.BoolVar(&o.quiet, "quiet", false, "show only warning and more urgent log messages")
	f.CountVar(&o.verbose, "verbose", "show all log messages")
	return cmd
}

// shutdown requests broker.shutdown of rank 0 and, unless in background,
// shows rank 0's log until the broker goes away.
func shutdown(ctx context.Context, h *flux.Handle, o shutdownOptions, stderr io.Writer) error {
	if o.gc && o.skipGC {
		return fmt.Errorf("--gc and --skip-gc contradict each other")
	}
	if o.gc || o.skipGC {
		err := h.Call(ctx, "content-sqlite.gc-at-stop", 0, map[string]bool{"gc": o.gc}, nil)
		switch {
		case errors.Is(err, syscall.ENOSYS) && o.gc:
			return fmt.Errorf("--gc: the instance has no content-sqlite backing store to collect")
		case errors.Is(err, syscall.ENOSYS):
		case err != nil:
			return fmt.Errorf("--gc: %s", flux.ErrorText(err))
		}
	}
	var logs *flux.Future
	if !o.background {
		// Sent before the shutdown request on the same connection, so
		// the broker starts following its log before shutting down.
		req := map[string]bool{"follow": true, "nobacklog": true}
		var err error
		if logs, err = h.RPC("log.dmesg", 0, req, flux.Streaming); err != nil {
			return err
		}
		defer logs.Close()
	}
	if err := h.Call(ctx, "broker.shutdown", 0, map[string]any{"exitcode": 0, "cancel_jobs": o.cancelJobs}, nil); err != nil {
		return err // the broker names broker.shutdown in its message
	}
	if logs == nil {
		return nil
	}
	p := &logPrinter{w: stderr}
	if f, ok := stderr.(*os.File); ok && f == os.Stderr {
		p.color, _ = useColor("auto", f)
	}
	level := o.logLevel()
	for {
		m, err := logs.Next(ctx)
		if err != nil {
			// The broker closing the connection (or ending the
			// stream) as it exits is the normal end.
			if errors.Is(err, io.EOF) || h.Err() != nil || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("following the log: %w", err)
		}
		var e flux.LogEntry
		if err := m.UnmarshalPayload(&e); err != nil {
			return err
		}
		if e.Severity <= level {
			p.print(e)
		}
	}
}
