package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// asTestGuest runs flux with FLUX_HANDLE_USERID/FLUX_HANDLE_ROLEMASK:
// the owner's connection acting as another user with the user role,
// flux-core's hook for testing guest access without a second account.
func (e *env) asTestGuest(args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(e.inst.Bin, args...)
	py, err := filepath.Abs("../../python")
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI, "FLUXGO_PYTHONPATH="+py,
		"FLUX_HANDLE_USERID="+strconv.Itoa(os.Getuid()+1), "FLUX_HANDLE_ROLEMASK=0x2")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	if cmd.ProcessState == nil {
		e.t.Fatalf("flux %v: %v", args, err)
	}
	return errb.String(), cmd.ProcessState.ExitCode()
}

// TestHandleTestingCreds: with the testing credentials the owner's
// commands are refused what a guest is refused ("Request requires owner
// credentials" for the queue controls) and allowed what a guest may do.
func TestHandleTestingCreds(t *testing.T) {
	e := start(t)
	if errs, code := e.asTestGuest("queue", "status"); code != 0 {
		t.Errorf("status as guest: exit %d: %s", code, errs)
	}
	for _, verb := range []string{"stop", "start", "disable", "enable", "drain", "idle"} {
		errs, code := e.asTestGuest("queue", verb)
		if code == 0 || !strings.Contains(errs, "requires owner credentials") {
			t.Errorf("queue %s as guest: exit %d: %q", verb, code, errs)
		}
	}
	if errs, code := e.asTestGuest("queue", "stop"); code == 0 || strings.Contains(e.must("queue", "status"), "stopped") {
		t.Errorf("a refused stop stopped the queue (exit %d): %s", code, errs)
	}
	// the Python client honours them too
	if errs, code := e.asTestGuest("python", "-c", `import flux; flux.Flux().rpc("job-manager.queue-start", {"start": False, "all": True}).get()`); code == 0 || !strings.Contains(errs, "requires owner credentials") {
		t.Errorf("python as guest: exit %d: %q", code, errs)
	}
	// a guest may not cancel the owner's job
	id := e.submit("--urgency=0", "true")
	if errs, code := e.asTestGuest("cancel", id.String()); code == 0 {
		t.Errorf("the guest cancelled the owner's job: %s", errs)
	}
	e.must("cancel", id.String())
	cmd := exec.Command(e.inst.Bin, "queue", "status")
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI, "FLUX_HANDLE_USERID=nobody")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `FLUX_HANDLE_USERID="nobody"`) {
		t.Errorf("a bad FLUX_HANDLE_USERID: %v %q", err, out)
	}
}
