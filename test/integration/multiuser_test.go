package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// withPath runs the flux command with the flux binary first in PATH, so
// that jobs running "flux ..." find it.
func (e *env) withPath(args ...string) testinstance.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.inst.Bin, args...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI, "PATH="+filepath.Dir(e.inst.Bin)+":"+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	if cmd.ProcessState == nil {
		e.t.Fatalf("flux %s did not run", strings.Join(args, " "))
	}
	return testinstance.Result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode()}
}

// TestAllocBypass runs seed 001's command: a job that brings its own R
// (that of an earlier job) runs there without the scheduler, once the
// owner loaded alloc-bypass; other users are refused.
func TestAllocBypass(t *testing.T) {
	e := start(t)
	first := e.submit("-n1", testDuration("0.01s"), "true")
	e.waitEvent(first, "clean")
	R := e.must("job", "info", first.String(), "R")
	bypass := []string{"run", "-o", "per-resource.type=node", "--setattr=system.alloc-bypass.R=" + R, "flux", "getattr", "rank"}

	e.must("jobtap", "load", "alloc-bypass.so")
	if list := e.must("jobtap", "list"); !strings.Contains(list, "alloc-bypass") {
		t.Fatalf("flux jobtap list: %q", list)
	}
	// the instance is full: only a job that bypasses the scheduler runs
	blocker := e.submit(append(whole, testDuration("60s"), "true")...)
	e.waitEvent(blocker, "start")
	r := e.withPath(bypass...)
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("alloc-bypass job: %+v", r)
	}
	id := jobid.ID(0)
	if last := e.must("job", "last"); last != "" {
		id = jobid.MustParse(last)
	}
	names := strings.Join(e.eventNames(id), " ")
	if !strings.HasPrefix(names, "submit set-flags validate depend priority alloc start") {
		t.Errorf("bypass job events: %s", names)
	}
	alloc, _ := find(e.events(id), "alloc")
	if string(alloc.Context) != `{"bypass":true}` {
		t.Errorf("alloc context %s", alloc.Context)
	}
	if got := e.must("job", "info", id.String(), "R"); got != R {
		t.Errorf("bypass job R %s, want %s", got, R)
	}
	e.must("cancel", blocker.String())

	t.Run("guest refused", func(t *testing.T) {
		e := e.sub(t)
		if !canRunAsGuest(e) {
			t.Skip("needs root to run a client as another user")
		}
		r := e.asGuest(bypass...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "alloc-bypass") || !strings.Contains(r.Stderr, "owner") {
			t.Fatalf("guest alloc-bypass job: %+v", r)
		}
	})

	e.must("jobtap", "remove", "alloc-bypass.so")
	if list := e.must("jobtap", "list"); strings.Contains(list, "alloc-bypass") {
		t.Fatalf("flux jobtap list after remove: %q", list)
	}
}

