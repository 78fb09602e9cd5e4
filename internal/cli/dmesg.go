package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// dmesgOptions are the flux dmesg flags (flux-dmesg(1)).
type dmesgOptions struct {
	clear     bool
	readClear bool
	follow    bool
	new       bool
	human     bool
	delta     bool
	color     string
}

func newDmesgCmd() *cobra.Command {
	var o dmesgOptions
	cmd := &cobra.Command{
		Use:   "dmesg [OPTIONS]",
		Short: "Print or clear the broker's log ring buffer",
		Long: `Each broker keeps its recent log entries in a ring buffer. flux dmesg
prints the local broker's buffer, one entry per line:

  2024-01-02T15:04:05.123456Z broker.err[0]: message`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			color, err := useColor(o.color, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				p := &logPrinter{w: cmd.OutOrStdout(), human: o.human, delta: o.delta, color: color}
				return dmesg(ctx, h, flux.NodeidAny, o, p)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.clear, "clear", "C", false, "clear the ring buffer")
	f.BoolVarP(&o.readClear, "read-clear", "c", false, "clear the ring buffer after printing it")
	f.BoolVarP(&o.follow, "follow", "f", false, "after printing the buffer, print new entries as they arrive")
	f.BoolVarP(&o.new, "new", "n", false, "print only new entries, as they arrive")
	f.BoolVarP(&o.human, "human", "H", false, "human-readable timestamps")
	f.BoolVarP(&o.delta, "delta", "d", false, "with --human, show the time since the previous entry")
	addColorFlag(f, &o.color, true)
	return cmd
}

// dmesg prints (and/or clears) the log ring buffer of the broker at
// nodeid. With follow or new it keeps printing until ctx ends.
func dmesg(ctx context.Context, h *flux.Handle, nodeid uint32, o dmesgOptions, p *logPrinter) error {
	if o.clear {
		return clearLog(ctx, h, nodeid)
	}
	follow := o.follow || o.new
	req := map[string]bool{"follow": follow, "nobacklog": o.new}
	f, err := h.RPC("log.dmesg", nodeid, req, flux.Streaming)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		m, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		var e flux.LogEntry
		if err := m.UnmarshalPayload(&e); err != nil {
			return err
		}
		p.print(e)
	}
	if o.readClear {
		return clearLog(ctx, h, nodeid)
	}
	return nil
}

func clearLog(ctx context.Context, h *flux.Handle, nodeid uint32) error {
	return h.Call(ctx, "log.clear", nodeid, nil, nil)
}

// logPrinter writes log entries as flux dmesg shows them.
type logPrinter struct {
	w     io.Writer
	human bool
	delta bool
	color bool

	stamp time.Time // last absolute timestamp printed (human mode)
	prev  time.Time // previous entry's time (human mode)
}

func (p *logPrinter) paint(code, s string) string { return paint(p.color, code, s) }

func severityColor(sev int) string {
	switch {
	case sev <= 3: // emerg..err
		return sgrRed
	case sev == 4:
		return sgrYellow
	case sev == 7:
		return sgrGray
	}
	return sgrBlue
}

func (p *logPrinter) print(e flux.LogEntry) {
	fmt.Fprintf(p.w, "%s %s[%d]: %s\n", p.timestamp(e),
		p.paint(severityColor(e.Severity), e.Name+"."+flux.SeverityName(e.Severity)), e.Rank, e.Message)
}

// timestamp is RFC 3339 UTC with microseconds, or in human mode an
// absolute "[Jan02 15:04]" whenever the minute changes and an offset
// "[  +0.003421]" from it (from the previous entry with delta) otherwise.
func (p *logPrinter) timestamp(e flux.LogEntry) string {
	t := e.Time()
	if !p.human {
		return p.paint(sgrGreen, t.UTC().Format("2006-01-02T15:04:05.000000Z"))
	}
	defer func() { p.prev = t }()
	if p.stamp.IsZero() || !t.Truncate(time.Minute).Equal(p.stamp.Truncate(time.Minute)) {
		p.stamp = t
		return p.paint(sgrGreen, "["+t.Local().Format("Jan02 15:04")+"]")
	}
	base := p.stamp
	if p.delta {
		base = p.prev
	}
	return p.paint(sgrGreen, fmt.Sprintf("[%+11.6f]", t.Sub(base).Seconds()))
}
