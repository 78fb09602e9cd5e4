package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// forgeScript sends, as whoever runs it, responses to the job manager's
// sched.alloc requests that deny job ID (argv[1]), one per matchtag in
// 1..argv[2]: what a guest could do if the broker routed a client's
// responses by their route stack alone.
const forgeScript = `
import sys, flux
from flux.core.message import Message
import flux.constants as C
h = flux.Flux()
for tag in range(1, int(sys.argv[2])):
    m = Message(C.FLUX_MSGTYPE_RESPONSE, "sched.alloc", {"id": int(sys.argv[1]), "type": 2, "note": "forged"})
    m.matchtag = tag
    m.push_route("job-manager")
    h.send(m)
print("sent")
`

// TestGuestCannotForgeResponses: a guest's responses that answer no
// request routed to it are dropped by the broker, so a guest cannot
// deny another user's pending job its allocation.
func TestGuestCannotForgeResponses(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root to run a client as another user")
	}
	if _, err := os.Stat(guestPy); err != nil {
		t.Skip("needs " + guestPy)
	}
	// every node busy: the victim waits in SCHED with an alloc request
	// in flight from the job manager to the scheduler
	busy := e.submit("-N4", "--exclusive", "sleep", "300")
	e.waitEvent(busy, "start")
	victim := e.submit("-N1", "true")
	e.waitEvent(victim, "priority")
	time.Sleep(200 * time.Millisecond)
	if out, err := guestPython(e, forgeScript, strings.TrimSpace(e.must("job", "id", "--to=dec", victim.String())), "3000"); err != nil {
		t.Fatalf("the guest client failed (%v): %s", err, out)
	}
	time.Sleep(300 * time.Millisecond) // a window in which the forgery must have no effect
	for _, ev := range e.eventNames(victim) {
		if ev == "exception" {
			t.Fatalf("a guest's forged sched.alloc response reached the job manager: %v", e.eventNames(victim))
		}
	}
	if dmesg := e.must("dmesg"); !strings.Contains(dmesg, "dropping a response from a guest client") {
		t.Errorf("no dmesg record of the dropped responses")
	}
	// the victim still runs once resources free up
	e.must("cancel", busy.String())
	e.waitEvent(victim, "clean")
	if r := e.result(victim); r != "COMPLETED" {
		t.Errorf("victim ended %s", r)
	}
}

// guestPy is the Python guest clients run: the system's (a user's own,
// such as pyenv's, is not the guest's to run).
const guestPy = "/usr/bin/python3"

// guestPython runs a Python script with fluxgo's bindings as the guest
// user against e's instance.
func guestPython(e *env, script string, args ...string) ([]byte, error) {
	e.t.Helper()
	pydir, err := filepath.Abs("../../python")
	if err != nil {
		e.t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "guestpy")
	if err != nil {
		e.t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the guest reads the script
	path := filepath.Join(dir, "script.py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, guestPy, append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI, "PYTHONPATH="+pydir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: guestUID, Gid: guestUID}}
	return cmd.CombinedOutput()
}

// configReloadScript asks for job-manager, job-ingest and sched-simple
// config-reload as whoever runs it, printing each outcome.
const configReloadScript = `
import flux
h = flux.Flux()
for svc in ("job-manager", "job-ingest", "sched-simple"):
    try:
        h.rpc(svc + ".config-reload", {"policy": {"limits": {"duration": "1s"}}}).get()
        print(svc, "accepted")
    except OSError as e:
        print(svc, "refused", e.errno)
`

// TestGuestOwnerOnlyOperations: what only the instance owner may do is
// refused to a guest: reloading the configuration of the job modules,
// events the services act on (job-purge-inactive), submitting with
// FLUX_JOB_NOVALIDATE, and reading another user's time left.
func TestGuestOwnerOnlyOperations(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root to run clients as another user")
	}
	done := e.submit("true")
	e.waitEvent(done, "clean")
	running := e.submit("sleep", "300")
	e.waitEvent(running, "start")

	if r := e.asGuest("job", "timeleft", running.String()); r.Code == 0 {
		t.Errorf("a guest read the owner's job's time left: %+v", r)
	}
	if r := e.asGuest("submit", "--flags=novalidate", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "FLUX_JOB_NOVALIDATE") {
		t.Errorf("a guest submitted with novalidate: %+v", r)
	}
	e.asGuest("event", "pub", "job-purge-inactive", `{"jobs":[`+strings.TrimSpace(e.must("job", "id", "--to=dec", done.String()))+`]}`)
	time.Sleep(200 * time.Millisecond)
	if got := e.must("jobs", "-a", "-n", "-o", "{id}"); !strings.Contains(got, done.String()) {
		t.Errorf("a guest's job-purge-inactive event hid the owner's job: %q", got)
	}
	if _, err := os.Stat(guestPy); err == nil {
		out, err := guestPython(e, configReloadScript)
		if err != nil {
			t.Fatalf("guest client: %v: %s", err, out)
		}
		for _, svc := range []string{"job-manager", "job-ingest", "sched-simple"} {
			if !strings.Contains(string(out), svc+" refused 1\n") {
				t.Errorf("%s.config-reload from a guest: %s", svc, out)
			}
		}
	}
	// the owner's limits did not change: a long job is still accepted
	e.submit("--urgency=hold", "-t", "1h", "true")
	e.must("cancel", running.String())
}