// TestGuest checks what a user other than the instance owner may do.
func TestGuest(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root to run a client as another user")
	}
	guest := func(args ...string) string {
		t.Helper()
		r := e.asGuest(args...)
		if r.Code != 0 {
			t.Fatalf("guest flux %s: %+v", strings.Join(args, " "), r)
		}
		return strings.TrimSpace(r.Stdout)
	}
	refused := func(want string, args ...string) {
		t.Helper()
		r := e.asGuest(args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Fatalf("guest flux %s: %+v, want a refusal with %q", strings.Join(args, " "), r, want)
		}
	}

	mine := e.submit("--urgency=hold", "true")
	theirs := jobid.MustParse(guest("submit", "--urgency=hold", "-t", "30m", testDuration("0.01s"), "true"))
	if got := e.field(theirs, "{userid}"); got != "65534" {
		t.Fatalf("guest job userid %s", got)
	}
	// a guest may not touch the owner's job, nor raise urgency past 16
	refused("", "cancel", mine.String())
	refused("", "job", "urgency", mine.String(), "default")
	refused("", "update", mine.String(), "duration=1m")
	refused("", "job", "urgency", theirs.String(), "expedite")
	// nor load plugins, nor submit waitable jobs (flux-job(1))
	refused("", "jobtap", "load", "alloc-bypass.so")
	refused("waitable", "submit", "--flags=waitable", "true")
	// nor read the time left of the owner's job once it has ended
	ended := e.submit("true")
	e.must("job", "wait-event", ended.String(), "clean")
	refused("belongs to another user", "job", "timeleft", ended.String())

	// with a duration limit configured, guests are held to it (only the
	// owner's updates may go beyond it)
	e.must("jobtap", "remove", ".limit-duration")
	e.must("jobtap", "load", ".limit-duration", "duration=1h")
	refused("exceeds", "submit", "-t", "2h", "true")
	refused("exceeds", "update", theirs.String(), "duration=2h")
	guest("update", theirs.String(), "duration=45m")
	if d := e.field(theirs, "{duration}"); d != "2700.0" {
		t.Errorf("guest job duration after update: %s", d)
	}
	e.must("update", theirs.String(), "duration=2h")
	if d := e.field(theirs, "{duration}"); d != "7200.0" {
		t.Errorf("guest job duration after the owner's update: %s", d)
	}
	// past the limit by the owner's will: the guest may change it no more
	refused("immutable", "update", theirs.String(), "name=mine-again")

	guest("job", "urgency", theirs.String(), "default")
	if r := e.result(theirs); r != "COMPLETED" {
		t.Fatalf("guest job: %s", r)
	}
	// the guest's own job list: only its job, and the owner sees both
	if got := guest("jobs", "-a", "-n", "-o", "{id}"); got != theirs.String() && got != strings.TrimSpace(e.field(theirs, "{id}")) {
		t.Errorf("guest flux jobs -a: %q", got)
	}
	if got := e.must("jobs", "-A", "-a", "-n", "-o", "{id.f58}"); !strings.Contains(got, theirs.String()) || !strings.Contains(got, mine.String()) {
		t.Errorf("owner flux jobs -A -a: %q", got)
	}
	e.must("cancel", mine.String())

	// a guest's running job: its name may change, not its time limit
	running := jobid.MustParse(guest("submit", "-t", "10m", testDuration("1h"), "true"))
	e.waitEvent(running, "start")
	guest("update", running.String(), "name=still-mine")
	refused("instance owner", "update", running.String(), "duration=20m")
	guest("cancel", running.String())
	e.waitEvent(running, "clean")
}

// TestJobtap covers flux jobtap list/load/remove/query (flux-jobtap(1)).
func TestJobtap(t *testing.T) {
	e := start(t)
	if got := e.must("jobtap", "list"); got != "" {
		t.Errorf("flux jobtap list (builtins hidden): %q", got)
	}
	all := strings.Split(e.must("jobtap", "list", "-a"), "\n")
	for _, want := range []string{".priority-default", ".dependency-after", ".begin-time", ".limit-duration"} {
		found := false
		for _, n := range all {
			found = found || n == want
		}
		if !found {
			t.Errorf("flux jobtap list -a lacks %s: %v", want, all)
		}
	}
	e.must("jobtap", "load", "alloc-bypass.so")
	if got := e.must("jobtap", "list"); got != "alloc-bypass.so" {
		t.Errorf("flux jobtap list after load: %q", got)
	}
	e.fail("", "jobtap", "load", "alloc-bypass.so")
	e.fail("", "jobtap", "load", "nosuch.so")
	var q map[string]any
	if err := json.Unmarshal([]byte(e.must("jobtap", "query", ".limit-duration")), &q); err != nil || q["name"] != ".limit-duration" {
		t.Errorf("flux jobtap query: %v %v", q, err)
	}
	e.must("jobtap", "remove", "alloc-bypass.so")
	e.fail("", "jobtap", "remove", "alloc-bypass.so")
	// a pattern removes matching non-builtin plugins only
	e.must("jobtap", "load", "alloc-bypass.so")
	e.must("jobtap", "load", "perilog.so")
	e.must("jobtap", "remove", "*")
	if got := e.must("jobtap", "list"); got != "" {
		t.Errorf("flux jobtap list after remove '*': %q", got)
	}
	if got := strings.Split(e.must("jobtap", "list", "-a"), "\n"); len(got) != len(all) {
		t.Errorf("remove '*' removed builtins: %v", got)
	}
}
