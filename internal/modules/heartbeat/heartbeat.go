// Package heartbeat is the heartbeat broker module: on rank 0 it publishes
// a "heartbeat.pulse" event every period (broker attribute
// heartbeat.period, an FSD, default 2s), which modules and tools use as a
// cheap instance-wide clock.
package heartbeat

import (
	"context"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Name is the module name.
const Name = "heartbeat"

// DefaultPeriod is the pulse period without configuration.
const DefaultPeriod = 2 * time.Second

// Module is the heartbeat module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	period := DefaultPeriod
	if v, err := h.Attr(ctx, "heartbeat.period"); err == nil {
		d, err := fsd.ParseDuration(v)
		if err != nil || d <= 0 {
			flux.NewLogger(h, Name).Error("heartbeat.period: invalid Flux standard duration; using the default", "value", v, "default", DefaultPeriod)
		} else {
			period = d
		}
	}
	seq := 0
	h.HandleFunc("heartbeat.stats", func(r *flux.Request) {
		r.Respond(map[string]any{"period": period.Seconds(), "count": seq})
	})
	t := time.NewTicker(period)
	defer t.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.Post(func() {
					seq++
					h.Publish("heartbeat.pulse", map[string]int{"seq": seq}, false)
				})
			}
		}
	}()
	return h.Serve(ctx)
}
