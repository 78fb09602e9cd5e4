package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestPreemption: jobs of a preemptible ("standby") queue, or that ask
// to be preemptible, are ended with a preempt exception, newest first
// and no more than needed, when a job that is not preemptible needs
// their resources; preemptible jobs never preempt.
func TestPreemption(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "queues.toml"), []byte("[queues.standby]\npreemptible = true\n[queues.batch]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	if cores < 2 {
		t.Skip("needs a node with 2 cores or more")
	}
	// fill the node: the oldest job from the standby queue, the others
	// batch jobs that asked to be preemptible
	old := e.submit("-q", "standby", "-n1", testDuration("300s"), "true")
	e.waitEvent(old, "start")
	var newer []string
	for i := 1; i < cores; i++ {
		id := e.submit("-q", "batch", "--setattr=preemptible", "-n1", testDuration("300s"), "true")
		e.waitEvent(id, "start")
		newer = append(newer, id.String())
	}
	// a preemptible job waits like any other
	waiter := e.submit("-q", "standby", "-n1", testDuration("0.1s"), "true")
	// a normal one-core job takes the newest preemptible job's core
	urgent := e.submit("-q", "batch", "-n1", testDuration("0.1s"), "true")
	e.waitEvent(urgent, "clean")
	if r := e.field(urgent, "{result}"); r != "COMPLETED" {
		t.Errorf("urgent job: %s", r)
	}
	victim := newer[len(newer)-1]
	if got := e.must("jobs", "-n", "-o", "{exception.type}:{exception.note}", victim); got != "preempt:preempted by job "+urgent.String() {
		t.Errorf("newest preemptible job: %q", got)
	}
	for _, id := range append([]string{old.String()}, newer[:len(newer)-1]...) {
		if st := e.must("jobs", "-n", "-o", "{status_abbrev}", id); st != "R" {
			t.Errorf("job %s is %s: only one job had to go", id, st)
		}
	}
	// the waiting standby job got the core back only after the urgent
	// one, and preempted nobody
	e.waitEvent(waiter, "clean")
	if st := e.must("jobs", "-n", "-o", "{status_abbrev}", old.String()); st != "R" {
		t.Errorf("a preemptible job preempted job %s (%s)", old, st)
	}
	e.fail("preemptible", "submit", "-q", "batch", "--setattr=preemptible=5", "true")
}
