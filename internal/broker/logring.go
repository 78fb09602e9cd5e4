package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Syslog severities used by flux dmesg and flux logger (RFC 5424).
const (
	sevEmerg = iota
	sevAlert
	sevCrit
	sevErr
	sevWarning
	sevNotice
	sevInfo
	sevDebug
)

// logRing keeps the last N log entries of a broker and feeds followers
// (flux dmesg --follow).
type logRing struct {
	mu        sync.Mutex
	rank      uint32
	entries   []flux.LogEntry
	next      int
	full      bool
	seq       uint64
	followers map[chan flux.LogEntry]struct{}
	stderr    io.Writer
	stderrSev int
	level     int // entries of a greater severity number are dropped (log-level)
}

func newLogRing(size int, rank uint32) *logRing {
	return &logRing{
		entries:   make([]flux.LogEntry, size),
		rank:      rank,
		followers: make(map[chan flux.LogEntry]struct{}),
		stderr:    os.Stderr,
		stderrSev: sevErr,
		level:     sevDebug,
	}
}

// setSize changes the number of entries the ring keeps (log-ring-size),
// keeping the newest.
func (r *logRing) setSize(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []flux.LogEntry
	if r.full {
		old = append(old, r.entries[r.next:]...)
	}
	old = append(old, r.entries[:r.next]...)
	if len(old) > n {
		old = old[len(old)-n:]
	}
	r.entries = make([]flux.LogEntry, n)
	copy(r.entries, old)
	r.next = len(old) % n
	r.full = len(old) == n
}

func (r *logRing) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// setLevels changes the log-level and log-stderr-level thresholds.
func (r *logRing) setLevels(level, stderrSev *int) {
	r.mu.Lock()
	if level != nil {
		r.level = *level
	}
	if stderrSev != nil {
		r.stderrSev = *stderrSev
	}
	r.mu.Unlock()
}

func (r *logRing) levels() (level, stderrSev int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.level, r.stderrSev
}

func (r *logRing) append(e flux.LogEntry) {
	r.mu.Lock()
	if e.Severity > r.level {
		r.mu.Unlock()
		return
	}
	r.seq++
	e.Seq = r.seq
	r.entries[r.next] = e
	r.next = (r.next + 1) % len(r.entries)
	if r.next == 0 {
		r.full = true
	}
	for ch := range r.followers {
		select {
		case ch <- e:
		default: // a follower that can't keep up misses entries
		}
	}
	w, level := r.stderr, r.stderrSev
	r.mu.Unlock()
	if w != nil && e.Severity <= level {
		fmt.Fprintln(w, e.Format())
	}
}

// snapshot returns the buffered entries, oldest first.
// stats is the ring's counters for flux module stats log (flux-core's
// names): messages logged, entries held, the ring's size.
func (r *logRing) stats() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	used := r.next
	if r.full {
		used = len(r.entries)
	}
	return map[string]any{"count": r.seq, "ring-used": used, "ring-size": len(r.entries)}
}

func (r *logRing) snapshot() []flux.LogEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []flux.LogEntry
	if r.full {
		out = append(out, r.entries[r.next:]...)
	}
	return append(out, r.entries[:r.next]...)
}

func (r *logRing) clear() {
	r.mu.Lock()
	r.next, r.full = 0, false
	r.mu.Unlock()
}

func (r *logRing) follow() chan flux.LogEntry {
	ch := make(chan flux.LogEntry, 1024)
	r.mu.Lock()
	r.followers[ch] = struct{}{}
	r.mu.Unlock()
	return ch
}

func (r *logRing) unfollow(ch chan flux.LogEntry) {
	r.mu.Lock()
	delete(r.followers, ch)
	r.mu.Unlock()
}

// ringHandler is a slog.Handler that writes into the ring.
type ringHandler struct {
	ring  *logRing
	name  string
	attrs []slog.Attr
	level slog.Leveler
}

func (h *ringHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func slogSeverity(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return sevErr
	case l >= slog.LevelWarn:
		return sevWarning
	case l >= slog.LevelInfo:
		return sevInfo
	}
	return sevDebug
}

func (h *ringHandler) Handle(_ context.Context, rec slog.Record) error {
	var sb strings.Builder
	sb.WriteString(rec.Message)
	name := h.name
	write := func(a slog.Attr) bool {
		if a.Key == "module" {
			name = a.Value.String()
			return true
		}
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value.Any())
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	rec.Attrs(write)
	h.ring.append(flux.LogEntry{
		Timestamp: float64(rec.Time.UnixNano()) / 1e9,
		Rank:      h.ring.rank,
		Severity:  slogSeverity(rec.Level),
		Name:      name,
		Message:   sb.String(),
	})
	return nil
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *ringHandler) WithGroup(string) slog.Handler { return h }
