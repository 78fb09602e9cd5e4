package flux

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// NewLogger returns a logger that appends to the broker's log ring
// buffer (flux dmesg) under name, via log.append requests that expect no
// response.
func NewLogger(h *Handle, name string) *slog.Logger {
	return slog.New(&brokerLogHandler{h: h, name: name, level: slog.LevelDebug})
}

type brokerLogHandler struct {
	h     *Handle
	name  string
	attrs []slog.Attr
	level slog.Level
}

func (l *brokerLogHandler) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= l.level }

func (l *brokerLogHandler) Handle(_ context.Context, rec slog.Record) error {
	var sb strings.Builder
	sb.WriteString(rec.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value.Any())
		return true
	}
	for _, a := range l.attrs {
		add(a)
	}
	rec.Attrs(add)
	sev := 7
	switch {
	case rec.Level >= slog.LevelError:
		sev = 3
	case rec.Level >= slog.LevelWarn:
		sev = 4
	case rec.Level >= slog.LevelInfo:
		sev = 6
	}
	_, err := l.h.RPC("log.append", NodeidAny, map[string]any{
		"severity": sev, "name": l.name, "message": sb.String(),
		"timestamp": float64(rec.Time.UnixNano()) / 1e9,
	}, NoResponse)
	return err
}

func (l *brokerLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *l
	c.attrs = append(append([]slog.Attr(nil), l.attrs...), as...)
	return &c
}

func (l *brokerLogHandler) WithGroup(string) slog.Handler { return l }
