package jobmanager_test

import (
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestRestartRestoresJobs stops an instance with a finished, a held and a
// running job and starts it again on the same statedir: the finished job
// is still there, the held one still pending, and the one that was
// running ends with a recorded exception instead of vanishing.
func TestRestartRestoresJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real instances")
	}
	dir := t.TempDir()
	attrs := map[string]string{"statedir": dir}
	inst := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	done := strings.TrimSpace(inst.MustRun(t, "submit", "--wait", "--setattr=system.exec.test.run_duration=0.01s", "true"))
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	running := strings.TrimSpace(inst.MustRun(t, "submit", "--setattr=system.exec.test.run_duration=100s", "sleep"))
	inst.MustRun(t, "job", "wait-event", "-t", "10", running, "start")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("first instance exited %d: %s", code, inst.Stderr())
	}

	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	inst2.MustRun(t, "job", "wait-event", "-t", "10", running, "clean")
	out := inst2.MustRun(t, "jobs", "-a", "-n", "-o", "{id.f58} {state} {result}")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			got[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if got[done] != "INACTIVE COMPLETED" {
		t.Errorf("finished job: %q", got[done])
	}
	if !strings.HasPrefix(got[held], "SCHED") { // via flux-restart and a new priority
		t.Errorf("held job: %q", got[held])
	}
	if got[running] != "INACTIVE FAILED" {
		t.Errorf("job running at shutdown: %q", got[running])
	}
	// Either the executor ended the job at shutdown (a finish with a
	// signal status) or the restarted job manager did (an exception).
	log := inst2.MustRun(t, "job", "eventlog", running)
	if !strings.Contains(log, "restarted while the job was running") && !strings.Contains(log, "finish status=9") {
		t.Errorf("eventlog shows neither a shutdown kill nor a restart exception:\n%s", log)
	}
	// the held job can still be released and run
	inst2.MustRun(t, "job", "urgency", held, "default")
	inst2.MustRun(t, "job", "wait-event", "-t", "10", held, "clean")
}
