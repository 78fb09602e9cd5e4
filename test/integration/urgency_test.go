package integration

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// whole is the option set of a job that needs every node of the
// instance, so that such jobs run one at a time.
var whole = []string{"-N4", "--exclusive"}

func TestUrgency(t *testing.T) {
	e := start(t)

	t.Run("hold and release", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit("--urgency=hold", testDuration("0.01s"), "true")
		e.waitEvent(id, "priority")
		// a held job is pending in SCHED with priority 0 (flux-job(1))
		if got := e.field(id, "{state_single} {urgency} {priority} {status}"); got != "S 0 0 SCHED" {
			t.Fatalf("held job: %q, want \"S 0 0 SCHED\"", got)
		}
		if _, ran := find(e.events(id), "alloc"); ran {
			t.Fatal("held job was allocated")
		}
		e.must("job", "urgency", id.String(), "default")
		if r := e.result(id); r != "COMPLETED" {
			t.Fatalf("released job: %s", r)
		}
		ev, ok := find(e.events(id), "urgency")
		if !ok || ctxOf(t, ev)["urgency"] != 16.0 {
			t.Fatalf("urgency event %+v", ev)
		}
	})

	t.Run("keywords", func(t *testing.T) {
		e := e.sub(t)
		id := e.submit("--urgency=hold", "true")
		e.must("job", "urgency", id.String(), "expedite")
		e.waitEvent(id, "urgency")
		// expedite runs it at once, with the highest priority
		if r := e.result(id); r == "" {
			t.Fatal("no result")
		}
		if p := e.field(id, "{urgency} {priority}"); p != "31 4294967295" {
			t.Fatalf("expedited job: %q", p)
		}
		e.fail("", "job", "urgency", id.String(), "40")
	})

	t.Run("expedite jumps the queue", func(t *testing.T) {
		e := e.sub(t)
		blocker := e.submit(append(whole, testDuration("60s"), "true")...)
		e.waitEvent(blocker, "start")
		a := e.submit(append(whole, testDuration("0.05s"), "true")...)
		b := e.submit(append(whole, testDuration("0.05s"), "true")...)
		c := e.submit(append(whole, "--urgency=expedite", testDuration("0.05s"), "true")...)
		d := e.submit(append(whole, testDuration("0.05s"), "true")...)
		e.must("job", "urgency", d.String(), "31")
		if p := e.field(c, "{state} {priority}"); p != "SCHED 4294967295" {
			t.Errorf("expedited job while the queue is blocked: %q", p)
		}
		e.must("cancel", blocker.String())
		for _, id := range []jobid.ID{a, b, c, d} {
			if r := e.result(id); r != "COMPLETED" {
				t.Fatalf("job %s: %s", id, r)
			}
		}
		// both expedited jobs run before the two submitted earlier, the
		// first expedited first (same priority: submit order)
		ranBefore(t, e, c, d)
		ranBefore(t, e, d, a)
		ranBefore(t, e, a, b)
	})
}
