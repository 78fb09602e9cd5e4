package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
)

// flux resource reservations: the advance reservations sched-simple
// applies ([reservations.NAME], docs/JOBS.md).

func newResourceReservationsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reservations [--json]",
		Short: "List advance reservations: nodes set aside for some users over a time window",
		Long: `List the advance reservations the scheduler applies ([reservations.NAME] in
the configuration): name, state (future, active or ended), ranks and
nodes, start and end (local time), and the users who may run jobs in it
with --setattr=reservation=NAME (the instance owner always may).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				var raw json.RawMessage
				if err := h.Call(ctx, "sched-simple.reservations", flux.NodeidAny, nil, &raw); err != nil {
					return err
				}
				if asJSON {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", raw)
					return err
				}
				return printReservations(cmd.OutOrStdout(), raw, time.Now())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the scheduler's JSON answer")
	return cmd
}

func printReservations(out io.Writer, raw json.RawMessage, now time.Time) error {
	var resp resource.ReservationsResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("sched-simple.reservations: %w", err)
	}
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATE\tRANKS\tNODELIST\tSTART\tEND\tUSERS")
	t := float64(now.Unix())
	stamp := func(s float64) string { return time.Unix(int64(s), 0).Format("2006-01-02 15:04") }
	for _, r := range resp.Reservations {
		state := "future"
		switch {
		case t >= r.End:
			state = "ended"
		case t >= r.Start:
			state = "active"
		}
		users := make([]string, len(r.Users))
		for i, u := range r.Users {
			users[i] = usernameOf(u)
		}
		who := strings.Join(users, ",")
		if who == "" {
			who = "(owner only)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, state, r.Ranks, r.Nodelist, stamp(r.Start), stamp(r.End), who)
	}
	return w.Flush()
}
