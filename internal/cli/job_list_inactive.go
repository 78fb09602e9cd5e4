package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux job list-inactive and flux job stats: flux-core's testing views of
// job-list (JSON, one job per line; the job statistics object).

func newJobListInactiveCmd() *cobra.Command {
	var count int
	var since float64
	cmd := &cobra.Command{
		Use:   "list-inactive [--count=N] [--since=T]",
		Short: "List inactive jobs as JSON, most recently inactive first",
		Long: `Print every inactive job of every user, one JSON object per line, the
most recently inactive first: at most --count of them (0: all), and only
those that became inactive after --since (a time in seconds since the
epoch).`,
		Args: cobra.NoArgs,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			req := map[string]any{"max_entries": count, "since": since, "attrs": []string{"all"},
				"constraint": map[string]any{"states": []int{stateBits["inactive"]}}}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return h.Stream(ctx, "job-list.list", flux.NodeidAny, req, func(m *flux.Message) error {
					return printJobObjects(cmd.OutOrStdout(), m.JSON(), "jobs")
				})
			})
		}),
	}
	cmd.Flags().IntVarP(&count, "count", "c", 0, "list at most `N` jobs (0: all)")
	cmd.Flags().Float64Var(&since, "since", 0, "only jobs inactive after `T` (seconds since the epoch)")
	return cmd
}

func newJobStatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Print the job statistics job-list keeps, as JSON",
		Args:  cobra.NoArgs,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				f, err := h.RPC("job-list.job-stats", flux.NodeidAny, nil, 0)
				if err != nil {
					return err
				}
				m, err := f.Get(ctx)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", m.JSON())
				return err
			})
		}),
	}
}
