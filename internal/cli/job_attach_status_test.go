package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
)

// TestOutputTailKeepsLastLines: --tail keeps the last lines across
// entries and keeps none for 0.
func TestOutputTailKeepsLastLines(t *testing.T) {
	tl := &outputTail{keep: 3}
	tl.add("stdout", "0", "a\nb\n")
	tl.add("stdout", "0", "c\nd")
	tl.add("stderr", "0", "err\n")
	tl.add("stdout", "0", "-more\n")
	var got []string
	for _, l := range tl.lines {
		got = append(got, l.stream+":"+l.text)
	}
	// "-more" follows stderr output, so it is a line of its own
	if want := "stdout:d|stderr:err\n|stdout:-more\n"; strings.Join(got, "|") != want {
		t.Errorf("lines %q, want %q", strings.Join(got, "|"), want)
	}
	zero := &outputTail{keep: 0}
	zero.add("stdout", "0", "x\ny\n")
	if len(zero.lines) != 0 {
		t.Errorf("--tail=0 kept %d lines", len(zero.lines))
	}
}

// TestAttachStatusLine: each job event moves the status line to
// flux-core's wording; it ends with a newline at start.
func TestAttachStatusLine(t *testing.T) {
	var buf bytes.Buffer
	s := &attachStatus{w: &buf, interval: 60, stop: make(chan struct{}), shown: true, asked: true}
	ctx := context.Background()
	for i, name := range []string{"submit", "validate", "depend", "priority", "alloc", "prolog-start", "prolog-finish", "start"} {
		s.event(ctx, eventlog.Event{Timestamp: 100 + float64(i), Name: name})
	}
	out := buf.String()
	for _, want := range []string{"submitted", "resolving dependencies", "waiting for priority assignment", "waiting for resources", "starting", "waiting for prolog", "started", "00:00:07\r"} {
		if !strings.Contains(out, want) {
			t.Errorf("status line output lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") || !s.done {
		t.Errorf("the line does not end at start: %q", out)
	}
	buf.Reset()
	s.event(ctx, eventlog.Event{Timestamp: 200, Name: "clean"})
	if buf.Len() != 0 {
		t.Errorf("drawn after start: %q", buf.String())
	}
}
