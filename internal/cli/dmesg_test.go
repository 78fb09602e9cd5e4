package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func entryAt(t time.Time, sev int, msg string) flux.LogEntry {
	return flux.LogEntry{Timestamp: float64(t.UnixNano()) / 1e9, Rank: 3, Severity: sev, Name: "app", Message: msg}
}

func TestLogPrinter(t *testing.T) {
	t0 := time.Date(2024, 1, 2, 15, 4, 5, 123456000, time.UTC)
	entries := []flux.LogEntry{
		entryAt(t0, 3, "first"),
		entryAt(t0.Add(1500*time.Millisecond), 6, "second"),
		entryAt(t0.Add(2*time.Second), 7, "third"),
		entryAt(t0.Add(2*time.Minute), 4, "later"),
	}
	render := func(p *logPrinter) string {
		var out bytes.Buffer
		p.w = &out
		for _, e := range entries {
			p.print(e)
		}
		return out.String()
	}
	want := "2024-01-02T15:04:05.123456Z app.err[3]: first\n" +
		"2024-01-02T15:04:06.623456Z app.info[3]: second\n" +
		"2024-01-02T15:04:07.123456Z app.debug[3]: third\n" +
		"2024-01-02T15:06:05.123456Z app.warning[3]: later\n"
	if got := render(&logPrinter{}); got != want {
		t.Errorf("plain:\n%s\nwant\n%s", got, want)
	}
	stamp := func(tt time.Time) string { return "[" + tt.Local().Format("Jan02 15:04") + "]" }
	want = stamp(t0) + " app.err[3]: first\n" +
		"[  +1.500000] app.info[3]: second\n" +
		"[  +2.000000] app.debug[3]: third\n" +
		stamp(t0.Add(2*time.Minute)) + " app.warning[3]: later\n"
	if got := render(&logPrinter{human: true}); got != want {
		t.Errorf("human:\n%s\nwant\n%s", got, want)
	}
	if got := render(&logPrinter{human: true, delta: true}); !strings.Contains(got, "[  +0.500000] app.debug[3]: third\n") {
		t.Errorf("human delta:\n%s", got)
	}
	if got := render(&logPrinter{color: true}); !strings.Contains(got, sgrRed+"app.err"+sgrReset+"[3]: first") {
		t.Errorf("color:\n%q", got)
	}
}

func TestParseSeverity(t *testing.T) {
	for i, name := range []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"} {
		if got, err := flux.ParseSeverity(name); err != nil || got != i {
			t.Errorf("%s: got %d, %v; want %d", name, got, err, i)
		}
		if flux.SeverityName(i) != name {
			t.Errorf("flux.SeverityName(%d) = %s", i, flux.SeverityName(i))
		}
	}
	for _, bad := range []string{"", "error", "warn", "INFO", "3"} {
		if _, err := flux.ParseSeverity(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestUseColor(t *testing.T) {
	var buf bytes.Buffer
	for when, want := range map[string]bool{"always": true, "never": false, "auto": false} {
		if got, err := useColor(when, &buf); err != nil || got != want {
			t.Errorf("%s: got %v, %v", when, got, err)
		}
	}
	if _, err := useColor("sometimes", &buf); err == nil {
		t.Error("--color=sometimes accepted")
	}
}

func dmesgString(t *testing.T, h *flux.Handle, o dmesgOptions) string {
	t.Helper()
	var out bytes.Buffer
	if err := dmesg(testCtx(t), h, flux.NodeidAny, o, &logPrinter{w: &out}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestDmesgLogger(t *testing.T) {
	tb := startBrokers(t, 2, false)
	h := tb.handle(t)
	ctx := testCtx(t)
	if err := logAppend(ctx, h, 4, "mytest", "hello world"); err != nil {
		t.Fatal(err)
	}
	if got := dmesgString(t, h, dmesgOptions{}); !strings.Contains(got, "Z mytest.warning[0]: hello world\n") {
		t.Errorf("dmesg lacks the logged line:\n%s", got)
	}
	// rank 1's ring is its own
	var out bytes.Buffer
	if err := dmesg(ctx, h, 1, dmesgOptions{}, &logPrinter{w: &out}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "hello world") {
		t.Errorf("rank 1's ring has rank 0's entry:\n%s", out.String())
	}

	if got := dmesgString(t, h, dmesgOptions{readClear: true}); !strings.Contains(got, "hello world") {
		t.Errorf("read-clear didn't print:\n%s", got)
	}
	if got := dmesgString(t, h, dmesgOptions{}); strings.Contains(got, "hello world") {
		t.Errorf("read-clear didn't clear:\n%s", got)
	}
	if err := logAppend(ctx, h, 6, "again", "x"); err != nil {
		t.Fatal(err)
	}
	if got := dmesgString(t, h, dmesgOptions{clear: true}); got != "" {
		t.Errorf("--clear printed %q", got)
	}
	if got := dmesgString(t, h, dmesgOptions{}); strings.Contains(got, "again.info") {
		t.Errorf("--clear didn't clear:\n%s", got)
	}
}

func TestDmesgFollow(t *testing.T) {
	for _, o := range []dmesgOptions{{follow: true}, {new: true}} {
		tb := startBrokers(t, 1, false)
		h := tb.handle(t)
		if err := logAppend(testCtx(t), h, 6, "old", "before"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		out := &testinstance.Buffer{}
		done := make(chan error, 1)
		go func() { done <- dmesg(ctx, tb.handle(t), flux.NodeidAny, o, &logPrinter{w: out}) }()
		waitFor(t, "a followed entry", func() bool {
			if err := logAppend(testCtx(t), h, 6, "new", "after"); err != nil {
				t.Fatal(err)
			}
			return strings.Contains(out.String(), "new.info[0]: after")
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%+v: interrupted follow returned %v", o, err)
		}
		if old := strings.Contains(out.String(), "old.info[0]: before"); old != o.follow {
			t.Errorf("%+v: backlog shown = %v:\n%s", o, old, out.String())
		}
	}
}

func TestLoggerCommandErrors(t *testing.T) {
	t.Setenv("FLUX_URI", "")
	for _, args := range [][]string{
		{"logger"},
		{"logger", "--severity=loud", "x"},
		{"logger", "--appname=", "x"},
		{"dmesg", "--color=maybe"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &out, &errb); code == 0 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
