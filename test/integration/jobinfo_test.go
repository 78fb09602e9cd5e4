package integration

import (
	"strings"
	"testing"
)

// TestJobInfoAsFluxCore: flux job info lists the useful keys when called
// without ID and KEY, names a missing job or key in flux-core's words,
// and keeps the submitted jobspec (--base) beside the updated one.
func TestJobInfoAsFluxCore(t *testing.T) {
	e := start(t)
	r := e.flux("job", "info")
	if r.Code != 1 || !strings.Contains(r.Stderr, "Usage: flux job info id key") || !strings.Contains(r.Stderr, "guest.exec.eventlog  - execution eventlog") {
		t.Errorf("flux job info without arguments: %+v", r)
	}
	e.fail("invalid job id", "job", "info", "fuzzybunny", "R")
	id := e.submit("--urgency=hold", "-t", "1m", "true")
	e.fail("badkey: key not found", "job", "info", id.String(), "badkey")
	e.must("update", id.String(), "duration=2m")
	base := e.must("job", "info", "--base", id.String(), "jobspec")
	cur := e.must("job", "info", id.String(), "jobspec")
	if !strings.Contains(base, `"duration":60`) || !strings.Contains(cur, `"duration":120`) {
		t.Errorf("jobspec after duration=2m: base %s\ncurrent %s", base, cur)
	}
	e.must("cancel", id.String())

	// -F follows the log to the job's end, -p a guest log to its end
	id = e.submit("sleep", "0.2")
	if got := e.must("job", "eventlog", "-F", id.String()); !strings.HasSuffix(got, " clean") {
		t.Errorf("eventlog -F ended with %q", got)
	}
	if got := e.must("job", "eventlog", "-F", "-p", "exec", id.String()); !strings.HasSuffix(got, " done") {
		t.Errorf("eventlog -F -p exec ended with %q", got)
	}
	e.fail("eventlog path nosuch not found", "job", "eventlog", "-F", "-p", "nosuch", id.String())
}
