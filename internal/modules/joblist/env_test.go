package joblist

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/jobinfo/kvsfake"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// fakeExec "runs" jobs: "true" succeeds, "false" exits 1, "sleep"
// runs until killed.
type fakeExec struct{}

func (*fakeExec) Name() string { return "job-exec" }
func (*fakeExec) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	running := map[jobid.ID]*flux.Request{}
	finish := func(id jobid.ID, r *flux.Request, status int) {
		r.Respond(map[string]any{"id": id, "type": "finish", "data": map[string]any{"status": status}})
		r.Respond(map[string]any{"id": id, "type": "release", "data": map[string]any{"ranks": "all", "final": true}})
		r.EndStream()
	}
	h.HandleFunc("job-exec.start", func(r *flux.Request) {
		var req struct {
			ID      jobid.ID `json:"id"`
			Jobspec struct {
				Tasks []struct {
					Command []string `json:"command"`
				} `json:"tasks"`
			} `json:"jobspec"`
		}
		r.Decode(&req)
		r.Respond(map[string]any{"id": req.ID, "type": "start", "data": map[string]any{}})
		switch req.Jobspec.Tasks[0].Command[0] {
		case "sleep":
			running[req.ID] = r
		case "false":
			finish(req.ID, r, 256)
		default:
			finish(req.ID, r, 0)
		}
	})
	h.HandleFunc("job-exec.kill", func(r *flux.Request) {
		var req struct {
			ID     jobid.ID `json:"id"`
			Signum int      `json:"signum"`
		}
		r.Decode(&req)
		if s, ok := running[req.ID]; ok {
			delete(running, req.ID)
			finish(req.ID, s, req.Signum)
		}
	})
	go h.Call(ctx, "job-manager.exec-hello", flux.NodeidAny, map[string]any{"service": "job-exec"}, nil)
	return h.Serve(ctx)
}

type env struct {
	t     *testing.T
	h     *flux.Handle
	store *kvsfake.Store
	gen   *jobid.Generator
	mu    sync.Mutex
}

type envOpts struct {
	hold       bool
	listFirst  bool // load job-list before the job manager
	listArgs   []string
	beforeLoad func(*kvsfake.Store)
}

func start(t *testing.T, o envOpts) *env {
	t.Helper()
	store := kvsfake.New()
	if o.beforeLoad != nil {
		o.beforeLoad(store)
	}
	reg := module.NewRegistry()
	reg.Register("kvs", store.KVS)
	reg.Register("kvs-watch", store.Watch)
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{Hold: o.hold} })
	reg.Register("job-exec", func() module.Module { return &fakeExec{} })
	reg.Register(Name, New)
	mods := []broker.ModuleSpec{{Name: "kvs"}, {Name: "kvs-watch"}}
	jl := broker.ModuleSpec{Name: Name, Args: o.listArgs}
	if o.listFirst {
		mods = append(mods, jl)
	}
	mods = append(mods, broker.ModuleSpec{Name: "job-manager"}, broker.ModuleSpec{Name: "sched"}, broker.ModuleSpec{Name: "job-exec"})
	if !o.listFirst {
		mods = append(mods, jl)
	}
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg, Modules: mods})
	e := &env{t: t, h: inst.Handle(0), store: store}
	e.gen, _ = jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	return e
}

func jobspecFor(cmd string, sys map[string]any) json.RawMessage {
	system := map[string]any{"duration": 0, "cwd": "/home/user"}
	for k, v := range sys {
		system[k] = v
	}
	js := map[string]any{
		"version":    1,
		"resources":  []any{map[string]any{"type": "slot", "count": 1, "label": "task", "with": []any{map[string]any{"type": "core", "count": 1}}}},
		"tasks":      []any{map[string]any{"command": []string{cmd}, "slot": "task", "count": map[string]any{"per_slot": 1}}},
		"attributes": map[string]any{"system": system},
	}
	b, _ := json.Marshal(js)
	return b
}

// submit hands a job to the job manager as job-ingest would.
func (e *env) submit(cmd string, urgency int, userid uint32, sys map[string]any) jobid.ID {
	e.t.Helper()
	e.mu.Lock()
	id, _ := e.gen.Next()
	e.mu.Unlock()
	ts := float64(time.Now().UnixNano()) / 1e9
	spec := jobspecFor(cmd, sys)
	line, _ := json.Marshal(map[string]any{"timestamp": ts, "name": "submit",
		"context": map[string]any{"userid": userid, "urgency": urgency, "flags": 0, "version": 1}})
	e.store.Put(job.KVSKey(id, "jobspec"), spec)
	e.store.Put(job.KVSKey(id, "eventlog"), append(line, '\n'))
	req := map[string]any{"jobs": []any{map[string]any{
		"id": id, "userid": userid, "urgency": urgency, "t_submit": ts, "flags": 0, "jobspec": spec,
	}}}
	var resp struct {
		Errors [][2]any `json:"errors"`
	}
	if err := e.h.Call(brokertest.Ctx(e.t), "job-manager.submit", flux.NodeidAny, req, &resp); err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Errors) > 0 {
		e.t.Fatalf("submit rejected: %v", resp.Errors)
	}
	return id
}

// waitState waits until job-list reports job id in one of states.
func (e *env) waitState(id jobid.ID, states job.State) *job.Info {
	e.t.Helper()
	ctx := brokertest.Ctx(e.t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := job.ListID(ctx, e.h, id, []string{job.AttrAll}, 0)
		if err != nil {
			e.t.Fatalf("list-id %s: %v", id, err)
		}
		if j.State&states != 0 {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: state %s, waiting for %v", id, j.State, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) list(req job.ListRequest) []*job.Info {
	e.t.Helper()
	jobs, err := job.List(brokertest.Ctx(e.t), e.h, req)
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	return jobs
}
