package schedsimple

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// fakeKVS accepts commits so the job manager can post events.
type fakeKVS struct{}

func (fakeKVS) Name() string { return "kvs" }
func (fakeKVS) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("kvs.commit", func(r *flux.Request) {
		r.Respond(map[string]any{"rootref": "sha1-x", "rootseq": 1})
	})
	h.HandleFunc("kvs.checkpoint", func(r *flux.Request) { r.Respond(map[string]any{"rootref": "sha1-x", "rootseq": 1}) })
	h.HandleFunc("kvs.lookup", func(r *flux.Request) { r.Errorf(syscall.ENOENT, "no such key") })
	return h.Serve(ctx)
}

// fakeExec "runs" each job for a random short time and checks that no
// two running jobs share a core or GPU.
type fakeExec struct {
	mu      sync.Mutex
	inUse   map[string]jobid.ID // "rank/core3" -> job
	ranks   map[jobid.ID]string // job -> its R's short form
	started int
	errs    []error
	hold    bool // keep jobs running until release
	held    []func()
}

func (*fakeExec) Name() string { return "job-exec" }
func (x *fakeExec) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	rng := rand.New(rand.NewPCG(1, 1))
	h.HandleFunc("job-exec.start", func(r *flux.Request) {
		var req struct {
			ID jobid.ID        `json:"id"`
			R  json.RawMessage `json:"R"`
		}
		r.Decode(&req)
		R, err := rset.Parse(req.R)
		if err != nil {
			x.fail(fmt.Errorf("job %d: bad R %s: %v", req.ID, req.R, err))
			r.Errorf(syscall.EINVAL, "bad R")
			return
		}
		if !R.HasHostnames() {
			x.fail(fmt.Errorf("job %d: R without nodelist: %s", req.ID, req.R))
		}
		keys := x.claim(req.ID, R)
		r.Respond(map[string]any{"id": req.ID, "type": "start", "data": map[string]any{}})
		finish := func() {
			x.release(keys)
			r.Respond(map[string]any{"id": req.ID, "type": "finish", "data": map[string]any{"status": 0}})
			r.Respond(map[string]any{"id": req.ID, "type": "release", "data": map[string]any{"ranks": "all", "final": true}})
			r.EndStream()
		}
		x.mu.Lock()
		hold := x.hold
		if hold {
			x.held = append(x.held, func() { h.Post(finish) })
		}
		x.mu.Unlock()
		if !hold {
			d := time.Duration(rng.IntN(3)) * time.Millisecond
			time.AfterFunc(d, func() { h.Post(finish) })
		}
	})
	h.HandleFunc("job-exec.kill", func(*flux.Request) {})
	go h.Call(ctx, "job-manager.exec-hello", flux.NodeidAny, map[string]any{"service": "job-exec"}, nil)
	return h.Serve(ctx)
}

func (x *fakeExec) fail(err error) {
	x.mu.Lock()
	x.errs = append(x.errs, err)
	x.mu.Unlock()
}

func (x *fakeExec) claim(id jobid.ID, R *rset.R) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.started++
	x.ranks[id] = R.String()
	var keys []string
	for n := range R.All() {
		for c := range n.Cores.All() {
			keys = append(keys, fmt.Sprintf("%d/core%d", n.Rank, c))
		}
		for g := range n.GPUs.All() {
			keys = append(keys, fmt.Sprintf("%d/gpu%d", n.Rank, g))
		}
	}
	for _, k := range keys {
		if other, ok := x.inUse[k]; ok {
			x.errs = append(x.errs, fmt.Errorf("%s given to job %d while job %d runs on it", k, id, other))
		}
		x.inUse[k] = id
	}
	return keys
}

func (x *fakeExec) release(keys []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range keys {
		delete(x.inUse, k)
	}
}

type pipeline struct {
	t    *testing.T
	h    *flux.Handle
	exec *fakeExec
	gen  *jobid.Generator

	mu     sync.Mutex
	events map[jobid.ID][]string
	notes  map[jobid.ID]string
}

const fourByFour = `[{"hosts":"node[0-3]","cores":"0-3"},{"hosts":"node[2-3]","gpus":"0-1","properties":["gpu"]}]`

