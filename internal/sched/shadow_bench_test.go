package sched

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkEasySearch is BenchmarkNUMAEasy's 4-domain case (16,384
// nodes × 64 cores, 4 GPUs, 1,000 jobs pending, EASY of depth 32; one
// iteration frees the oldest running job, runs a pass and tops the
// queue up) with the reservation search before shadow.go ("old"), this
// build's with Running swept each pass ("new", what BenchmarkNUMAEasy
// and the scheduler module use), and this build's told of starts and
// ends ("tracked"), so the figures come from one run (use -count 2 or
// more to alternate them). The figure depends on the number
// of passes: the machine is filled with jobs whose expirations pass
// while they keep running, so later passes have more of them to release.
func BenchmarkEasySearch(b *testing.B) {
	for _, tc := range []struct {
		name string
		kind searchKind
	}{{"old", oldSearch}, {"new", sweepSearch}, {"tracked", trackedSearch}} {
		b.Run(tc.name, func(b *testing.B) {
			p, _ := numaPool(b, 16384, "0-63", "0-3", numa4)
			rng := rand.New(rand.NewPCG(1, 2))
			var running []*Alloc
			for i := 0; p.nFreeGPUs > 4096; i++ {
				a, err := p.Allocate(numaWorkload(rng, 0).Req, 0)
				if err != nil {
					break
				}
				a.Expiration = 100 + float64(i%1000)
				running = append(running, a)
			}
			q := NewQueue()
			id := uint64(1)
			for q.Len() < 1000 {
				q.Add(numaWorkload(rng, id))
				id++
			}
			pol := NewBackfill("easy", 32, 0)
			switch tc.kind {
			case oldSearch:
				legacy(pol)
			case trackedSearch:
				for _, a := range running {
					pol.Started(a)
				}
			}
			tracked := tc.kind == trackedSearch
			pol.Running = func() []*Alloc { return running }
			decisions := 0
			start := time.Now()
			now := 1.0
			for b.Loop() {
				if len(running) > 0 {
					p.Free(running[0])
					if tracked {
						pol.Ended(running[0])
					}
					running = running[1:]
				}
				for _, d := range pol.Schedule(q, p, now) {
					q.Remove(d.Job.ID)
					running = append(running, d.Alloc)
					if tracked {
						pol.Started(d.Alloc)
					}
					decisions++
				}
				for q.Len() < 1000 {
					q.Add(numaWorkload(rng, id))
					id++
				}
				now++
			}
			b.ReportMetric(float64(decisions)/time.Since(start).Seconds(), "decisions/s")
			b.ReportMetric(float64(decisions)/float64(b.N), "decisions/pass")
			overdue := 0
			for _, a := range running {
				if a.Expiration <= now {
					overdue++
				}
			}
			b.ReportMetric(float64(len(running)), "running")
			b.ReportMetric(float64(overdue), "past-expiration")
		})
	}
}
