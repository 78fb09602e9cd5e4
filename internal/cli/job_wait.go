package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux job wait [-a] [-v] [ID]: wait(2) for jobs submitted with the
// waitable flag. Exit 0 when the job succeeded, 1 when it failed, 2 when
// there is nothing to wait for (bad or unwaitable id, no waitable jobs).

// waitAny is flux-core's FLUX_JOBID_ANY as the job manager receives it.
const waitAny = -1

type waitResult struct {
	ID      jobid.ID `json:"id"`
	Success bool     `json:"success"`
	Errstr  string   `json:"errstr"`
}

func newJobWaitCmd() *cobra.Command {
	var all, verbose bool
	cmd := &cobra.Command{
		Use:   "wait [-a] [-v] [ID]",
		Short: "Wait for a waitable job (or the next one, or all) to complete",
		Long: `Wait for a job submitted with --flags=waitable, like wait(2): with ID for that
job, without for the next waitable job to end (its id is printed), with
--all for every waitable job. Each result can be consumed once. Exits 0
if the job(s) succeeded, 1 if one failed, 2 if there is nothing to wait
for.`,
		Args: cobra.MaximumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				code, err := jobWait(ctx, h, args, all, verbose, cmd.OutOrStdout(), cmd.ErrOrStderr())
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
	cmd.Flags().BoolVarP(&all, "all", "a", false, "wait for all waitable jobs; fail if any failed")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "report successful jobs too")
	return cmd
}

func jobWait(ctx context.Context, h *flux.Handle, args []string, all, verbose bool, out, errw io.Writer) (int, error) {
	wait := func(id any) (waitResult, error) {
		var r waitResult
		err := h.Call(ctx, "job-manager.wait", flux.NodeidAny, map[string]any{"id": id}, &r)
		return r, err
	}
	cantWait := func(err error) int {
		fmt.Fprintf(errw, "%s: wait: %s\n", jobProg, flux.ErrorText(err))
		return 2
	}
	if len(args) == 1 {
		if all {
			return 0, errors.New("--all takes no job id")
		}
		id, err := jobid.Parse(args[0])
		if err != nil {
			return cantWait(fmt.Errorf("invalid jobid %q", args[0])), nil
		}
		r, err := wait(id)
		if err != nil {
			return cantWait(err), nil
		}
		return reportOne(r, errw), nil
	}
	if !all {
		r, err := wait(waitAny)
		if err != nil {
			return cantWait(err), nil
		}
		fmt.Fprintln(out, r.ID.String())
		return reportOne(r, errw), nil
	}
	code := 0
	for {
		r, err := wait(waitAny)
		if errors.Is(err, syscall.ECHILD) {
			return code, nil
		}
		if err != nil {
			return cantWait(err), nil
		}
		if report(r, verbose, errw) != 0 {
			code = 1
		}
	}
}

// reportOne prints the error of one waited-for job that failed, as
// flux-core does without --all, and returns its exit code.
func reportOne(r waitResult, errw io.Writer) int {
	if !r.Success {
		fmt.Fprintf(errw, "%s: %s\n", jobProg, r.Errstr)
		return 1
	}
	return 0
}

// report prints a failed (or with verbose any) result of flux job wait
// --all and returns its exit code.
func report(r waitResult, verbose bool, errw io.Writer) int {
	if !r.Success {
		fmt.Fprintf(errw, "%s: %s\n", r.ID.String(), r.Errstr)
		return 1
	}
	if verbose {
		fmt.Fprintf(errw, "%s: job completed successfully\n", r.ID.String())
	}
	return 0
}
