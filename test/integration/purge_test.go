package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPurge covers flux job purge (flux-job(1)): by number, by age, by
// id, the refusals, and that a purged job is gone from the KVS and from
// flux jobs.
func TestPurge(t *testing.T) {
	e := start(t)
	var ids []jobid.ID
	for i := 0; i < 10; i++ {
		id := e.submit(testDuration("0.001s"), "true")
		e.waitEvent(id, "clean")
		ids = append(ids, id)
	}
	// job-list drops purged jobs when the job-purge-inactive event
	// reaches it, a moment after flux job purge returns
	listed := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out := e.must("jobs", "-a", "-n", "-o", "{id}")
			n := 0
			if out != "" {
				n = len(strings.Split(out, "\n"))
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("flux jobs -a lists %d jobs, want %d", n, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	say := func(want string, args ...string) {
		t.Helper()
		if out := e.must(append([]string{"job", "purge"}, args...)...); out != want {
			t.Fatalf("flux job purge %s: %q, want %q", strings.Join(args, " "), out, want)
		}
	}
	say("use --force to purge 0 inactive jobs")
	say("purged 0 inactive jobs", "--force")
	e.fail("batch must be", "job", "purge", "--force", "--batch=10000")
	e.fail("num limit must be", "job", "purge", "--num-limit=-42")
	e.fail("invalid Flux standard duration", "job", "purge", "--age-limit=soon")
	say("use --force to purge 2 inactive jobs", "--num-limit=8")
	say("purged 2 inactive jobs", "--force", "--num-limit=8")
	say("purged 0 inactive jobs", "--force", "--num-limit=8")
	// the oldest went, from the KVS and from job-list
	e.fail("", "job", "eventlog", ids[0].String())
	e.fail("", "job", "eventlog", ids[1].String())
	e.must("job", "eventlog", ids[2].String())
	listed(8)
	say("purged 2 inactive jobs", "--force", "--num-limit=6", "--batch=1")
	say("purged 6 inactive jobs", "--force", "--age-limit=1ms")
	listed(0)

	// by id: only inactive jobs the instance knows
	done := e.submit(testDuration("0.001s"), "true")
	e.waitEvent(done, "clean")
	running := e.submit(testDuration("1h"), "true")
	e.waitEvent(running, "start")
	say("use --force to purge 1 inactive jobs", done.String())
	e.fail("cannot purge active job", "job", "purge", "--force", running.String())
	say("purged 1 inactive jobs", "--force", done.String())
	e.fail("id not found", "job", "purge", "--force", done.String())
	// a guest may not purge
	if r := e.asGuest("job", "purge", "--force", "--num-limit=0"); r.Code == 0 || !strings.Contains(r.Stderr, "instance owner") {
		t.Fatalf("guest flux job purge: %+v", r)
	}
	e.must("cancel", running.String())
	e.waitEvent(running, "clean")
}

// TestPurgeFromConfig: [job-manager] inactive-num-limit keeps that many
// inactive jobs; a bad limit keeps the instance from starting.
func TestPurgeFromConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	conf := "[job-manager]\ninactive-num-limit = 2\n"
	if err := os.WriteFile(filepath.Join(dir, "jm.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", dir}})}
	for i := 0; i < 5; i++ {
		e.waitEvent(e.submit(testDuration("0.001s"), "true"), "clean")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := e.must("jobs", "-a", "-n", "-o", "{id}")
		if n := len(strings.Split(out, "\n")); out != "" && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inactive jobs with inactive-num-limit=2:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "jm.toml"), []byte("[job-manager]\ninactive-num-limit = -42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.flux("start", "--config-path", bad, "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "must be >= 0") {
		t.Fatalf("flux start with inactive-num-limit = -42: %+v", r)
	}
}
