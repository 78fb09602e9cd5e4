package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// guestUID is the uid tests run "other user" clients as (nobody).
const guestUID = 65534

// testDuration is the --setattr that makes the test executor run a job
// for d without processes.
func testDuration(d string) string {
	return "--setattr=system.exec.test.run_duration=" + d
}

// env is a running instance plus helpers bound to the test.
type env struct {
	t    *testing.T
	inst *testinstance.Instance
}

// start starts a 4-broker instance (or skips under -short).
func start(t *testing.T, attrs ...string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	o := testinstance.Options{Size: 4}
	if len(attrs) > 0 {
		o.Attrs = map[string]string{}
		for _, kv := range attrs {
			k, v, _ := strings.Cut(kv, "=")
			o.Attrs[k] = v
		}
	}
	return &env{t: t, inst: testinstance.Start(t, o)}
}

// sub returns e bound to a subtest, so helpers fail the subtest.
func (e *env) sub(t *testing.T) *env { return &env{t: t, inst: e.inst} }

// flux runs the flux command and returns its result.
func (e *env) flux(args ...string) testinstance.Result {
	e.t.Helper()
	return e.inst.Run(e.t, args...)
}

// must runs the flux command, fails the test unless it exits 0, and
// returns its trimmed stdout.
func (e *env) must(args ...string) string {
	e.t.Helper()
	return strings.TrimSpace(e.inst.MustRun(e.t, args...))
}

// fail runs the flux command and fails the test unless it exits non-zero
// with stderr containing want.
func (e *env) fail(want string, args ...string) testinstance.Result {
	e.t.Helper()
	r := e.flux(args...)
	if r.Code == 0 {
		e.t.Fatalf("flux %s succeeded, want failure %q\nstdout: %s", strings.Join(args, " "), want, r.Stdout)
	}
	if !strings.Contains(r.Stderr, want) {
		e.t.Fatalf("flux %s: stderr %q, want it to contain %q", strings.Join(args, " "), r.Stderr, want)
	}
	return r
}

// asGuest runs the flux command as uid guestUID.
func (e *env) asGuest(args ...string) testinstance.Result {
	e.t.Helper()
	return e.asUser(guestUID, args...)
}

// asUser runs the flux command as uid (group guestUID).
func (e *env) asUser(uid uint32, args ...string) testinstance.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.inst.Bin, args...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: guestUID}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil {
		e.t.Fatalf("flux %s as uid %d: %v", strings.Join(args, " "), uid, err)
	}
	return testinstance.Result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode()}
}

// mustAs runs the flux command as uid, fails the test if it fails, and
// returns its trimmed standard output.
func (e *env) mustAs(uid uint32, args ...string) string {
	e.t.Helper()
	r := e.asUser(uid, args...)
	if r.Code != 0 {
		e.t.Fatalf("uid %d: flux %s: %+v", uid, strings.Join(args, " "), r)
	}
	return strings.TrimSpace(r.Stdout)
}

// refusedAs checks that the flux command fails as uid with want in its
// standard error.
func (e *env) refusedAs(uid uint32, want string, args ...string) {
	e.t.Helper()
	r := e.asUser(uid, args...)
	if r.Code == 0 || !strings.Contains(r.Stderr, want) {
		e.t.Errorf("uid %d: flux %s: %+v, want a refusal with %q", uid, strings.Join(args, " "), r, want)
	}
}

// canRunAsGuest reports whether this test process may start processes
// as another user, and the flux binary is reachable by that user.
func canRunAsGuest(e *env) bool {
	if os.Getuid() != 0 {
		return false
	}
	for dir := filepath.Dir(e.inst.Bin); dir != "/"; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
	}
	return true
}

// submit submits a job and returns its id.
func (e *env) submit(args ...string) jobid.ID {
	e.t.Helper()
	out := e.must(append([]string{"submit"}, args...)...)
	id, err := jobid.Parse(out)
	if err != nil {
		e.t.Fatalf("flux submit %s printed %q, not a jobid", strings.Join(args, " "), out)
	}
	return id
}

// waitEvent waits (up to 30s) for an event in a job's eventlog.
func (e *env) waitEvent(id jobid.ID, name string) {
	e.t.Helper()
	e.must("job", "wait-event", "-t", "30", id.String(), name)
}

// field prints one flux jobs field of a job.
func (e *env) field(id jobid.ID, format string) string {
	e.t.Helper()
	return e.must("jobs", "-n", "-o", format, id.String())
}

// events returns a job's main eventlog.
func (e *env) events(id jobid.ID) []eventlog.Event {
	e.t.Helper()
	h := e.inst.Handle(e.t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var resp struct {
		Eventlog string `json:"eventlog"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"eventlog"}, "flags": 0}, &resp); err != nil {
		e.t.Fatalf("eventlog of %s: %v", id, err)
	}
	evs, err := eventlog.Parse([]byte(resp.Eventlog))
	if err != nil {
		e.t.Fatalf("eventlog of %s: %v", id, err)
	}
	return evs
}

// eventNames lists the names of a job's events.
func (e *env) eventNames(id jobid.ID) []string {
	var names []string
	for _, ev := range e.events(id) {
		names = append(names, ev.Name)
	}
	return names
}

// find returns the first event called name (ok=false if none).
func find(evs []eventlog.Event, name string) (eventlog.Event, bool) {
	for _, ev := range evs {
		if ev.Name == name {
			return ev, true
		}
	}
	return eventlog.Event{}, false
}

// ctxOf decodes an event's context into a map.
func ctxOf(t *testing.T, ev eventlog.Event) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(ev.Context) > 0 {
		if err := json.Unmarshal(ev.Context, &m); err != nil {
			t.Fatalf("event %s context: %v", ev.Name, err)
		}
	}
	return m
}

// result waits for a job to become inactive and returns its result
// (COMPLETED, FAILED, CANCELED, TIMEOUT).
func (e *env) result(id jobid.ID) string {
	e.t.Helper()
	e.waitEvent(id, "clean")
	return e.field(id, "{result}")
}

// waitFor polls cond until it holds, failing the test after 60 s (a
// hang guard: a loaded machine can take many seconds).
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitOutput waits until a job's output eventlog holds n events with
// data of its tasks (what they printed is in the KVS).
func (e *env) waitOutput(id jobid.ID, n int) {
	e.t.Helper()
	h := e.inst.Handle(e.t)
	e.waitFor(fmt.Sprintf("%d output events of job %s", n, id), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp struct {
			Output string `json:"guest.output"`
		}
		err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"guest.output"}, "flags": 0}, &resp)
		return err == nil && strings.Count(resp.Output, `"data":"`)-strings.Count(resp.Output, `"data":""`) >= n
	})
}
