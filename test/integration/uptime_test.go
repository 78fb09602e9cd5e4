package integration

import (
	"strings"
	"testing"
)

// TestUptimeNotices: flux uptime adds a second line when submission is
// disabled or scheduling stopped on all queues (flux-uptime(1)).
func TestUptimeNotices(t *testing.T) {
	e := start(t)
	if out := e.must("uptime"); strings.Contains(out, "\n") {
		t.Errorf("uptime of a running instance: %q, want one line", out)
	}
	e.must("queue", "stop")
	if out := e.must("uptime"); !strings.HasSuffix(out, "\n  scheduler disabled") {
		t.Errorf("after queue stop: %q", out)
	}
	e.must("queue", "disable", "-m", "testing")
	if out := e.must("uptime"); !strings.HasSuffix(out, "\n  submit disabled,  scheduler disabled") {
		t.Errorf("after queue disable: %q", out)
	}
	e.must("queue", "start")
	e.must("queue", "enable")
	if out := e.must("uptime"); strings.Contains(out, "\n") {
		t.Errorf("after queue start and enable: %q", out)
	}
}
