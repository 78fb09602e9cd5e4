package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

type overlayTraceOptions struct {
	full, human, delta bool
	rank               int
	types, color       string
}

func newOverlayTraceCmd() *cobra.Command {
	o := overlayTraceOptions{rank: -1}
	cmd := &cobra.Command{
		Use:   "trace [-f] [-r RANK] [-t TYPE,...] [-H [-d]] [TOPIC-GLOB]",
		Short: "Show the messages this broker sends and receives on the overlay network",
		Long: `Print a line for each message the broker (of FLUX_URI) sends to (tx) or
receives from (rx) an overlay peer, its parent or a child, until
interrupted: time, direction, peer rank, type, topic, and for requests
the destination and matchtag. A topic glob limits the topics shown;
-r the peer rank (not necessarily the message's source or destination);
-t the types (request, response, event, control). -f adds JSON payloads.
-H prints times relative to the first message (-d: to the previous one).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			glob := ""
			if len(args) == 1 {
				glob = args[0]
			}
			return runOverlayTrace(o, glob, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.full, "full", "f", false, "include JSON payloads")
	f.IntVarP(&o.rank, "rank", "r", -1, "only messages to or from overlay peer `NODEID`")
	f.StringVarP(&o.types, "type", "t", "", "only messages of `TYPE,...`: request, response, event, control")
	f.BoolVarP(&o.human, "human", "H", false, "times relative to the first message")
	f.BoolVarP(&o.delta, "delta", "d", false, "with -H, times relative to the previous message")
	addColorFlag(f, &o.color, true)
	return cmd
}

var traceTypeBits = map[string]message.Type{"request": message.Request, "response": message.Response, "event": message.Event, "control": message.Control}

func runOverlayTrace(o overlayTraceOptions, glob string, out io.Writer) error {
	req := map[string]any{"topic_glob": glob, "full": o.full}
	if o.rank >= 0 {
		req["rank"] = o.rank
	}
	if o.types != "" {
		mask := 0
		for _, w := range strings.Split(o.types, ",") {
			t, ok := traceTypeBits[strings.TrimSpace(w)]
			if !ok {
				return fmt.Errorf("--type=%s: %q is not request, response, event or control", o.types, w)
			}
			mask |= 1 << t
		}
		req["typemask"] = mask
	}
	if o.delta && !o.human {
		return fmt.Errorf("--delta needs --human")
	}
	color, err := useColor(o.color, out)
	if err != nil {
		return err
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		f, err := h.RPC("overlay.trace", flux.NodeidAny, req, flux.Streaming)
		if err != nil {
			return err
		}
		first, prev := 0.0, 0.0
		for {
			m, err := f.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil // interrupted: the normal end
				}
				return err
			}
			var e flux.OverlayTraceEntry
			if err := json.Unmarshal(m.JSON(), &e); err != nil {
				return fmt.Errorf("overlay.trace: %w", err)
			}
			if e.Dropped > 0 {
				fmt.Fprintf(out, "(%d messages not shown: the trace fell behind)\n", e.Dropped)
			}
			stamp := time.Unix(0, int64(e.Timestamp*1e9)).UTC().Format("2006-01-02T15:04:05.000000Z")
			if o.human {
				if first == 0 {
					first, prev = e.Timestamp, e.Timestamp
				}
				base := first
				if o.delta {
					base = prev
				}
				stamp = fmt.Sprintf("[%+12.6f]", e.Timestamp-base)
				prev = e.Timestamp
			}
			arrow := "<"
			if e.Prefix == "tx" {
				arrow = ">"
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s%s %d %s", stamp, e.Prefix, arrow, e.Rank, e.Type)
			switch {
			case e.Control != nil:
				fmt.Fprintf(&b, " type=%d", *e.Control)
			default:
				fmt.Fprintf(&b, " %s", e.Topic)
			}
			if e.Nodeid != nil {
				fmt.Fprintf(&b, " [nodeid=%s matchtag=%d]", nodeidString(*e.Nodeid), *e.Matchtag)
			} else if e.Matchtag != nil {
				fmt.Fprintf(&b, " [matchtag=%d]", *e.Matchtag)
			}
			if e.Errnum != 0 {
				fmt.Fprintf(&b, " errnum=%d", e.Errnum)
			}
			fmt.Fprintf(&b, " (%d bytes)", e.Size)
			fmt.Fprintln(out, paint(color, traceColor(e.Type), b.String()))
			if len(e.Payload) > 0 {
				fmt.Fprintf(out, "%s\n", e.Payload)
			}
		}
	})
}

func nodeidString(n uint32) string {
	switch n {
	case message.NodeidAny:
		return "any"
	case message.NodeidUpstream:
		return "upstream"
	}
	return fmt.Sprint(n)
}

func traceColor(typ string) string {
	switch typ {
	case "request":
		return sgrYellow
	case "response":
		return sgrBlue
	case "event":
		return sgrGreen
	}
	return sgrDim
}
