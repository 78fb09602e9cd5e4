package sched

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// 4 domains of 16 cores and 1 GPU on a 64-core, 4-GPU node.
const numa4 = `[{"cores":"0-15","gpus":"0"},{"cores":"16-31","gpus":"1"},{"cores":"32-47","gpus":"2"},{"cores":"48-63","gpus":"3"}]`

// numaWorkload is a node-sharing mix: 1-core, 1-core/1-GPU, 2-core/1-GPU
// and one-domain (16-core) jobs with time limits.
func numaWorkload(rng *rand.Rand, id uint64) *Job {
	reqs := [...]Request{
		{Slots: 1, SlotCores: 1, Duration: 100},
		{Slots: 1, SlotCores: 1, SlotGPUs: 1, Duration: 100},
		{Slots: 1, SlotCores: 2, SlotGPUs: 1, Duration: 200},
		{Slots: 1, SlotCores: 16, Duration: 300},
	}
	r := reqs[rng.IntN(len(reqs))]
	return &Job{ID: id, TSubmit: float64(id), Req: &r}
}

// BenchmarkNUMAEasy is issue 24's first target: allocation decisions per
// second at 16,384 nodes × 64 cores (4 GPUs) with 1,000 jobs pending
// under EASY backfill, without NUMA domains (today's matching before
// issue 24), with 4 per node, and with 4 per node and node properties
// (a quarter of the nodes "bigmem", an eighth of the jobs asking for
// it). It runs the path sched-simple runs: the policy is told of starts
// and ends (Started/Ended). Each iteration frees the oldest running job,
// runs one pass and tops the queue up to 1,000. It prints figures; it
// asserts no time limit.
func BenchmarkNUMAEasy(b *testing.B) {
	bigmem, err := jobspec.ParseConstraintQuery("bigmem")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		domains    bool
		properties bool
	}{{"nodomains", false, false}, {"numa4", true, false}, {"numa4+properties", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			p, _ := numaPool(b, 16384, "0-63", "0-3", numa4)
			if !tc.domains {
				for i := range p.nodes {
					p.nodes[i].doms = nil
				}
				p.countNUMA()
			}
			if tc.properties {
				r := p.Inventory()
				if err := r.SetProperty("bigmem", idset.Range(0, 4095)); err != nil {
					b.Fatal(err)
				}
				p = NewPool(r)
				p.SetAvailable(idset.Range(0, 16383), true)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			job := func(id uint64) *Job {
				j := numaWorkload(rng, id)
				if tc.properties && id%8 == 0 {
					j.Req.Constraint = bigmem
				}
				return j
			}
			var running []*Alloc
			// fill the machine most of the way
			for i := 0; p.nFreeGPUs > 4096; i++ {
				a, err := p.Allocate(job(0).Req, 0)
				if err != nil {
					break
				}
				a.Expiration = 100 + float64(i%1000)
				running = append(running, a)
			}
			q := NewQueue()
			id := uint64(1)
			for q.Len() < 1000 {
				q.Add(job(id))
				id++
			}
			pol := NewBackfill("easy", 32, 0)
			for _, a := range running {
				pol.Started(a)
			}
			pol.Running = func() []*Alloc { return running }
			decisions := 0
			start := time.Now()
			now := 1.0
			for b.Loop() {
				if len(running) > 0 {
					p.Free(running[0])
					pol.Ended(running[0])
					running = running[1:]
				}
				for _, d := range pol.Schedule(q, p, now) {
					q.Remove(d.Job.ID)
					running = append(running, d.Alloc)
					pol.Started(d.Alloc)
					decisions++
				}
				for q.Len() < 1000 {
					q.Add(job(id))
					id++
				}
				now++
			}
			b.ReportMetric(float64(decisions)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

// TestNUMAFragmentation runs a 1-core/1-GPU workload with churn on 1,024
// nodes of 4 domains and counts slots split across domains: with domains
// known, none while the node had a domain with room (the goal of issue
// 24); without them (the same machine matched blind), how many today's
// matching splits. It prints both figures.
func TestNUMAFragmentation(t *testing.T) {
	for _, blind := range []bool{false, true} {
		p, _ := numaPool(t, 1024, "0-63", "0-3", numa4)
		layout := p.nodes[0].doms
		if blind {
			for i := range p.nodes {
				p.nodes[i].doms = nil
			}
			p.countNUMA()
		}
		rng := rand.New(rand.NewPCG(3, 4))
		req := &Request{Slots: 1, SlotCores: 1, SlotGPUs: 1}
		var live []*Alloc
		split, roomy, total := 0, 0, 0
		for range 20000 {
			if len(live) > 0 && (rng.IntN(2) == 0 || p.nFreeGPUs == 0) {
				k := rng.IntN(len(live))
				p.Free(live[k])
				live[k] = live[len(live)-1]
				live = live[:len(live)-1]
				continue
			}
			// a domain on some node that could hold the slot whole?
			had := false
			for i := range p.nodes {
				for _, d := range layout {
					if countAnd(p.nodes[i].coreFree, d.cores) >= 1 && countAnd(p.nodes[i].gpuFree, d.gpus) >= 1 {
						had = true
						break
					}
				}
				if had {
					break
				}
			}
			a, err := p.Allocate(req, 0)
			if err != nil {
				continue
			}
			total++
			na := a.Nodes[0]
			for _, d := range layout {
				if countAnd(na.cores, d.cores) == 1 {
					if countAnd(na.gpus, d.gpus) != 1 {
						split++
						if had {
							roomy++
						}
					}
				}
			}
			live = append(live, a)
		}
		t.Logf("domains known=%v: %d slots, %d split across domains, %d of them while a domain had room", !blind, total, split, roomy)
		if !blind && roomy != 0 {
			t.Errorf("%d slots split while a domain had room", roomy)
		}
	}
}
