package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// flux job: job housekeeping commands. Each subcommand lives in its own
// file, internal/cli/job_<name>.go, and is listed once in jobSubcommands.
// Subcommands report errors through jobFail (or jobRun), so that they read
// "flux-job: <subcommand>: ..." like Flux's, and exit 1.

const jobProg = "flux-job"

// jobSubcommands lists the flux job subcommands, in the order help shows
// them. Add a new subcommand here; there is no init()-time registration.
func jobSubcommands() []*cobra.Command {
	return []*cobra.Command{
		newJobIDCmd(),
		newJobNamespaceCmd(),
		newJobListCmd(),
		newJobListIDsCmd(), newJobListInactiveCmd(), newJobStatsCmd(),
		newJobCancelCmd(),
		newJobRaiseCmd(),
		newJobKillCmd(),
		newJobUrgencyCmd(),
		newJobPriorityCmd(),
		newJobSubmitCmd(),
		newJobAttachCmd(),
		newJobInfoCmd(),
		newJobEventlogCmd(),
		newJobWaitEventCmd(),
		newJobStatusCmd(),
		newJobWaitCmd(),
		newJobLastCmd(),
		newJobPurgeCmd(),
		newJobTaskmapCmd(),
		newJobMemoCmd(),
		newJobCancelallCmd(),
		newJobRaiseallCmd(),
		newJobKillallCmd(),
		newJobTimeleftCmd(),
		newJobHostpidsCmd(),
		newJobReallocCmd(),
	}
}

func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Get job status, info, etc",
		Long: `flux job performs various job related housekeeping functions.

Run 'flux job COMMAND --help' for the options of a subcommand.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: unknown subcommand %q\nUsage: %s\n", jobProg, args[0], cmd.UseLine())
				return exitCode(1)
			}
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return exitCode(1)
		},
	}
	// Subcommands inherit this, so a bad option reads "flux-job: id: ...".
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return jobFail(c, err)
	})
	for _, sub := range jobSubcommands() {
		cmd.AddCommand(sub)
	}
	return cmd
}

// jobFail prints err as "flux-job: SUBCOMMAND: err" on the command's
// stderr and returns the exit-status error.
func jobFail(cmd *cobra.Command, err error) error {
	if code := interruptedStatus(); code != 0 {
		return exitCode(code)
	}
	prefix := jobProg + ": "
	if cmd.HasParent() && cmd.Parent().Name() == "job" {
		prefix += cmd.Name() + ": "
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s%v\n", prefix, err)
	return exitCode(1)
}

// jobRun adapts a flux job subcommand body to cobra: an error it returns
// is reported by jobFail unless it already carries an exit status.
func jobRun(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var ee exitError
		if errors.As(err, &ee) {
			return err
		}
		return jobFail(cmd, err)
	}
}