func startPipeline(t *testing.T, hold bool, schedArgs ...string) *pipeline {
	x := &fakeExec{inUse: map[string]jobid.ID{}, ranks: map[jobid.ID]string{}, hold: hold}
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fakeKVS{} })
	reg.Register(resource.Name, resource.New)
	reg.Register(Name, New)
	reg.Register("job-manager", jobmanager.New)
	reg.Register("job-exec", func() module.Module { return x })
	inst := brokertest.Start(t, brokertest.Options{
		Size:     1,
		Registry: reg,
		Attrs:    map[string]string{"resource.config": fourByFour, "resource.monitor-force-up": "1"},
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: resource.Name}, {Name: Name, Args: schedArgs},
			{Name: "job-manager"}, {Name: "job-exec"}},
	})
	p := &pipeline{t: t, h: inst.Handle(0), exec: x, events: map[jobid.ID][]string{}, notes: map[jobid.ID]string{}}
	p.gen, _ = jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	f, err := p.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := f.Next(context.Background())
			if err != nil {
				return
			}
			var ent struct {
				ID     jobid.ID `json:"id"`
				Events []struct {
					Name    string         `json:"name"`
					Context map[string]any `json:"context"`
				} `json:"events"`
			}
			m.UnmarshalPayload(&ent)
			p.mu.Lock()
			for _, ev := range ent.Events {
				p.events[ent.ID] = append(p.events[ent.ID], ev.Name)
				if ev.Name == "exception" {
					p.notes[ent.ID], _ = ev.Context["note"].(string)
				}
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *pipeline) submit(js *jobspec.Jobspec) jobid.ID {
	p.t.Helper()
	id, _ := p.gen.Next()
	raw, err := js.MarshalJSON()
	if err != nil {
		p.t.Fatal(err)
	}
	req := map[string]any{"jobs": []any{map[string]any{
		"id": id, "userid": 0, "urgency": 16, "t_submit": float64(time.Now().UnixNano()) / 1e9,
		"flags": 0, "jobspec": json.RawMessage(raw),
	}}}
	if err := p.h.Call(brokertest.Ctx(p.t), "job-manager.submit", flux.NodeidAny, req, nil); err != nil {
		p.t.Fatal(err)
	}
	return id
}

// wait waits until every job has posted event name.
func (p *pipeline) wait(name string, ids ...jobid.ID) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := 0
		p.mu.Lock()
		for _, id := range ids {
			found := false
			for _, ev := range p.events[id] {
				if ev == name {
					found = true
				}
			}
			if !found {
				missing++
			}
		}
		p.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%d of %d jobs have no %s event", missing, len(ids), name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func spec(t *testing.T, o jobspec.CommandOptions) *jobspec.Jobspec {
	t.Helper()
	js, err := jobspec.FromCommand([]string{"true"}, o)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestPipelineNoOverlapAndDeny(t *testing.T) {
	p := startPipeline(t, false)
	shapes := []jobspec.CommandOptions{
		{NTasks: 1},
		{NTasks: 3},
		{NTasks: 2, CoresPerTask: 2},
		{NTasks: 2, NNodes: 2},
		{NTasks: 1, NNodes: 1, Exclusive: true},
		{NTasks: 1, GPUsPerTask: 1},
		{NTasks: 4, CoresPerTask: 4},
	}
	var ids []jobid.ID
	for i := 0; i < 200; i++ {
		ids = append(ids, p.submit(spec(t, shapes[i%len(shapes)])))
	}
	never := p.submit(spec(t, jobspec.CommandOptions{NTasks: 5, NNodes: 5}))
	tooWide := p.submit(spec(t, jobspec.CommandOptions{NTasks: 1, CoresPerTask: 8}))
	p.wait("clean", ids...)
	p.wait("clean", never, tooWide)
	p.exec.mu.Lock()
	defer p.exec.mu.Unlock()
	for _, err := range p.exec.errs {
		t.Error(err)
	}
	if p.exec.started != len(ids) {
		t.Errorf("%d jobs started, want %d", p.exec.started, len(ids))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := p.notes[never]; got != "unsatisfiable request: requested 5 nodes but the instance has 4" {
		t.Errorf("deny note %q", got)
	}
	if got := p.notes[tooWide]; got != "unsatisfiable request: requested 8 cores per slot but the largest node of the instance has 4" {
		t.Errorf("deny note %q", got)
	}
	for _, id := range ids {
		if len(p.notes[id]) > 0 {
			t.Errorf("job %d got an exception: %s", id, p.notes[id])
		}
	}
}

func TestFeasibilityCheck(t *testing.T) {
	p := startPipeline(t, false)
	check := func(o jobspec.CommandOptions) error {
		raw, _ := spec(t, o).MarshalJSON()
		return p.h.Call(brokertest.Ctx(t), "feasibility.check", flux.NodeidAny, map[string]any{"jobspec": json.RawMessage(raw)}, nil)
	}
	// the service appears once sched-simple has acquired resources
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := check(jobspec.CommandOptions{NTasks: 1}); !errors.Is(err, syscall.ENOSYS) || time.Now().After(deadline) {
			break
		}
	}
	if err := check(jobspec.CommandOptions{NTasks: 16}); err != nil {
		t.Fatalf("16 cores: %v", err)
	}
	err := check(jobspec.CommandOptions{NTasks: 3, GPUsPerTask: 2})
	if !errors.Is(err, syscall.EOVERFLOW) || flux.ErrorText(err) != "unsatisfiable request: requested 6 GPUs but the instance has 4" {
		t.Fatalf("6 GPUs: %v", err)
	}
	js := spec(t, jobspec.CommandOptions{NTasks: 1})
	js.SetConstraints(&jobspec.Constraint{Op: "properties", Values: []string{"gpu"}})
	raw, _ := js.MarshalJSON()
	if err := p.h.Call(brokertest.Ctx(t), "feasibility.check", flux.NodeidAny, map[string]any{"jobspec": json.RawMessage(raw)}, nil); err != nil {
		t.Fatalf("gpu property: %v", err)
	}
	err = p.h.Call(brokertest.Ctx(t), "feasibility.check", flux.NodeidAny, map[string]any{"jobspec": map[string]any{"version": 9}}, nil)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad jobspec: %v", err)
	}
}

