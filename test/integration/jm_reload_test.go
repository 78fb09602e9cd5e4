package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJobManagerReload: flux module reload job-manager does not kill
// running jobs (seed 003's restart without killing jobs, for the job
// manager): the executor keeps them and the new job manager reattaches
// them, so they end with their own exit status and output; pending jobs
// come back pending; the scheduler starts over with the new job manager,
// so new jobs run; flux jobs agrees. A job that ends while no job
// manager is loaded (module remove, then load) is recorded all the same.
func TestJobManagerReload(t *testing.T) {
	e := start(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	running := e.submit("sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	e.waitEvent(running, "start")
	var pid int
	for deadline := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(pidfile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if pid == 0 {
		t.Fatal("the job never wrote its pid")
	}
	held := e.submit("--urgency=hold", "true")
	e.must("module", "reload", "job-manager")
	if got := e.field(running, "{status_abbrev}"); got != "R" {
		t.Errorf("the running job after the reload: %q, want R", got)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Errorf("the job's process %d is gone after the reload", pid)
	}
	syscall.Kill(pid, syscall.SIGTERM) // its own end: exit status 143
	e.waitEvent(running, "clean")
	if got := e.field(running, "{result} {returncode} {exception.type}"); got != "FAILED 143" {
		t.Errorf("the reattached job ended %q, want FAILED 143 and no exception", got)
	}
	if got := e.field(held, "{status_abbrev}"); got != "S" {
		t.Errorf("the held job after the reload: %q, want S", got)
	}
	e.must("job", "urgency", held.String(), "default")
	e.waitEvent(held, "clean")
	fresh := e.submit("-N4", "true")
	e.waitEvent(fresh, "clean")
	if got := e.field(fresh, "{result}"); got != "COMPLETED" {
		t.Errorf("a job after the reload: %s", got)
	}
	// and again, with nothing running
	e.must("module", "reload", "job-manager")
	again := e.submit("true")
	e.waitEvent(again, "clean")
	// a job ends while no job manager is loaded
	quick := e.submit("sh", "-c", "sleep 0.5; exit 5")
	e.waitEvent(quick, "start")
	e.must("module", "remove", "job-manager")
	// its tasks end and job-exec records it (the exec eventlog's done)
	e.must("job", "wait-event", "-p", "exec", "-t", "30", quick.String(), "done")
	e.must("module", "load", "job-manager")
	e.waitEvent(quick, "clean")
	// job-list learns of it once it has subscribed to the new job
	// manager again
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := e.field(quick, "{result} {returncode}")
		if got == "FAILED 5" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job that ended without a job manager: %q, want FAILED 5", got)
		}
	}
}
