package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/internal/modules/schedsimple"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// The machine: 16,384 nodes × 64 cores.
const (
	nodes = 16384
	cores = 64
)

func machine(b *testing.B) *rset.R {
	hl, err := hostlist.Parse(fmt.Sprintf("node[0-%d]", nodes-1))
	if err != nil {
		b.Fatal(err)
	}
	r, err := rset.NewNodes(idset.Range(0, nodes-1), hl, idset.Range(0, cores-1), idset.Set{})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkPoolAllocFree1Core is the scheduler's own work per one-core
// job on the full machine kept half allocated (524,288 running jobs):
// free the oldest job, first-fit a new one, encode its R and summary.
func BenchmarkPoolAllocFree1Core(b *testing.B) {
	p := sched.NewPool(machine(b))
	p.SetAvailable(idset.Range(0, nodes-1), true)
	req := &sched.Request{Slots: 1, SlotCores: 1}
	live := make([]*sched.Alloc, nodes*cores/2)
	for i := range live {
		a, err := p.Allocate(req, 0)
		if err != nil {
			b.Fatal(err)
		}
		live[i] = a
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	start := time.Now()
	k := 0
	for b.Loop() {
		if err := p.Free(live[k]); err != nil {
			b.Fatal(err)
		}
		a, err := p.Allocate(req, 1)
		if err != nil {
			b.Fatal(err)
		}
		buf = p.AppendR(buf[:0], a)
		_ = p.Summary(a)
		live[k] = a
		if k++; k == len(live) {
			k = 0
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "allocs/s")
}

// BenchmarkPoolAllocFreeMixed mixes node-exclusive, multi-core and
// one-core requests on the same machine.
func BenchmarkPoolAllocFreeMixed(b *testing.B) {
	p := sched.NewPool(machine(b))
	p.SetAvailable(idset.Range(0, nodes-1), true)
	reqs := []*sched.Request{
		{Slots: 1, SlotCores: 1},
		{Slots: 4, SlotCores: 4},
		{Nodes: 2, Slots: 2, SlotCores: 1, Exclusive: true},
		{Nodes: 4, Slots: 16, SlotCores: 2},
	}
	live := make([]*sched.Alloc, 16384)
	for i := range live {
		a, err := p.Allocate(reqs[i%len(reqs)], 0)
		if err != nil {
			b.Fatal(err)
		}
		live[i] = a
	}
	buf := make([]byte, 0, 1024)
	start := time.Now()
	k := 0
	for b.Loop() {
		if err := p.Free(live[k]); err != nil {
			b.Fatal(err)
		}
		a, err := p.Allocate(reqs[k%len(reqs)], 1)
		if err != nil {
			b.Fatal(err)
		}
		buf = p.AppendR(buf[:0], a)
		live[k] = a
		if k++; k == len(live) {
			k = 0
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "allocs/s")
}

// driver stands in for the job manager: it says hello and, once the
// scheduler is ready, keeps a window of sched.alloc requests in flight,
// freeing each allocation as soon as it is granted.
type driver struct {
	jobs    int
	window  int
	jobspec json.RawMessage
	done    chan time.Duration
}

func (*driver) Name() string { return "job-manager" }
func (d *driver) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	var sent, finished, inflight int
	var start time.Time
	var pump func()
	pump = func() {
		for inflight < d.window && sent < d.jobs {
			id := uint64(sent + 1)
			sent++
			inflight++
			req := json.RawMessage(`{"id":` + strconv.FormatUint(id, 10) + `,"priority":16,"userid":0,"t_submit":1.0,"jobspec":` + string(d.jobspec) + `}`)
			f, err := h.RPC("sched.alloc", flux.NodeidAny, req, flux.Streaming)
			if err != nil {
				panic(err)
			}
			f.Then(func(m *flux.Message, err error) {
				if err != nil {
					panic(err)
				}
				var resp struct {
					Type int             `json:"type"`
					R    json.RawMessage `json:"R"`
				}
				m.UnmarshalPayload(&resp)
				if resp.Type != 0 {
					return
				}
				f.Close()
				free := json.RawMessage(`{"id":` + strconv.FormatUint(id, 10) + `,"final":true,"R":` + string(resp.R) + `}`)
				ff, _ := h.RPC("sched.free", flux.NodeidAny, free, 0)
				ff.Then(func(_ *flux.Message, err error) {
					if err != nil {
						panic(err)
					}
					inflight--
					if finished++; finished == d.jobs {
						d.done <- time.Since(start)
						return
					}
					pump()
				})
			})
		}
	}
	h.HandleFunc("job-manager.sched-hello", func(r *flux.Request) { r.Respond(map[string]any{"alloc": []any{}}) })
	h.HandleFunc("job-manager.sched-ready", func(r *flux.Request) {
		r.Respond(nil)
		start = time.Now()
		pump()
	})
	return h.Serve(ctx)
}

// BenchmarkSchedSimple1Core runs sched-simple and the resource module in
// an in-process broker with the 16,384 × 64 inventory and measures
// sched.alloc + sched.free round trips of one-core jobs (the jobspec
// flux submit -n1 makes), 256 in flight, through the real message path.
func BenchmarkSchedSimple1Core(b *testing.B) {
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		b.Fatal(err)
	}
	js.SetEnvironment(map[string]string{"HOME": "/home/alice", "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "alice"})
	js.SetCwd("/home/alice")
	raw, _ := js.MarshalJSON()
	d := &driver{jobs: b.N, window: 256, jobspec: raw, done: make(chan time.Duration, 1)}
	reg := module.NewRegistry()
	reg.Register(resource.Name, resource.New)
	reg.Register(schedsimple.Name, schedsimple.New)
	reg.Register("job-manager", func() module.Module { return d })
	b.ResetTimer()
	brokertest.Start(b, brokertest.Options{
		Size:     1,
		Registry: reg,
		Attrs: map[string]string{
			"resource.config":           fmt.Sprintf(`[{"hosts":"node[0-%d]","cores":"0-%d"}]`, nodes-1, cores-1),
			"resource.monitor-force-up": "1",
		},
		Modules: []broker.ModuleSpec{{Name: resource.Name}, {Name: "job-manager"}, {Name: schedsimple.Name}},
	})
	select {
	case elapsed := <-d.done:
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	case <-time.After(10 * time.Minute):
		b.Fatal("jobs did not finish")
	}
}
