package integration

import (
	"strings"
	"testing"
)

// TestRealloc (RFC 51): a running job grows by whole nodes and by cores,
// shrinks, and what it gave back runs another job; its R, eventlog and
// flux jobs follow, and impossible requests are denied with a reason.
func TestRealloc(t *testing.T) {
	e := start(t)
	id := e.submit("-N1", "-x", testDuration("120s"), "true")
	e.waitEvent(id, "start")
	e.must("job", "realloc", id.String(), "--add-nodes=2")
	if got := e.field(id, "{nnodes} {ranks}"); got != "3 [0-2]" {
		t.Errorf("after adding 2 nodes: %q", got)
	}
	R := e.must("job", "info", id.String(), "R")
	if !strings.Contains(R, `"rank":"0-2"`) {
		t.Errorf("R after growing: %s", R)
	}
	// the job gives back its last node; another job can use it
	e.must("job", "realloc", id.String(), "--remove-nodes=1")
	if got := e.field(id, "{nnodes} {ranks}"); got != "2 [0-1]" {
		t.Errorf("after giving back a node: %q", got)
	}
	other := e.submit("-N2", "-x", testDuration("0.1s"), "true")
	e.waitEvent(other, "clean")
	if got := e.field(other, "{ranks}"); got != "[2-3]" {
		t.Errorf("the next job ran on %s, want [2-3]", got)
	}
	log := e.must("job", "eventlog", id.String())
	if strings.Count(log, "resource-update") != 2 || !strings.Contains(log, "R_delta_add=") ||
		!strings.Contains(log, "R_delta_sub=") || !strings.Contains(log, `release ranks="2" final=false`) {
		t.Errorf("eventlog:\n%s", log)
	}
	// nothing free for 3 more whole nodes; too many to give back
	e.fail("denied: no free resources", "job", "realloc", id.String(), "--add-nodes=3")
	e.fail("cannot give back 2", "job", "realloc", id.String(), "--remove-nodes=2")
	e.fail("nothing to do", "job", "realloc", id.String())
	pending := e.submit("--urgency=hold", "true")
	e.fail("only running jobs", "job", "realloc", pending.String(), "--add-cores=1")
	if canRunAsGuest(e) {
		if r := e.asGuest("job", "realloc", id.String(), "--add-cores=1"); r.Code == 0 {
			t.Errorf("a guest grew another user's job: %+v", r)
		}
	}
	// when the job ends, everything it holds is free again
	e.must("cancel", id.String(), pending.String())
	e.waitEvent(id, "clean")
	if got := e.must("resource", "list", "-s", "allocated", "-n", "-o", "{nnodes}"); got != "0" {
		t.Errorf("%s nodes still allocated after the job ended", got)
	}
}
