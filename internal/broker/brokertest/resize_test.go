package brokertest_test

import (
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
)

// TestJoinAndShrink grows an in-process instance by brokers and shrinks
// it again, seen as a module sees it: the overlay.resize event and the
// size attribute.
func TestJoinAndShrink(t *testing.T) {
	inst := brokertest.Start(t, brokertest.Options{Size: 2})
	ctx := brokertest.Ctx(t)
	h1 := inst.Handle(1)
	sub, err := h1.Subscribe(ctx, "overlay.resize")
	if err != nil {
		t.Fatal(err)
	}
	inst.Join(2, 3)
	var ev struct {
		Size     int    `json:"size"`
		Hostlist string `json:"hostlist"`
		Shrink   bool   `json:"shrink"`
	}
	m, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.UnmarshalPayload(&ev); err != nil || ev.Size != 3 || ev.Shrink || ev.Hostlist == "" {
		t.Fatalf("overlay.resize after rank 2 joined: %+v, %v", ev, err)
	}
	var resp struct {
		Value string `json:"value"`
	}
	if err := h1.Call(ctx, "attr.get", 2, map[string]string{"name": "size"}, &resp); err != nil || resp.Value != "3" {
		t.Fatalf("rank 1 -> 2: size %q, %v", resp.Value, err)
	}

	if err := inst.Handle(0).Call(ctx, "overlay.shrink", 0, map[string]int{"size": 2}, nil); err != nil {
		t.Fatal(err)
	}
	if code, ok := inst.Exited(2); !ok || code != 0 {
		t.Fatalf("rank 2 after overlay.shrink: exited %v, code %d", ok, code)
	}
	if m, err = sub.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.UnmarshalPayload(&ev); err != nil || ev.Size != 2 || !ev.Shrink {
		t.Fatalf("overlay.resize after the shrink: %+v, %v", ev, err)
	}
	if err := h1.Call(ctx, "attr.get", 1, map[string]string{"name": "size"}, &resp); err != nil || resp.Value != "2" {
		t.Fatalf("rank 1 size after the shrink: %q, %v", resp.Value, err)
	}
}
