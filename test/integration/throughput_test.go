package integration

import (
	"strings"
	"testing"
	"time"
)

// TestTenThousandJobs is the done-when: 10,000 jobs submitted with
// --cc all reach INACTIVE with result COMPLETED.
func TestTenThousandJobs(t *testing.T) {
	const n = 10000
	e := start(t)
	t0 := time.Now()
	e.must("submit", "--cc=1-10000", "--quiet", testDuration("0.001s"), "true")
	submitted := time.Since(t0)
	deadline := time.Now().Add(150 * time.Second)
	for {
		// flux jobs lists active jobs by default: none left means done
		if e.must("jobs", "-n", "-c", "1", "-o", "{id}") == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still active after %v: %s", time.Since(t0), e.flux("jobs", "--stats-only").Stdout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	done := time.Since(t0)
	out := e.must("jobs", "-a", "-n", "-c", "0", "-o", "{id} {state} {result}")
	lines := strings.Split(out, "\n")
	if len(lines) != n {
		t.Fatalf("flux jobs -a lists %d jobs, want %d", len(lines), n)
	}
	seen := make(map[string]bool, n)
	bad := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] != "INACTIVE" || f[2] != "COMPLETED" {
			if bad++; bad <= 5 {
				t.Errorf("job line %q, want INACTIVE COMPLETED", l)
			}
			continue
		}
		if seen[f[0]] {
			t.Errorf("job %s listed twice", f[0])
		}
		seen[f[0]] = true
	}
	if bad > 0 {
		t.Fatalf("%d of %d jobs did not complete", bad, n)
	}
	// --stats-only exits non-zero when no job is active (flux-jobs(1))
	if r := e.flux("jobs", "--stats-only"); r.Code == 0 || !strings.Contains(r.Stdout, "10000 completed") {
		t.Errorf("flux jobs --stats-only: %+v", r)
	}
	t.Logf("%d jobs: submitted in %v, all inactive after %v (%.0f jobs/s)", n, submitted, done, n/done.Seconds())
}
