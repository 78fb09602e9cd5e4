package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// newJobNamespaceCmd is flux job namespace [ID...]: the name of each
// job's guest KVS namespace ("job-" and the decimal id), ids read from
// stdin when none are given.
func newJobNamespaceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "namespace [ID...]",
		Short: "Print the KVS namespace name of jobs",
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				sc := bufio.NewScanner(cmd.InOrStdin())
				for sc.Scan() {
					if f := strings.TrimSpace(sc.Text()); f != "" {
						args = append(args, f)
					}
				}
				if err := sc.Err(); err != nil {
					return err
				}
			}
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Fprintf(cmd.OutOrStdout(), "job-%d\n", uint64(id))
			}
			return nil
		}),
	}
}
