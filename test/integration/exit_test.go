package integration

import (
	"strings"
	"testing"
	"time"
)

// earlyExit is a job whose task 1 exits at once (status 3) while the
// others sleep.
var earlyExit = []string{"sh", "-c", `test "$FLUX_TASK_RANK" -eq 1 && exit 3; sleep 60`}

// TestExitTimeout: once a job's first task has ended, its other tasks
// may run on for exit-timeout (30s by default, none for instances);
// then the job ends with an exception. exit-on-error ends it at once
// when that first task failed (flux-shell-options(7)).
func TestExitTimeout(t *testing.T) {
	e := start(t)
	t0 := time.Now()
	r := e.flux(append([]string{"run", "-N2", "-n2", "-o", "exit-timeout=1s"}, earlyExit...)...)
	if r.Code == 0 || !strings.Contains(r.Stderr, "exit-timeout") || time.Since(t0) > 30*time.Second {
		t.Errorf("exit-timeout=1s: exit %d after %v: %s", r.Code, time.Since(t0), r.Stderr)
	}
	t0 = time.Now()
	r = e.flux(append([]string{"run", "-N2", "-n2", "-o", "exit-on-error"}, earlyExit...)...)
	if r.Code == 0 || !strings.Contains(r.Stderr, "task 1 exited with status 3 (exit-on-error)") || time.Since(t0) > 30*time.Second {
		t.Errorf("exit-on-error: exit %d after %v: %s", r.Code, time.Since(t0), r.Stderr)
	}
	// every task ending on its own is no timeout
	if r := e.flux("run", "-n2", "-o", "exit-timeout=0.5s", "sh", "-c", `test "$FLUX_TASK_RANK" -eq 1 || sleep 0.2`); r.Code != 0 {
		t.Errorf("tasks ending 0.2s apart: exit %d: %s", r.Code, r.Stderr)
	}
	id := e.submit("-o", "exit-timeout=bogus", "true")
	e.waitEvent(id, "clean")
	if ev := strings.Join(e.eventNames(id), " "); !strings.Contains(ev, "exception") {
		t.Errorf("exit-timeout=bogus: %s", ev)
	}
	if log := e.must("job", "eventlog", id.String()); !strings.Contains(log, `exit-timeout=\"bogus\"`) && !strings.Contains(log, `exit-timeout="bogus"`) {
		t.Errorf("the exception does not name the bad option:\n%s", log)
	}
}
