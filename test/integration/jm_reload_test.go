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

// TestJobManagerReload: flux module reload job-manager leaves a working,
// consistent instance. Pending jobs come back pending and run later; a
// job that was running ends with a restart exception, and its processes
// are gone (nothing runs that the records say has ended); the scheduler
// and the executor start over with the new job manager, so new jobs run;
// flux jobs agrees.
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
	e.waitEvent(running, "clean")
	if got := e.field(running, "{status_abbrev} {exception.type}"); got != "F restart" {
		t.Errorf("the running job after the reload: %q, want F restart", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's process %d still runs after its record ended", pid)
		}
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
}
