package integration

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// snapshotListing is every job's listing, in id order, with the fields
// job-list builds from the eventlog, jobspec and R.
func (e *env) snapshotListing() []string {
	out := e.must("jobs", "-a", "-n", "-c", "0", "-o",
		"{id} {state} {result} {name} {queue} {ntasks} {ncores} {nnodes} {nodelist} {t_submit} {t_run} {t_inactive} {exception.type} {exception.note} {returncode} {dependencies} {annotations}")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	return lines
}

func startSnapshotted(t *testing.T, state string) *env {
	return &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{"statedir": state}})}
}

// TestJobListSnapshot checks that a restarted job-list takes the
// inactive jobs from its snapshot (STATEDIR/job-list.snapshot) and lists
// them exactly as before; that a job purged after the snapshot was
// written does not come back, a job that ended after it is read from the
// KVS, and a damaged snapshot is ignored (every job read from the KVS).
// The job manager's snapshot (job-manager.snapshot) likewise.
func TestJobListSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	state := t.TempDir()
	snap := filepath.Join(state, "job-list.snapshot")
	e := startSnapshotted(t, state)
	e.must("submit", "--quiet", "--cc=1-20", "--job-name=many", "true")
	e.must("submit", "--quiet", "-n1", "sh", "-c", "exit 3")
	dep := e.submit("--dependency=afterok:"+e.submit("--urgency=hold", "true").String(), "true")
	e.must("cancel", dep.String())
	e.flux("cancel", "--all")
	e.must("queue", "idle")
	before := e.snapshotListing()
	if len(before) != 23 {
		t.Fatalf("%d jobs before the restart, want 23:\n%s", len(before), strings.Join(before, "\n"))
	}
	if code := e.inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, e.inst.Stderr())
	}
	saved, err := os.ReadFile(snap)
	if err != nil {
		t.Fatalf("no snapshot after a clean stop: %v", err)
	}

	e = startSnapshotted(t, state)
	if got := e.snapshotListing(); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Fatalf("listing after the restart differs:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(got, "\n"))
	}
	e.waitFor("the job manager's background read", func() bool {
		return strings.Contains(e.must("dmesg"), "more jobs from the KVS while serving")
	})
	if log := e.must("dmesg"); !strings.Contains(log, "from_snapshot=23") || !strings.Contains(log, "restored 23 more jobs from the KVS while serving (23 from the snapshot)") {
		t.Errorf("the restart did not take the jobs from the snapshots:\n%s", log)
	}
	// purge 3 jobs, then crash with one more job ended: the snapshot on
	// disk is the old one (no clean stop to rewrite it)
	e.must("job", "purge", "--force", "--num-limit=20")
	late := e.submit("true")
	e.waitEvent(late, "clean")
	e.inst.Kill()
	if err := os.WriteFile(snap, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	e = startSnapshotted(t, state)
	got := e.snapshotListing()
	if len(got) != 21 || !strings.Contains(strings.Join(got, "\n"), late.String()) {
		t.Fatalf("after purging 3 and a crash: %d jobs listed (want 20 old + 1 late):\n%s", len(got), strings.Join(got, "\n"))
	}
	if log := e.must("dmesg"); !strings.Contains(log, "from_snapshot=20") {
		t.Errorf("want 20 jobs from the snapshot:\n%s", log)
	}
	// the job manager knows the same 21 (purge counts them); the late
	// job's end may have been after the KVS's last checkpoint, then it is
	// finished again after the crash
	e.waitEvent(late, "clean")
	if out := e.must("job", "purge", "--num-limit=0"); !strings.Contains(out, "21") {
		t.Errorf("job manager after the crash: %q, want 21 purgeable jobs\n%s", out, e.must("dmesg"))
	}
	if code := e.inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, e.inst.Stderr())
	}
	// a damaged snapshot: ignored, with a warning
	if err := os.WriteFile(snap, append([]byte("fluxgo job-list snapshot 1\n"), 0xff, 0xff, 1, 2, 3, 4), 0o600); err != nil {
		t.Fatal(err)
	}
	e = startSnapshotted(t, state)
	if again := e.snapshotListing(); len(again) != 21 {
		t.Fatalf("with a damaged snapshot: %d jobs, want 21", len(again))
	}
	if log := e.must("dmesg"); !strings.Contains(log, "ignoring the job-list snapshot") || !strings.Contains(log, "from_snapshot=0") {
		t.Errorf("a damaged snapshot was not reported and ignored:\n%s", log)
	}
}
