package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

func newJobspecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobspec",
		Short: "Check job specifications",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	var v1 bool
	validate := &cobra.Command{
		Use:   "validate [--v1] FILE...",
		Short: "Check jobspec files (YAML or JSON) against RFC 14, or RFC 25 with --v1",
		Long: `Check each FILE (YAML or JSON; "-" reads standard input) against the
canonical jobspec rules of RFC 14, or with --v1 against jobspec version 1
(RFC 25), which is what a Flux instance runs.

Exit 0 if every file is valid. Otherwise print one line per bad file on
standard error, "FILE: KEY: RULE", and exit 1.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runJobspecValidate(args, v1, cmd.InOrStdin(), cmd.ErrOrStderr())
		},
	}
	validate.Flags().BoolVar(&v1, "v1", false, "Check against jobspec version 1 (RFC 25)")
	cmd.AddCommand(validate)
	return cmd
}

// runJobspecValidate checks files, reporting each bad one on stderr.
func runJobspecValidate(files []string, v1 bool, stdin io.Reader, stderr io.Writer) error {
	bad := 0
	stdinUsed := false
	for _, name := range files {
		var data []byte
		var err error
		if name == "-" {
			if stdinUsed {
				err = fmt.Errorf("standard input given more than once")
			} else {
				data, err = io.ReadAll(stdin)
				stdinUsed = true
			}
		} else {
			data, err = os.ReadFile(name)
		}
		if err == nil {
			if v1 {
				_, err = jobspec.ParseV1(data)
			} else {
				_, err = jobspec.Parse(data)
			}
		}
		if err != nil {
			bad++
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
	}
	if bad > 0 {
		return exitCode(1)
	}
	return nil
}
