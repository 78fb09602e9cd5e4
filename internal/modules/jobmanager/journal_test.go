package jobmanager

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestJournalBuildsOnlyWantedEvents: an event no subscriber takes is not
// queued (no entry for its job), one that some subscriber takes is queued
// in the forms wanted, and the choice follows subscriptions coming and
// going.
func TestJournalBuildsOnlyWantedEvents(t *testing.T) {
	jl := newJournal(nil)
	j := &job{}
	j.ID = jobid.ID(42)
	subscribe := func(route string, attached bool, f *eventFilter) journalKey {
		key := journalKey{route: route}
		jl.subs[key] = &journalSub{attached: attached, filter: f}
		jl.want = [2]wantSet{}
		if attached {
			jl.nAttached++
		} else {
			jl.nPayload++
		}
		return key
	}
	post := func(name string) {
		jl.add(j, 1.0, name, []byte(`{}`), []byte(`{"name":"`+name+`"}`))
	}
	cleanOnly := subscribe("tool", false, &eventFilter{allow: map[string]bool{"clean": true}})
	post("submit")
	post("depend")
	if len(jl.pending) != 0 {
		t.Fatalf("events no subscriber takes were queued: %+v", jl.pending)
	}
	post("clean")
	if len(jl.pending) != 1 || len(jl.pending[0].events) != 1 || jl.pending[0].evs != nil {
		t.Fatalf("clean for a payload subscriber: %+v", jl.pending)
	}
	jl.take()

	subscribe("job-list", true, nil) // every event, attached
	post("depend")
	if len(jl.pending) != 1 || len(jl.pending[0].evs) != 1 || jl.pending[0].events != nil {
		t.Fatalf("depend with an attached subscriber of every event: %+v", jl.pending)
	}
	jl.take()

	jl.drop(cleanOnly)
	post("clean")
	if len(jl.pending) != 1 || jl.pending[0].events != nil || len(jl.pending[0].evs) != 1 {
		t.Fatalf("clean after the payload subscriber left: %+v", jl.pending)
	}
	jl.take()

	subscribe("deny", false, &eventFilter{deny: map[string]bool{"depend": true}})
	post("depend")
	post("alloc")
	if p := jl.pending; len(p) != 1 || len(p[0].evs) != 2 || len(p[0].events) != 1 || p[0].names[0] != "alloc" {
		t.Fatalf("a deny filter: %+v", p)
	}
}
