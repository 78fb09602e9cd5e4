package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// flux update: keys outside attributes./resources./tasks. go under
// attributes.system, an infinite duration is unlimited (0), --dry-run
// prints the updates only (relative durations resolved against the job),
// --verbose reports what changed.
func TestUpdateOptions(t *testing.T) {
	e := start(t)
	id := e.submit("--urgency=hold", "-t", "10m", testDuration("0.01s"), "true")
	e.waitEvent(id, "priority")
	jobDuration := func() string {
		e.t.Helper()
		return e.field(id, "{duration}")
	}

	// --dry-run resolves relative durations but changes nothing
	if got := e.must("update", "-n", id.String(), "duration=+1m"); got != `{"attributes.system.duration": 660.0}` {
		t.Errorf("dry-run duration=+1m: %s", got)
	}
	if got := e.must("update", "--dry-run", id.String(), "duration=-30s", "name=x"); got != `{"attributes.system.duration": 570.0, "attributes.system.job.name": "x"}` {
		t.Errorf("dry-run duration=-30s name=x: %s", got)
	}
	if got := e.must("update", "-n", id.String(), "duration=+inf"); got != `{"attributes.system.duration": 0.0}` {
		t.Errorf("dry-run duration=+inf: %s", got)
	}
	if d := jobDuration(); d != "600.0" {
		t.Fatalf("duration after dry runs: %s", d)
	}

	// --verbose: one line per key, on stderr, once applied
	r := e.flux("update", "-v", id.String(), "duration=20m", "name=renamed")
	if r.Code != 0 || r.Stdout != "" || r.Stderr != "flux-update: INFO: updated attributes.system.duration to 1200.0\n"+
		"flux-update: INFO: updated attributes.system.job.name to renamed\n" {
		t.Errorf("update -v: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if got := e.field(id, "{name} {duration}"); got != "renamed 1200.0" {
		t.Errorf("after update -v: %s", got)
	}
	// nothing is reported of an update that failed
	r = e.fail("attributes.system.myattr", "update", "-v", id.String(), "duration=30m", "myattr=1")
	if strings.Contains(r.Stderr, "INFO") || r.Code != 1 {
		t.Errorf("failed update -v: exit %d, stderr %q", r.Code, r.Stderr)
	}

	// unprefixed keys are attributes.system.KEY: the job manager names
	// the key it refuses, not "only attributes.* keys"
	r = e.fail("attributes.system.myattr", "update", id.String(), "myattr=1")
	if strings.Contains(r.Stderr, "only attributes") {
		t.Errorf("myattr=1: %s", r.Stderr)
	}
	e.fail("", "update", id.String(), "tasks.0.slot=x")

	// inf (and +inf) make the duration unlimited
	e.must("update", id.String(), "duration=inf")
	var last map[string]any
	for _, ev := range e.events(id) {
		if ev.Name == "jobspec-update" {
			last = ctxOf(t, ev)
		}
	}
	if d, ok := last["attributes.system.duration"]; !ok || d != 0.0 {
		t.Errorf("last jobspec-update after duration=inf: %v", last)
	}
	if d := jobDuration(); d != "0.0" {
		t.Errorf("duration after duration=inf: %s", d)
	}
	e.fail("no time limit to adjust", "update", id.String(), "duration=+1m")
	e.fail("no time limit to adjust", "update", id.String(), "duration=-1m")
	e.must("update", id.String(), "attributes.system.duration=5m")
	e.must("update", id.String(), "duration=+inf")
	if d := jobDuration(); d != "0.0" {
		t.Errorf("duration after duration=+inf: %s", d)
	}
	e.must("update", id.String(), "duration=5m")
	r = e.fail("attributes.system.duration=-inf", "update", id.String(), "duration=-inf")
	if !strings.Contains(r.Stderr, "is not positive") {
		t.Errorf("duration=-inf: %s", r.Stderr)
	}
	e.fail("attributes.system.duration=-5m", "update", id.String(), "duration=-5m")
	e.fail(`attributes.system.duration=soon: invalid Flux standard duration "soon"`, "update", id.String(), "duration=soon")
	if d := jobDuration(); d != "300.0" {
		t.Errorf("duration after refused updates: %s", d)
	}

	// the job manager takes an RFC 23 string too, "inf" as unlimited
	h := e.inst.Handle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Call(ctx, "job-manager.update", flux.NodeidAny, map[string]any{"id": id, "updates": map[string]any{"attributes.system.duration": "inf"}}, nil); err != nil {
		t.Fatalf("job-manager.update duration \"inf\": %v", err)
	}
	if d := jobDuration(); d != "0.0" {
		t.Errorf("duration after a request for \"inf\": %s", d)
	}

	// --wait: the update is in the eventlog on return
	e.must("update", "--wait", id.String(), "name=waited")
	found := false
	for _, ev := range e.events(id) {
		if ev.Name == "jobspec-update" && ctxOf(t, ev)["attributes.system.job.name"] == "waited" {
			found = true
		}
	}
	if !found {
		t.Errorf("update --wait returned before its jobspec-update event: %v", e.eventNames(id))
	}

	// command-line errors exit 2
	for _, args := range [][]string{{"update", id.String()}, {"update", id.String(), "novalue"}} {
		if r := e.flux(args...); r.Code != 2 {
			t.Errorf("flux %s: exit %d, %q", strings.Join(args, " "), r.Code, r.Stderr)
		}
	}
	e.must("cancel", id.String())
}
