package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestPreemptModeReload: flux config reload applies [sched-simple]
// preempt-mode and a queue's preempt-mode to the preemptions after it,
// with no module reload; a reload changing a key sched-simple reads only
// at load (queue-depth) is refused, naming the key and flux module
// reload sched-simple, and changes nothing.
func TestPreemptModeReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	queues := "[queues.standby]\npreemptible = true\n[queues.scavenger]\npreemptible = true\n[queues.batch]\n"
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(conf, "preempt.toml"), []byte(queues+extra), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	if cores < 1 {
		t.Skip("no cores")
	}
	c := fmt.Sprintf("--cores-per-task=%d", cores)
	dir := t.TempDir()
	n := 0
	// preempt runs a job of queue, preempts it for a batch job, and
	// returns its result and whether it was requeued
	preempt := func(queue string) (string, bool) {
		t.Helper()
		n++
		victim := e.submit("-q", queue, "-n1", c, "sh", "-c", victimScript(dir, fmt.Sprintf("ran%d", n)))
		waitFirstRun(e, victim, dir, fmt.Sprintf("ran%d", n))
		urgent := e.submit("-q", "batch", "-n1", c, "true")
		if r := e.result(urgent); r != "COMPLETED" {
			t.Fatalf("the urgent job: %s", r)
		}
		r := e.result(victim)
		return r, strings.Contains(e.must("job", "eventlog", victim.String()), " requeue count=1")
	}

	if r, requeued := preempt("standby"); r != "FAILED" || requeued {
		t.Fatalf("before any reload (preempt-mode cancel): %s, requeued %v", r, requeued)
	}

	// refused: queue-depth is read at load; preempt-mode, in the same
	// reload, is not taken either
	write("[sched-simple]\npreempt-mode = \"requeue\"\nqueue-depth = 2\n")
	res := e.fail("flux module reload sched-simple queue-depth=2", "config", "reload")
	if !strings.Contains(res.Stderr, "[sched-simple] queue-depth (2, now 8)") {
		t.Errorf("the refused reload: %s", res.Stderr)
	}
	if got := e.must("config", "get"); strings.Contains(got, "queue-depth") || strings.Contains(got, "requeue") {
		t.Errorf("flux config get after a refused reload: %s", got)
	}
	if r, requeued := preempt("standby"); r != "FAILED" || requeued {
		t.Fatalf("after the refused reload: %s, requeued %v", r, requeued)
	}

	write("[sched-simple]\npreempt-mode = \"requeue\"\n")
	e.must("config", "reload")
	if got := e.must("config", "get", "sched-simple"); !strings.Contains(got, "requeue") {
		t.Fatalf("flux config get sched-simple: %s", got)
	}
	if r, requeued := preempt("standby"); r != "COMPLETED" || !requeued {
		t.Fatalf("after [sched-simple] preempt-mode = \"requeue\" and flux config reload: %s, requeued %v", r, requeued)
	}

	// the scheduler's back to cancel, one queue's requeue
	queues = strings.Replace(queues, "[queues.scavenger]\npreemptible = true\n", "[queues.scavenger]\npreemptible = true\npreempt-mode = \"requeue\"\n", 1)
	write("")
	e.must("config", "reload")
	if r, requeued := preempt("scavenger"); r != "COMPLETED" || !requeued {
		t.Errorf("after [queues.scavenger] preempt-mode = \"requeue\": the scavenger job %s, requeued %v", r, requeued)
	}
	if r, requeued := preempt("standby"); r != "FAILED" || requeued {
		t.Errorf("after [sched-simple] preempt-mode was removed: the standby job %s, requeued %v", r, requeued)
	}
}

// victimScript is a preemptible job's command: its first run marks dir/name
// and sleeps, a later run exits 0.
func victimScript(dir, name string) string {
	return fmt.Sprintf(`if [ -e %[1]s/%[2]s ]; then exit 0; fi; touch %[1]s/%[2]s; exec sleep 300`, dir, name)
}
