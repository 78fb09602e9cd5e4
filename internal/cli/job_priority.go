package cli

import (
	"context"
	"fmt"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux job priority [--explain] [--json] ID: a job's priority, and with
// --explain each factor of the mf-priority plugin, its weight and its
// part of the sum (job-manager.mf-priority.explain).

func newJobPriorityCmd() *cobra.Command {
	var explain, asJSON bool
	cmd := &cobra.Command{
		Use:   "priority [--explain] [--json] ID",
		Short: "Show a job's priority and, with --explain, why it has it",
		Long: `Show a job's priority. With --explain, show each factor of the
multi-factor priority plugin (mf-priority: fair-share, age, size, queue,
urgency), its weight and its contribution; the priority is their sum,
rounded. A user may ask about their own jobs, the instance owner about any.`,
		Args: cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			id, err := parseJobIDArg(args[0])
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var e accounting.PriorityExplanation
				err := h.Call(ctx, accounting.PriorityExplainTopic, flux.NodeidAny, accounting.PriorityExplainRequest{ID: id}, &e)
				if flux.ErrnoOf(err) == syscall.ENOSYS {
					return fmt.Errorf("%s: the mf-priority plugin is not loaded (flux jobtap load mf-priority)", id)
				}
				if err != nil {
					return fmt.Errorf("%s: %s", id, flux.ErrorText(err))
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return printJSON(out, e)
				}
				if !explain {
					fmt.Fprintln(out, e.Priority)
					return nil
				}
				fmt.Fprintf(out, "job %s: priority %d (computed now: %d)\n", id, e.Priority, e.Computed)
				fmt.Fprintf(out, "bank %q queue %q", e.Bank, e.Queue)
				if e.FairShareTime > 0 {
					fmt.Fprintf(out, ", fair-share as of %s", time.Unix(int64(e.FairShareTime), 0).Format(time.RFC3339))
				} else {
					fmt.Fprint(out, ", no fair-share computed yet")
				}
				fmt.Fprintln(out)
				if e.Note != "" {
					fmt.Fprintf(out, "note: %s\n", e.Note)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "FACTOR\tVALUE\tWEIGHT\tCONTRIBUTION\t")
				for _, f := range e.Factors {
					fmt.Fprintf(tw, "%s\t%.4f\t%g\t%.1f\t\n", f.Name, f.Value, f.Weight, f.Contribution)
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&explain, "explain", false, "Show each factor, its weight and contribution")
	cmd.Flags().BoolVar(&asJSON, "json", false, "Print the explanation as JSON")
	return cmd
}

// flux account update-usage: a fair-share pass now (the owner's).
func newAccountUpdateUsageCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "update-usage",
		Short: "Recompute every association's usage and fair-share now",
		Long: `Read the job archive, recompute every association's decayed usage and
fair-share factor, send them to the mf-priority plugin (which
reprioritizes the pending jobs) and print them. The accounting module
does this every [accounting.fairshare] interval by itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var u accounting.FairShareUpdate
			if err := accountRPC("update-usage", nil, &u); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, u)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "USERNAME\tBANK\tUSAGE(core-h)\tFAIRSHARE")
			for _, e := range u.Entries {
				fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.4f\n", e.Username, e.Bank, e.Usage, e.Factor)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "Print JSON")
	return cmd
}
