package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

func newJobPurgeCmd() *cobra.Command {
	var ageLimit string
	var numLimit, batch int
	var force bool
	cmd := &cobra.Command{
		Use:   "purge [--age-limit=FSD] [--num-limit=N] [--batch=N] [-f] [JOBID...]",
		Short: "Purge the oldest inactive jobs",
		Long: `Remove inactive jobs from the instance: their KVS records and their entries
in the job manager and job list. With JOBIDs, exactly those (each must be
inactive); otherwise the oldest inactive jobs while any is older than
--age-limit or more than --num-limit remain. Without --force nothing is
removed: the command says how many jobs would be. The instance owner only.
Inactive jobs can also be purged automatically with [job-manager]
inactive-age-limit and inactive-num-limit in the configuration.`,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			req := map[string]any{"force": force, "batch": batch, "age_limit": -1.0, "num_limit": -1}
			if cmd.Flags().Changed("age-limit") {
				d, err := fsd.Parse(ageLimit)
				if err != nil {
					return fmt.Errorf("--age-limit: %w", err)
				}
				req["age_limit"] = d
			}
			if cmd.Flags().Changed("num-limit") {
				if numLimit < 0 {
					return fmt.Errorf("--num-limit: num limit must be >= 0, not %d", numLimit)
				}
				req["num_limit"] = numLimit
			}
			if len(args) > 0 {
				ids, err := parseJobIDs(args)
				if err != nil {
					return err
				}
				req["jobs"] = ids
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				total := 0
				for {
					var resp struct {
						Count int `json:"count"`
					}
					if err := h.Call(ctx, "job-manager.purge", flux.NodeidAny, req, &resp); err != nil {
						return err
					}
					total += resp.Count
					// a forced purge by limits goes a batch at a time
					if !force || len(args) > 0 || resp.Count < batch {
						break
					}
				}
				out := cmd.OutOrStdout()
				if force {
					fmt.Fprintf(out, "purged %d inactive jobs\n", total)
				} else {
					fmt.Fprintf(out, "use --force to purge %d inactive jobs\n", total)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&ageLimit, "age-limit", "", "purge inactive jobs older than `FSD`")
	cmd.Flags().IntVar(&numLimit, "num-limit", 0, "purge the oldest inactive jobs until at most `N` are left")
	cmd.Flags().IntVar(&batch, "batch", 50, "purge at most `N` jobs per request to the job manager (1-1000)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "purge (without it, only count)")
	return cmd
}
