package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestartKeepsHistoryAndJobs: FLUX_DISABLE_JOB_CLEANUP (flux-core's)
// leaves a running job running when the initial program ends; after the
// restart from the statedir it is still running and flux job last finds
// it and the ended jobs before it.
func TestRestartKeepsHistoryAndJobs(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	t.Setenv("FLUX_DISABLE_JOB_CLEANUP", "t")
	out, code := fluxStart(t, dir, "-s1", "-Sstatedir="+state,
		`flux submit --wait-event=clean true >/dev/null && flux submit --wait-event=start sleep 300`)
	if code != 0 {
		t.Fatalf("first start: exit %d: %s", code, out)
	}
	running := strings.TrimSpace(out)
	out, code = fluxStart(t, dir, "-s1", "-Sstatedir="+state,
		`flux job last 2 | tr '\n' ' '; echo; flux jobs -no {state} $(flux job last); flux cancel $(flux job last)`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], running+" ") || len(strings.Fields(lines[0])) != 2 || lines[1] != "RUN" {
		t.Errorf("restart: exit %d, %q (want %s first in history, RUN)", code, out, running)
	}
}
