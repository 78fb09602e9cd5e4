package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the fluxgo version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "commands:    \t\t%s\n", version.Version)
			fmt.Fprintf(out, "libflux-core:\t\t%s\n", version.Version)
			fmt.Fprintf(out, "build-options:\t\tgo=%s\n", runtime.Version())
			return nil
		},
	}
}
