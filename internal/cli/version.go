package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/version"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the fluxgo version",
		Long: `Print the version of the commands and library and, when FLUX_URI is set,
that of the enclosing instance's broker and its URI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printVersion(cmd.OutOrStdout(), os.Getenv("FLUX_URI"))
		},
	}
}

// printVersion writes flux version's lines; with uri set it asks that
// instance's broker for its version, as flux-core does, and fails when
// it cannot.
func printVersion(out io.Writer, uri string) error {
	fmt.Fprintf(out, "commands:    \t\t%s\n", version.Version)
	fmt.Fprintf(out, "libflux-core:\t\t%s\n", version.Version)
	if uri != "" {
		v, err := brokerVersion(uri)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "broker:  \t\t%s\n", v)
		fmt.Fprintf(out, "FLUX_URI:\t\t%s\n", uri)
	}
	fmt.Fprintf(out, "build-options:\t\tgo=%s\n", runtime.Version())
	return nil
}

// brokerVersion returns the version attribute of the broker at uri.
func brokerVersion(uri string) (string, error) {
	h, err := flux.Open(uri)
	if err != nil {
		return "", fmt.Errorf("cannot connect to FLUX_URI %s: %w", uri, err)
	}
	defer h.Close()
	ctx, cancel := cmdContext()
	defer cancel()
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", flux.NodeidAny, map[string]string{"name": "version"}, &resp); err != nil {
		return "", fmt.Errorf("broker version: %s", flux.ErrorText(err))
	}
	return resp.Value, nil
}
