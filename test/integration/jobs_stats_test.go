package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestJobsStatsPerQueue: flux jobs --stats with --queue counts only that
// queue's jobs (flux-jobs(1)); -a is ignored beside --filter.
func TestJobsStatsPerQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(policyConf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", dir}})}
	held := e.submit("--queue=debug", "--urgency=hold", "true")
	run := e.submit("--queue=batch", "sleep", "300")
	failed := e.submit("--queue=batch", "false")
	e.waitEvent(run, "start")
	e.waitEvent(failed, "clean")

	for _, c := range []struct{ args, want string }{
		{"", "1 running, 0 completed, 1 failed, 1 pending, 0 inactive purged"},
		{"--queue=debug", "0 running, 0 completed, 0 failed, 1 pending, 0 inactive purged"},
		{"--queue=batch", "1 running, 0 completed, 1 failed, 0 pending, 0 inactive purged"},
		{"--queue=batch,debug", "1 running, 0 completed, 1 failed, 1 pending, 0 inactive purged"},
	} {
		args := append([]string{"jobs", "--stats-only"}, strings.Fields(c.args)...)
		if got := e.flux(args...).Stdout; strings.TrimSpace(got) != c.want {
			t.Errorf("flux jobs --stats-only %s: %q, want %q", c.args, got, c.want)
		}
	}
	// with --filter, -a is ignored with a warning (flux-core's flux-jobs)
	r := e.flux("jobs", "-a", "-f", "failed", "-n", "-o", "{id}")
	if got := strings.TrimSpace(r.Stdout); got != failed.String() || !strings.Contains(r.Stderr, "Both -a and --filter specified, ignoring -a") {
		t.Errorf("flux jobs -a -f failed: %q, stderr %q; want %s and a warning", got, r.Stderr, failed)
	}
	if got := e.must("jobs", "-f", "failed", "-n", "-o", "{id}"); got != failed.String() {
		t.Errorf("flux jobs -f failed: %q, want %s", got, failed)
	}
	e.must("cancel", held.String(), run.String())
}
