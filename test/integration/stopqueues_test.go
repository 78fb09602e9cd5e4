package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStopQueuesOnRestart: [job-manager] stop-queues-on-restart = true
// leaves the queues stopped when the instance restarts from its
// statedir (not on its first start); a value that is not a boolean is
// refused with flux-core's "error updating job-manager".
func TestStopQueuesOnRestart(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "jm.toml")
	os.WriteFile(conf, []byte("[job-manager]\nstop-queues-on-restart = true\n"), 0o644)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	out, code := fluxStart(t, dir, "-s1", "-c", conf, "-Sstatedir="+state, "flux queue status")
	if code != 0 || !strings.Contains(out, "Scheduling is started") {
		t.Errorf("first start: exit %d, %q", code, out)
	}
	out, code = fluxStart(t, dir, "-s1", "-c", conf, "-Sstatedir="+state, "flux queue status")
	if code != 0 || !strings.Contains(out, "Scheduling is stopped: Automatically stopped due to restart") {
		t.Errorf("restart: exit %d, %q", code, out)
	}
	out, code = fluxStart(t, dir, "-s1", `printf '[job-manager]\nstop-queues-on-restart = "notabool"\n' | flux config load`)
	if code == 0 || !strings.Contains(out, "error updating job-manager") || !strings.Contains(out, "stop-queues-on-restart") {
		t.Errorf("bad value: exit %d, %q", code, out)
	}
}
