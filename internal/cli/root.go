// Package cli implements the flux command line. Each subcommand lives in its
// own file; cobra only wires flags to functions that take their inputs and
// an io.Writer so tests can call them directly.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code out of a command without printing
// anything more (the command already reported what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode returns an error that makes Main exit with code without an
// extra message.
func exitCode(code int) error { return exitError{code: code} }

// commands lists every top-level subcommand, in the order help shows them.
// Add new commands here; there is no init()-time registration.
func commands() []*cobra.Command {
	return []*cobra.Command{
		newVersionCmd(),
		newBrokerCmd(),
		newStartCmd(),
		newGetattrCmd(),
		newSetattrCmd(),
		newLsattrCmd(),
		newRCmd(),
		newJobCmd(),
		newJobspecCmd(), newSubmitCmd(), newRunCmd(), newBulksubmitCmd(),
		newCancelCmd(), newUpdateCmd(),
		newBatchCmd(), newAllocCmd(), newBatchExecCmd(), newProxyCmd(), newPstreeCmd(),
		newJobsCmd(), newPgrepCmd(), newPkillCmd(), newJobtapCmd(),
		newHostlistCmd(),
		newPingCmd(), newEventCmd(), newDmesgCmd(), newLoggerCmd(), newModuleCmd(),
		newOverlayCmd(), newUptimeCmd(), newShutdownCmd(), newKeygenCmd(),
		newExecCmd(),
		newContentCmd(),
		newKVSCmd(), newDumpCmd(), newRestoreCmd(),
		newResourceCmd(),
		newPythonCmd(),
	}
}

// newRoot builds the flux command tree with the given streams.
func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "flux",
		Short: "fluxgo: the Flux resource and job management framework",
		Long: `flux is the single fluxgo binary: the command-line tool, the broker
and the job shell of a Flux instance.

Run 'flux help COMMAND' for the options of a command.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	for _, c := range commands() {
		root.AddCommand(c)
	}
	return root
}

// Main runs the flux command line with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// errors are reported by the top-level command: flux-event, not
	// flux-pub
	name := "flux"
	for c := cmd; c != nil && c != root; c = c.Parent() {
		if c.Parent() == root {
			name = "flux-" + c.Name()
		}
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
