package integration

import (
	"strings"
	"testing"
)

// TestJobTmpdirFresh: a job shell reuses the empty FLUX_JOB_TMPDIR of
// its last job for the next (a rename instead of rmdir and mkdir), so
// each job must still get a private, empty directory: what a job left
// there, or a mode it set, never reaches the next one.
func TestJobTmpdirFresh(t *testing.T) {
	e := start(t)
	probe := `ls -A "$FLUX_JOB_TMPDIR"; stat -c %a "$FLUX_JOB_TMPDIR"`
	for i, mess := range []string{
		`chmod 755 "$FLUX_JOB_TMPDIR"`,  // left empty, wrong mode
		`touch "$FLUX_JOB_TMPDIR/left"`, // left a file
		`true`,                          // left as it came
		`mkdir "$FLUX_JOB_TMPDIR/sub"`,  // left a directory
		`chmod 1700 "$FLUX_JOB_TMPDIR"`, // sticky
	} {
		if got := strings.TrimSpace(e.must("run", "sh", "-c", probe+"; "+mess)); got != "700" {
			t.Fatalf("job %d: FLUX_JOB_TMPDIR holds or has %q, want empty and mode 700", i, got)
		}
	}
	if got := strings.TrimSpace(e.must("run", "sh", "-c", probe)); got != "700" {
		t.Fatalf("last job: FLUX_JOB_TMPDIR holds or has %q, want empty and mode 700", got)
	}
	dir := e.must("run", "sh", "-c", `echo "$FLUX_JOB_TMPDIR"`)
	if !strings.Contains(dir, "/jobtmp-0-") {
		t.Fatalf("FLUX_JOB_TMPDIR %q", dir)
	}
}
