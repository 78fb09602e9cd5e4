package policy

import (
	"strings"
	"testing"
)

// TestQueuePreemptMode: queues.NAME.preempt-mode is read per queue (""
// when not set) and anything but "cancel" or "requeue" is refused
// naming the key and the value.
func TestQueuePreemptMode(t *testing.T) {
	c, err := Parse([]byte(`{"queues": {"standby": {"preemptible": true, "preempt-mode": "requeue"}, "scavenger": {"preemptible": true, "preempt-mode": "cancel"}, "batch": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"standby": "requeue", "scavenger": "cancel", "batch": "", "nosuch": ""} {
		if got := c.PreemptMode(q); got != want {
			t.Errorf("queue %s: preempt-mode %q, want %q", q, got, want)
		}
	}
	for _, bad := range []string{`"suspend"`, `""`, `1`, `true`, `["requeue"]`} {
		_, err := Parse([]byte(`{"queues": {"standby": {"preempt-mode": ` + bad + `}}}`))
		want := `queues.standby.preempt-mode must be "cancel" or "requeue", not ` + bad
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preempt-mode %s: %v, want %q", bad, err, want)
		}
	}
}
