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

// TestRestartKeepsJobspecUpdates: the KVS keeps a job's jobspec as
// submitted and the eventlog its updates, so a pending job updated
// before a restart is scheduled with its updated jobspec after it.
func TestRestartKeepsJobspecUpdates(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	out, code := fluxStart(t, dir, "-s1", "-Sstatedir="+state,
		`id=$(flux submit --urgency=hold -t 1m --job-name=before true) && flux update $id duration=2m name=after >/dev/null && echo $id`)
	if code != 0 {
		t.Fatalf("first start: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	out, code = fluxStart(t, dir, "-s1", "-Sstatedir="+state,
		`flux job urgency `+id+` default && flux job wait-event `+id+` clean >/dev/null && flux jobs -no "{name} {duration}" `+id+` && flux job info --base `+id+` jobspec | jq -c .attributes.system.duration && flux job info `+id+` R | jq -c ".execution.expiration - .execution.starttime | round"`)
	if code != 0 || strings.TrimSpace(out) != "after 120.0\n60\n120" {
		t.Errorf("after the restart: exit %d, %q (want the updated name and duration, the submitted jobspec kept)", code, out)
	}
}
