package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// flux job status [-v] [--json] [-e CODE] ID...: wait for jobs to end
// and exit with the largest exit code.

type jobStatusOptions struct {
	verbose       int
	json          bool
	exceptionCode int
}

func newJobStatusCmd() *cobra.Command {
	var o jobStatusOptions
	cmd := &cobra.Command{
		Use:   "status [-v] [--json] [-e CODE] ID...",
		Short: "Wait for job(s) to complete and exit with largest exit code",
		Args:  cobra.MinimumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				code, err := jobStatus(ctx, h, args, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				if code != 0 {
					return exitCode(code)
				}
				return nil
			})
		}),
	}
	cmd.Flags().CountVarP(&o.verbose, "verbose", "v", "Increase verbosity")
	cmd.Flags().BoolVarP(&o.json, "json", "j", false, "Dump job result information gleaned from eventlog to stdout")
	cmd.Flags().IntVarP(&o.exceptionCode, "exception-exit-code", "e", 1, "Set the default exit code for any jobs that terminate solely due to an exception (e.g. canceled jobs or jobs rejected by the scheduler) to N")
	return cmd
}

// jobStatus waits for every job's result (concurrently) and returns the
// largest exit code.
func jobStatus(ctx context.Context, h *flux.Handle, args []string, o jobStatusOptions, out, errw io.Writer) (int, error) {
	type res struct {
		r   *job.JobResult
		err error
	}
	results := make([]res, len(args))
	var wg sync.WaitGroup
	for i, a := range args {
		id, err := parseJobIDArg(a)
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := job.WaitResult(ctx, h, id)
			results[i] = res{r, err}
		}()
	}
	if o.verbose > 0 && len(args) > 1 {
		fmt.Fprintf(errw, "%s: fetching status for %d jobs\n", jobProg, len(args))
	}
	wg.Wait()
	if o.verbose > 0 && len(args) > 1 {
		fmt.Fprintf(errw, "%s: all done.\n", jobProg)
	}
	code := 0
	for i, r := range results {
		if r.err != nil {
			if errors.Is(r.err, syscall.ENOENT) {
				return 0, fmt.Errorf("%s: No such job", args[i])
			}
			return 0, fmt.Errorf("%s: %s", args[i], flux.ErrorText(r.err))
		}
		if o.json {
			b, _ := json.Marshal(r.r)
			fmt.Fprintf(out, "%s\n", b)
		}
		c := r.r.ExitCode(o.exceptionCode)
		if c > code {
			code = c
		}
		if o.verbose == 0 {
			continue
		}
		fatal := r.r.ExceptionOccurred && *r.r.ExceptionSeverity == 0
		ws := -1
		if r.r.Waitstatus != nil {
			ws = *r.r.Waitstatus
		}
		status := syscall.WaitStatus(ws)
		exit := 0
		if r.r.Waitstatus != nil {
			exit = job.WaitstatusToExitCode(ws)
		}
		switch {
		case ws >= 0 && status.Signaled():
			fmt.Fprintf(errw, "%s: %s: job shell died by signal %d\n", jobProg, args[i], int(status.Signal()))
		case o.verbose > 1 || exit != 0 || fatal:
			if fatal {
				fmt.Fprintf(errw, "%s: %s: exception type=%s\n", jobProg, args[i], r.r.ExceptionType)
			} else {
				fmt.Fprintf(errw, "%s: %s: exited with exit code %d\n", jobProg, args[i], exit)
			}
		}
	}
	return code, nil
}
