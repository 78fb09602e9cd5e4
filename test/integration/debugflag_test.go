package integration

import (
	"slices"
	"strings"
	"testing"
)

// TestDebugFlag: a job submitted with --flags debug gets flux-core's
// test-hook events: debug.alloc-request once its alloc request is sent,
// debug.start-request once its start request is; a job without the flag
// gets neither.
func TestDebugFlag(t *testing.T) {
	e := start(t)
	id := e.submit("--flags", "debug", "true")
	e.waitEvent(id, "clean")
	names := e.eventNames(id)
	want := []string{"priority", "debug.alloc-request", "alloc", "debug.start-request", "start"}
	at := slices.Index(names, "priority")
	if at < 0 || len(names) < at+len(want) || !slices.Equal(names[at:at+len(want)], want) {
		t.Errorf("events %v, want %v in order", names, want)
	}
	plain := e.submit("true")
	e.waitEvent(plain, "clean")
	if ev := strings.Join(e.eventNames(plain), " "); strings.Contains(ev, "debug.") {
		t.Errorf("a job without the flag: %s", ev)
	}
}
