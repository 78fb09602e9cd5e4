package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/usage"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// clusterResources is the instance's resource eventlog and R, as the
// job archive sends them with a cluster query (nil: read the KVS).
type clusterResources struct {
	eventlog []byte
	R        json.RawMessage
}

// runClusterUsage is flux usage --cluster.
func runClusterUsage(o usageOptions, recs []archivedb.Record, res clusterResources, since, until float64, loc *time.Location, out io.Writer) error {
	var events []eventlog.Event
	var nnodes int
	var resvs []resvWindow
	err := withHandle(func(ctx context.Context, h *flux.Handle) error {
		raw, R := res.eventlog, res.R
		if raw == nil {
			var err error
			if raw, err = kvs.GetRaw(ctx, h, "", "resource.eventlog"); err != nil {
				return fmt.Errorf("resource.eventlog: %s", flux.ErrorText(err))
			}
			if err := kvs.GetJSON(ctx, h, "", "resource.R", &R); err != nil {
				return fmt.Errorf("resource.R: %s", flux.ErrorText(err))
			}
		}
		var err error
		if events, err = eventlog.Parse(raw); err != nil {
			return fmt.Errorf("resource.eventlog: %w", err)
		}
		inv, err := rset.Parse(R)
		if err != nil {
			return fmt.Errorf("resource.R: %w", err)
		}
		nnodes = inv.NNodes()
		pol, err := policy.Fetch(ctx, h)
		if err != nil {
			return err
		}
		resvs, err = usage.Windows(pol, inv)
		if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows := clusterUsage(recs, events, nnodes, resvs, since, until, o.per, loc)
	if o.format == "json" {
		if rows == nil {
			rows = []*clusterRow{}
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	head := []string{"PERIOD", "NODES", "NODE-HOURS", "ALLOCATED%", "DOWN%", "RESERVED%", "IDLE%"}
	lines := make([][]string, 0, len(rows))
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	for _, r := range rows {
		lines = append(lines, []string{r.Period, strconv.Itoa(r.Nodes), f(r.Reported), f(r.Alloc), f(r.Down), f(r.Resv), f(r.Idle)})
	}
	return printRows(out, head, lines, o.format)
}