// TestDrainAndStatus holds jobs running, checks the scheduler's view, and
// checks that a drained node gets no new work.
func TestDrainAndStatus(t *testing.T) {
	p := startPipeline(t, true)
	ctx := brokertest.Ctx(t)
	if err := p.h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "node[0-1]", "reason": "maintenance"}, nil); err != nil {
		t.Fatal(err)
	}
	// the scheduler hears of the drain asynchronously: wait until it has
	for {
		var st struct{ Down json.RawMessage }
		err := p.h.Call(ctx, "sched.resource-status", 0, nil, &st)
		if err != nil && !errors.Is(err, syscall.ENOSYS) { // ENOSYS: still loading
			t.Fatal(err)
		}
		if down, err := rset.Parse(st.Down); err == nil && down.String() == "rank[0-1]/core[0-3]" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the scheduler never saw the drain")
		case <-time.After(5 * time.Millisecond):
		}
	}
	a := p.submit(spec(t, jobspec.CommandOptions{NTasks: 2}))
	b := p.submit(spec(t, jobspec.CommandOptions{NTasks: 1, NNodes: 1, Exclusive: true}))
	p.wait("start", a, b)
	p.exec.mu.Lock()
	ra, rb := p.exec.ranks[a], p.exec.ranks[b]
	p.exec.mu.Unlock()
	if ra != "rank2/core[0-1]" || rb != "rank3/core[0-3],gpu[0-1]" {
		t.Fatalf("placement %q %q", ra, rb)
	}
	var st struct {
		All, Down, Allocated json.RawMessage
	}
	if err := p.h.Call(ctx, "resource.sched-status", 0, nil, &st); err != nil {
		t.Fatal(err)
	}
	down, _ := rset.Parse(st.Down)
	alloc, _ := rset.Parse(st.Allocated)
	if down.String() != "rank[0-1]/core[0-3]" || alloc.String() != "rank2/core[0-1] rank3/core[0-3],gpu[0-1]" {
		t.Fatalf("down %q allocated %q", down.String(), alloc.String())
	}
	if !alloc.HasHostnames() || alloc.Nodelist().String() != "node[2-3]" {
		t.Fatalf("allocated nodelist %v", alloc.Nodelist())
	}
	// a third job waits for resources
	c := p.submit(spec(t, jobspec.CommandOptions{NTasks: 3}))
	time.Sleep(50 * time.Millisecond) // a window in which it must not be allocated
	p.mu.Lock()
	evs := append([]string(nil), p.events[c]...)
	p.mu.Unlock()
	for _, ev := range evs {
		if ev == "alloc" {
			t.Fatalf("job allocated on drained nodes: %v", evs)
		}
	}
	if err := p.h.Call(ctx, "resource.undrain", 0, map[string]any{"targets": "0"}, nil); err != nil {
		t.Fatal(err)
	}
	p.wait("start", c)
	p.exec.mu.Lock()
	rc := p.exec.ranks[c]
	held := p.exec.held
	p.exec.held = nil
	p.exec.mu.Unlock()
	if rc != "rank0/core[0-2]" {
		t.Fatalf("after undrain: %q", rc)
	}
	for _, f := range held {
		f()
	}
	p.wait("clean", a, b)
}

func TestQueueDepthArgument(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
		err  bool
	}{
		{nil, 8, false},
		{[]string{"queue-depth=1"}, 1, false},
		{[]string{"queue-depth=unlimited"}, int(^uint(0) >> 1), false},
		{[]string{"queue-depth=0"}, 0, true},
		{[]string{"bogus"}, 0, true},
	} {
		cfg, err := parseConfig(context.Background(), flux.NewHandle(nopConn{}), tt.args)
		if (err != nil) != tt.err || (!tt.err && cfg.QueueDepth != tt.want) {
			t.Errorf("%v: %+v %v", tt.args, cfg, err)
		}
	}
}

// nopConn is a connection that answers nothing (attribute lookups fail).
type nopConn struct{}

func (nopConn) Send(m *flux.Message) error             { return errors.New("no broker") }
func (nopConn) Start(func(*flux.Message), func(error)) {}
func (nopConn) Close() error                           { return nil }
