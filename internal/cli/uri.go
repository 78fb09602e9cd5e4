package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// flux uri TARGET: the URI of a Flux instance, as flux proxy resolves it
// (uri_resolve.go): a URI, a socket path, or a job id path.

func newURICmd() *cobra.Command {
	var local, remote bool
	cmd := &cobra.Command{
		Use:   "uri [--local|--remote] TARGET",
		Short: "Print the URI of a Flux instance given by a URI, socket path or job id",
		Long: `Resolve TARGET to the URI of a Flux instance and print it: TARGET is a
URI (local:// or ssh://), a socket path, or a job id path ("ID",
"jobid:ID", "ID/ID...": each ID a job of the instance the previous one
names, starting from FLUX_URI) of a job that runs an instance. An
instance named by a job prints as ssh://HOST/PATH, as it published
itself, others as given; --local prints local://PATH, --remote
ssh://HOST/PATH (this host's name for local sockets).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if local && remote {
				return fmt.Errorf("--local and --remote: give one")
			}
			ctx, cancel := cmdContext()
			defer cancel()
			uri, err := resolveTarget(ctx, args[0])
			if err != nil {
				return err
			}
			byJob := !strings.Contains(args[0], "://") && !strings.HasPrefix(args[0], "/")
			if remote || byJob && !local {
				host, err := os.Hostname()
				if err != nil {
					return err
				}
				uri = "ssh://" + host + strings.TrimPrefix(uri, "local://")
			}
			fmt.Fprintln(cmd.OutOrStdout(), uri)
			return nil
		},
	}
	cmd.Flags().BoolVar(&local, "local", false, "Print a local:// URI")
	cmd.Flags().BoolVar(&remote, "remote", false, "Print an ssh:// URI")
	return cmd
}
