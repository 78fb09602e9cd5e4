package builtin

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// A held job's dependency names the limit that holds it now: raising
// max-running-jobs while max-cores still holds the job changes its
// max-running-jobs-user-limit to max-resources-user-limit (issue 25 QA).
func TestAccountLimitsHeldReason(t *testing.T) {
	h := newTestHost(t)
	a := newAccountLimits()
	a.Load(h, nil)
	set := func(conf string) {
		t.Helper()
		apply, err := a.ConfigUpdate([]byte(conf))
		if err != nil {
			t.Fatal(err)
		}
		apply()
	}
	set(`{"accounting":{"max-running-jobs":1,"max-cores":1}}`)
	for id := jobid.ID(1); id <= 2; id++ {
		j := limitJob(t, 1, 0, 0, "")
		j.ID = id
		j = h.addJob(j)
		a.JobNew(j)
		if err := a.JobDepend(j); err != nil {
			t.Fatal(err)
		}
	}
	deps := func() map[string]bool { return h.deps[2] }
	if d := deps(); len(d) != 1 || !d[depRunning] {
		t.Fatalf("the second job's dependencies: %v, want %s", d, depRunning)
	}
	set(`{"accounting":{"max-running-jobs":2,"max-cores":1}}`)
	if d := deps(); len(d) != 1 || !d[depResources] {
		t.Errorf("after max-running-jobs=2: %v, want only %s", d, depResources)
	}
	// the same reason again changes nothing; room for it releases it
	set(`{"accounting":{"max-running-jobs":3,"max-cores":1}}`)
	if d := deps(); len(d) != 1 || !d[depResources] {
		t.Errorf("after max-running-jobs=3: %v, want only %s", d, depResources)
	}
	set(`{"accounting":{"max-running-jobs":3,"max-cores":2}}`)
	if d := deps(); len(d) != 0 {
		t.Errorf("after max-cores=2: %v, want none", d)
	}
}
