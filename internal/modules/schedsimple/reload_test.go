package schedsimple

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// TestReloadedKeys: a reload takes preempt-mode, max-requeue and
// alloc-mode from the new table, and refuses a change to any other
// [sched-simple] key, naming it, its values and flux module reload
// sched-simple; module arguments still win over the table.
func TestReloadedKeys(t *testing.T) {
	src := configSources{attrs: map[string]string{}}
	cur, err := src.build(nil)
	if err != nil {
		t.Fatal(err)
	}
	table := func(kv map[string]any) map[string]any { return map[string]any{Name: kv} }
	built, err := src.build(table(map[string]any{"preempt-mode": "requeue", "max-requeue": 2.0, "alloc-mode": "best-fit"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cur.reloaded(built)
	if err != nil {
		t.Fatalf("live keys refused: %v", err)
	}
	if got.PreemptMode != wire.PreemptRequeue || got.MaxRequeue != 2 || got.Fit != sched.BestFit {
		t.Fatalf("after the reload: preempt-mode=%s max-requeue=%d alloc-mode=%s", got.PreemptMode, got.MaxRequeue, got.Fit)
	}
	// and back: keys removed from the table go back to their defaults
	back, err := got.reloaded(cur)
	if err != nil || back.PreemptMode != wire.PreemptCancel || back.MaxRequeue != DefaultMaxRequeue || back.Fit != sched.WorstFit {
		t.Fatalf("reloaded without the keys: %+v, %v", back, err)
	}
	for key, v := range map[string]any{
		"queue-depth":       16.0,
		"queue-policy":      "easy",
		"reservation-depth": 3.0,
		"gpu-share":         2.0,
		"nic-prefer":        false,
	} {
		built, err := src.build(table(map[string]any{key: v, "preempt-mode": "requeue"}))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got, err := cur.reloaded(built)
		if err == nil {
			t.Errorf("%s = %v: the reload was taken", key, v)
			continue
		}
		for _, want := range []string{"[sched-simple] " + key + " (", "flux module reload sched-simple " + key + "="} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s = %v: %q does not say %q", key, v, err, want)
			}
		}
		if got.PreemptMode != cur.PreemptMode {
			t.Errorf("%s = %v: refused, yet preempt-mode became %s", key, v, got.PreemptMode)
		}
	}
	// two keys at once: both named
	built, _ = src.build(table(map[string]any{"queue-depth": 4.0, "gpu-share": 3.0}))
	if _, err := cur.reloaded(built); err == nil || !strings.Contains(err.Error(), "queue-depth (4, now 8)") || !strings.Contains(err.Error(), "gpu-share (3, now 1)") {
		t.Errorf("two keys changed: %v", err)
	}
	// the same values as now, or the key set by an argument (which a
	// reload keeps), change nothing and are taken
	same, _ := src.build(table(map[string]any{"queue-depth": 8.0, "queue-policy": "fcfs"}))
	if _, err := cur.reloaded(same); err != nil {
		t.Errorf("unchanged values refused: %v", err)
	}
	withArgs := configSources{attrs: map[string]string{}, args: []string{"queue-depth=4", "preempt-mode=cancel"}}
	cur2, _ := withArgs.build(nil)
	built, err = withArgs.build(table(map[string]any{"queue-depth": 16.0, "preempt-mode": "requeue"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cur2.reloaded(built); err != nil || got.QueueDepth != 4 || got.PreemptMode != wire.PreemptCancel {
		t.Errorf("keys set by module arguments: %+v, %v", got, err)
	}
	// attributes count as at load
	attrs := configSources{attrs: map[string]string{"queue-depth": "2"}}
	cur3, _ := attrs.build(nil)
	built, _ = attrs.build(table(map[string]any{"max-requeue": 1.0}))
	if got, err := cur3.reloaded(built); err != nil || got.QueueDepth != 2 || got.MaxRequeue != 1 {
		t.Errorf("queue-depth from an attribute: %+v, %v", got, err)
	}
	// a bad value is refused by build, as at load
	if _, err := src.build(table(map[string]any{"preempt-mode": "suspend"})); err == nil || !strings.Contains(err.Error(), "[sched-simple] preempt-mode") {
		t.Errorf("a bad preempt-mode: %v", err)
	}
}

// TestReloadPreemptMode: sched-simple's config-reload (what flux config
// reload sends each module) applies preempt-mode and max-requeue to the
// next preemption; a reload changing queue-depth is refused and changes
// nothing, preempt-mode included.
func TestReloadPreemptMode(t *testing.T) {
	h, jm := startPreemptSchedArgs(t)
	ctx := brokertest.Ctx(t)
	reload := func(table map[string]any) error {
		return h.Call(ctx, Name+".config-reload", flux.NodeidAny, map[string]any{Name: table}, nil)
	}
	preempt := func(victimID, urgentID uint64) wire.PreemptRequest {
		t.Helper()
		victim := nextAlloc(t, ctx, allocReq(t, h, map[string]any{"id": victimID, "priority": 16, "userid": 0, "t_submit": float64(victimID), "jobspec": preemptSpec(2, true)}))
		if victim.Type != 0 {
			t.Fatalf("the preemptible job: %+v", victim)
		}
		urgent := allocReq(t, h, map[string]any{"id": urgentID, "priority": 16, "userid": 0, "t_submit": float64(urgentID), "jobspec": preemptSpec(2, false)})
		var req wire.PreemptRequest
		select {
		case req = <-jm.preempts:
		case <-time.After(30 * time.Second): // hang guard
			t.Fatal("no job-manager.preempt")
		}
		// the job manager ends the run; the urgent job starts and ends
		if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": victimID, "final": true, "R": victim.R}, nil); err != nil {
			t.Fatal(err)
		}
		u := nextAlloc(t, ctx, urgent)
		if u.Type != 0 {
			t.Fatalf("the urgent job: %+v", u)
		}
		if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": urgentID, "final": true, "R": u.R}, nil); err != nil {
			t.Fatal(err)
		}
		return req
	}
	if req := preempt(1, 2); req.Mode != wire.PreemptCancel || req.MaxRequeue != DefaultMaxRequeue {
		t.Fatalf("before the reload: %+v", req)
	}
	if err := reload(map[string]any{"preempt-mode": "requeue", "max-requeue": 2}); err != nil {
		t.Fatal(err)
	}
	if req := preempt(3, 4); req.Mode != wire.PreemptRequeue || req.MaxRequeue != 2 {
		t.Fatalf("after the reload: %+v", req)
	}
	err := reload(map[string]any{"preempt-mode": "cancel", "queue-depth": 1})
	if err == nil || flux.ErrnoOf(err) != syscall.EINVAL || !strings.Contains(err.Error(), "queue-depth (1, now 8)") ||
		!strings.Contains(err.Error(), "flux module reload sched-simple queue-depth=1") {
		t.Fatalf("a reload changing queue-depth: %v", err)
	}
	if req := preempt(5, 6); req.Mode != wire.PreemptRequeue || req.MaxRequeue != 2 {
		t.Fatalf("after the refused reload: %+v", req)
	}
	// what a reload sends is the whole configuration: no [sched-simple]
	// table is the defaults again
	if err := h.Call(ctx, Name+".config-reload", flux.NodeidAny, json.RawMessage(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if req := preempt(7, 8); req.Mode != wire.PreemptCancel || req.MaxRequeue != DefaultMaxRequeue {
		t.Fatalf("after a reload without the table: %+v", req)
	}
}
