package builtin

import (
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
)

// TestPriorityFromUrgency: hold gives the minimum priority, expedite the
// maximum, any other urgency itself; the priority is always available.
func TestPriorityFromUrgency(t *testing.T) {
	for urgency, want := range map[int]int64{
		jobtap.UrgencyHold:     jobtap.PriorityMin,
		1:                      1,
		jobtap.UrgencyDefault:  16,
		30:                     30,
		jobtap.UrgencyExpedite: 4294967295,
	} {
		got, ok := (&PriorityDefault{}).Priority(&jobtap.Job{Urgency: urgency, Priority: -1})
		if got != want || !ok {
			t.Errorf("urgency %d: priority %d (%v), want %d", urgency, got, ok, want)
		}
	}
}

// TestRegistry: every default plugin exists, and a hidden plugin is
// found by its bare name.
func TestRegistry(t *testing.T) {
	for _, name := range Defaults() {
		f, ok := Lookup(name)
		if !ok || f().Name() != name {
			t.Errorf("default %s: found %v", name, ok)
		}
	}
	for name, want := range map[string]string{"dependency-after": ".dependency-after", "perilog": "perilog", "alloc-bypass": "alloc-bypass"} {
		if f, ok := Lookup(name); !ok || f().Name() != want {
			t.Errorf("Lookup(%q): %v", name, ok)
		}
	}
	if _, ok := Lookup("no-such-plugin"); ok {
		t.Error("Lookup found no-such-plugin")
	}
}
