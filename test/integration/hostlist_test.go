package integration

import (
	"strings"
	"testing"
)

// TestHostlistInstanceSources: flux hostlist reads the instance, avail,
// local and job ID sources from the enclosing instance
// (flux-hostlist(1) SOURCES).
func TestHostlistInstanceSources(t *testing.T) {
	e := start(t)
	attr := e.must("getattr", "hostlist")
	if got := e.must("hostlist", "instance"); got != attr {
		t.Errorf("instance: %q, want the hostlist attribute %q", got, attr)
	}
	// not in a job: local is the instance
	if got := e.must("hostlist", "-l"); got != attr {
		t.Errorf("-l: %q, want %q", got, attr)
	}
	if got := e.must("hostlist", "-c", "avail"); got != "4" {
		t.Errorf("avail count %q, want 4", got)
	}
	e.must("resource", "drain", "1", "testing")
	if got := e.must("hostlist", "-c", "avail"); got != "3" {
		t.Errorf("avail count after draining rank 1: %q, want 3", got)
	}
	e.must("resource", "undrain", "1")

	id := e.submit("-N2", "true")
	e.waitEvent(id, "clean")
	nodelist := e.field(id, "{nodelist}")
	for _, arg := range []string{id.String(), e.must("job", "id", "--to=dec", id.String())} {
		if got := e.must("hostlist", arg); got != nodelist {
			t.Errorf("hostlist %s: %q, want the job's nodelist %q", arg, got, nodelist)
		}
	}
	if got := e.must("hostlist", "-c", id.String(), id.String()); got != "4" {
		t.Errorf("two jobs of 2 nodes: count %q", got)
	}
	// in a job, local is the job's hosts (FLUX_JOB_ID)
	if got := e.must("run", "-N2", "flux", "hostlist", "-c", "local"); got != "2\n2" {
		t.Errorf("local in a 2-node job: count %q, want 2", got)
	}

	// a job ID that names no job, e.g. a hostname like foo1
	e.fail("flux-hostlist: ERROR: job foo1 not found", "hostlist", "foo1")
	if got := e.must("hostlist", "--fallback", "foo1", "foo2"); got != "foo[1-2]" {
		t.Errorf("--fallback: %q", got)
	}
	r := e.fail("ƒnosuch0", "hostlist", "ƒnosuch0")
	if strings.Contains(r.Stderr, "Æ") {
		t.Errorf("garbled message: %q", r.Stderr)
	}
}
