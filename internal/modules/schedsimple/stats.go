package schedsimple

import (
	"sync/atomic"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// passStats count the scheduler's passes and the time they took, for
// sched-simple.stats (flux web's /metrics).
type passStats struct {
	passes  atomic.Uint64
	totalNs atomic.Int64
	lastNs  atomic.Int64
}

// record counts a pass that began at start.
func (p *passStats) record(start time.Time) {
	d := time.Since(start).Nanoseconds()
	p.passes.Add(1)
	p.totalNs.Add(d)
	p.lastNs.Store(d)
}

// Stats is the answer to sched-simple.stats: passes made, their total
// and the last one's duration in seconds, and the jobs waiting.
type Stats struct {
	Passes      uint64  `json:"passes"`
	PassSeconds float64 `json:"pass_seconds"`
	LastPass    float64 `json:"last_pass_seconds"`
	Pending     int     `json:"pending"`
}

func (s *scheduler) stats(r *flux.Request) {
	r.Respond(Stats{
		Passes:      s.passStats.passes.Load(),
		PassSeconds: float64(s.passStats.totalNs.Load()) / 1e9,
		LastPass:    float64(s.passStats.lastNs.Load()) / 1e9,
		Pending:     s.queue.Len(),
	})
}
