package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

// flux account add-project, delete-project, list-projects.

func newAccountAddProjectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "add-project PROJECT",
		Short: "Add a project jobs may be charged to",
		Long: `Add PROJECT. Once the database has projects, a job's --project must be
one of them (and one of its user's, for users given a list with
add-user/edit-user --projects).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return accountRPC("add-project", accounting.NameRequest{Project: args[0]}, nil)
		},
	}
}

func newAccountDeleteProjectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete-project PROJECT",
		Short: "Remove a project (not while it is a user's default project)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return accountRPC("delete-project", accounting.DeleteRequest{Project: args[0]}, nil)
		},
	}
}

func newAccountListProjectsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list-projects [--json]",
		Short: "List the projects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp accounting.ProjectsResponse
			if err := accountRPC("list-projects", nil, &resp); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, resp.Projects)
			}
			fmt.Fprintln(out, "PROJECT")
			for _, p := range resp.Projects {
				fmt.Fprintln(out, p.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&asJSON, "json", "j", false, "print JSON")
	return cmd
}
