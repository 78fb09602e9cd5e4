package heartbeat

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
)

func TestPulses(t *testing.T) {
	reg := module.NewRegistry()
	reg.Register(Name, New)
	inst := brokertest.Start(t, brokertest.Options{Size: 2, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: Name, Ranks: "0"}},
		Attrs:   map[string]string{"heartbeat.period": "50ms"}})
	h := inst.Handle(1)
	ctx := brokertest.Ctx(t)
	sub, err := h.Subscribe(ctx, "heartbeat.pulse")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 3; i++ {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "heartbeat.pulse" {
			t.Fatalf("topic %q", m.Topic)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("3 pulses took %v", d)
	}
}
