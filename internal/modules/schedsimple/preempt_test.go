package schedsimple

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestPreemptConfig: preempt-mode and max-requeue from the [sched-simple]
// table and module arguments, their defaults, and bad values refused
// with the key named.
func TestPreemptConfig(t *testing.T) {
	def := DefaultConfig()
	if def.PreemptMode != wire.PreemptCancel || def.MaxRequeue != DefaultMaxRequeue {
		t.Fatalf("defaults: %q %d", def.PreemptMode, def.MaxRequeue)
	}
	c := DefaultConfig()
	if err := c.applyTable(map[string]any{Name: map[string]any{"preempt-mode": "requeue", "max-requeue": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	if c.PreemptMode != wire.PreemptRequeue || c.MaxRequeue != 2 {
		t.Fatalf("from the table: %q %d", c.PreemptMode, c.MaxRequeue)
	}
	if err := c.applyArgs([]string{"preempt-mode=cancel", "max-requeue=0"}); err != nil {
		t.Fatal(err)
	}
	if c.PreemptMode != wire.PreemptCancel || c.MaxRequeue != 0 {
		t.Fatalf("from arguments: %q %d", c.PreemptMode, c.MaxRequeue)
	}
	for _, tc := range []struct {
		table map[string]any
		err   string
	}{
		{map[string]any{"preempt-mode": "suspend"}, `preempt-mode="suspend"`},
		{map[string]any{"preempt-mode": int64(1)}, `preempt-mode="1"`},
		{map[string]any{"max-requeue": int64(-1)}, "max-requeue=-1"},
		{map[string]any{"max-requeue": int64(wire.MaxRequeueLimit + 1)}, "max-requeue=1001"},
		{map[string]any{"max-requeue": "many"}, `max-requeue="many"`},
		{map[string]any{"max-requeue": 1.5}, `max-requeue="1.5"`},
	} {
		err := CheckTable(map[string]any{Name: tc.table})
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "[sched-simple]") {
			t.Errorf("%v: %v, want an error naming %s", tc.table, err, tc.err)
		}
	}
	if err := (&Config{}).applyArgs([]string{"max-requeue"}); err == nil || !strings.Contains(err.Error(), "needs a value") {
		t.Errorf("max-requeue without a value: %v", err)
	}
}

// TestPreemptModeAttr: a job's own preempt-mode is checked when it is
// submitted (the feasibility check's parse): cancel and requeue pass,
// anything else is refused naming the attribute.
func TestPreemptModeAttr(t *testing.T) {
	c := newRequestCache(nil)
	pool := testPool(t)
	spec := func(v string) []byte {
		return []byte(`{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],` +
			`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"preempt-mode":` + v + `}}}`)
	}
	for v, bad := range map[string]bool{`"cancel"`: false, `"requeue"`: false, `"suspend"`: true, `1`: true, `null`: true} {
		e := c.parse(spec(v), pool)
		if bad != (e.err != nil) {
			t.Errorf("preempt-mode=%s: %v", v, e.err)
		}
		if bad && !strings.Contains(e.err.Error(), "attributes.system.preempt-mode") {
			t.Errorf("preempt-mode=%s: %v does not name the attribute", v, e.err)
		}
	}
}

// FuzzPreemptKey: any value of preempt-mode or max-requeue is either
// taken, leaving a valid configuration, or refused with an error.
func FuzzPreemptKey(f *testing.F) {
	for _, s := range []string{"cancel", "requeue", "0", "5", "1000", "1001", "-1", "", "0x10", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, k := range []string{"preempt-mode", "max-requeue"} {
			c := DefaultConfig()
			if err := c.setKey(k, v); err != nil {
				continue
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("%s=%q taken but invalid: %v", k, v, err)
			}
			if n, _ := strconv.Atoi(v); k == "max-requeue" && n != c.MaxRequeue {
				t.Fatalf("max-requeue=%q read as %d", v, c.MaxRequeue)
			}
		}
	})
}

// testPool is a one-node pool of two cores.
func testPool(t *testing.T) *sched.Pool {
	t.Helper()
	r, err := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}],"nodelist":["n0"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sched.NewPoolShared(r, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// preemptJM is a job manager that holds no jobs at hello and answers
// job-manager.preempt as a requeue, passing the requests to the test.
type preemptJM struct {
	ready    chan struct{}
	preempts chan wire.PreemptRequest
}

func (*preemptJM) Name() string { return "job-manager" }
func (j *preemptJM) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("job-manager.sched-hello", func(r *flux.Request) { r.Respond(map[string]any{"alloc": []any{}}) })
	h.HandleFunc("job-manager.sched-ready", func(r *flux.Request) {
		r.Respond(nil)
		close(j.ready)
	})
	h.HandleFunc("job-manager.preempt", func(r *flux.Request) {
		var req wire.PreemptRequest
		r.Decode(&req)
		r.Respond(wire.PreemptResponse{Requeued: true})
		j.preempts <- req
	})
	return h.Serve(ctx)
}

// nextAlloc is an alloc request's next response other than an
// annotation.
func nextAlloc(t *testing.T, ctx context.Context, f *flux.Future) allocResp {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second) // hang guard
	defer cancel()
	for {
		m, err := f.Next(c)
		if err != nil {
			t.Fatal(err)
		}
		var r allocResp
		m.UnmarshalPayload(&r)
		if r.Type != allocAnnotate {
			return r
		}
	}
}

// TestPreemptYield: sched-simple asks the job manager to preempt with
// its preempt-mode and max-requeue, and a requeued job, which keeps its
// older submit time, does not start again ahead of the job it was
// preempted for (to be preempted again): its new alloc request waits
// until that job started.
func TestPreemptYield(t *testing.T) {
	h, jm := startPreemptSched(t)
	ctx := brokertest.Ctx(t)
	alloc := func(id uint64, ts float64, js json.RawMessage) *flux.Future {
		return allocReq(t, h, map[string]any{"id": id, "priority": 16, "userid": 0, "t_submit": ts, "jobspec": js})
	}
	spec := func(preemptible bool) json.RawMessage { return preemptSpec(2, preemptible) }
	next := func(f *flux.Future) allocResp { return nextAlloc(t, ctx, f) }
	victim := next(alloc(1, 1, spec(true)))
	if victim.Type != 0 {
		t.Fatalf("the preemptible job: %+v", victim)
	}
	urgent := alloc(2, 2, spec(false))
	var req wire.PreemptRequest
	select {
	case req = <-jm.preempts:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("no job-manager.preempt")
	}
	if req.ID != 1 || req.Mode != wire.PreemptRequeue || req.MaxRequeue != 3 || req.For != 2 || !strings.Contains(req.Note, "preempted by job") {
		t.Fatalf("job-manager.preempt %+v", req)
	}
	// requeued: its resources back and its alloc again at once, with its
	// submit time older than the urgent job's
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 1, "final": true, "R": victim.R}, nil); err != nil {
		t.Fatal(err)
	}
	again := alloc(1, 1, spec(true))
	u := next(urgent)
	if u.Type != 0 || u.ID != 2 {
		t.Fatalf("the urgent job: %+v", u)
	}
	// the requeued job runs once the urgent one is done
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 2, "final": true, "R": u.R}, nil); err != nil {
		t.Fatal(err)
	}
	if r := next(again); r.Type != 0 || r.ID != 1 {
		t.Fatalf("the requeued job: %+v", r)
	}
	select {
	case req := <-jm.preempts:
		t.Fatalf("preempted again: %+v", req)
	default:
	}
}

// startPreemptSched starts sched-simple (preempt-mode=requeue,
// max-requeue=3) on one node of two cores beside preemptJM.
func startPreemptSched(t *testing.T) (*flux.Handle, *preemptJM) {
	t.Helper()
	return startPreemptSchedArgs(t, "preempt-mode=requeue", "max-requeue=3")
}

// startPreemptSchedArgs is startPreemptSched with sched-simple's
// arguments args.
func startPreemptSchedArgs(t *testing.T, args ...string) (*flux.Handle, *preemptJM) {
	t.Helper()
	jm := &preemptJM{ready: make(chan struct{}), preempts: make(chan wire.PreemptRequest, 4)}
	reg := module.NewRegistry()
	reg.Register(resource.Name, resource.New)
	reg.Register(Name, New)
	reg.Register("job-manager", func() module.Module { return jm })
	inst := brokertest.Start(t, brokertest.Options{
		Size: 1, Registry: reg,
		Attrs: map[string]string{"resource.config": `[{"hosts":"n0","cores":"0-1"}]`, "resource.monitor-force-up": "1"},
		Modules: []broker.ModuleSpec{{Name: resource.Name}, {Name: "job-manager"},
			{Name: Name, Args: args}},
	})
	select {
	case <-jm.ready:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("no sched-ready")
	}
	return inst.Handle(0), jm
}

// preemptSpec is a jobspec of ntasks one-core tasks.
func preemptSpec(ntasks int, preemptible bool) json.RawMessage {
	js, _ := jobspec.FromCommand([]string{"x"}, jobspec.CommandOptions{NTasks: ntasks})
	raw, _ := js.MarshalJSON()
	var doc map[string]any
	json.Unmarshal(raw, &doc)
	doc["attributes"].(map[string]any)["system"].(map[string]any)["preemptible"] = preemptible
	b, _ := json.Marshal(doc)
	return b
}

func allocReq(t *testing.T, h *flux.Handle, payload map[string]any) *flux.Future {
	t.Helper()
	f, err := h.RPC("sched.alloc", flux.NodeidAny, payload, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPreemptYieldTo: a scheduler that did not preempt the job itself
// (loaded again, or the instance restarted) learns from the alloc
// request's yield_to which pending job a requeued job yields to: the
// request waits aside, saying so in sched.reason_pending, though a core
// is free for it, and joins the queue once that job has started.
func TestPreemptYieldTo(t *testing.T) {
	h, jm := startPreemptSched(t)
	ctx := brokertest.Ctx(t)
	busy := nextAlloc(t, ctx, allocReq(t, h, map[string]any{"id": 5, "priority": 16, "userid": 0, "t_submit": 0.5, "jobspec": preemptSpec(1, false)}))
	if busy.Type != 0 {
		t.Fatalf("the job holding a core: %+v", busy)
	}
	// the preemptor needs both cores: pending behind job 5
	urgent := allocReq(t, h, map[string]any{"id": 2, "priority": 16, "userid": 0, "t_submit": 2.0, "jobspec": preemptSpec(2, false)})
	again := allocReq(t, h, map[string]any{"id": 1, "priority": 16, "userid": 0, "t_submit": 1.0, "jobspec": preemptSpec(1, true), "yield_to": 2})
	c, cancel := context.WithTimeout(ctx, 30*time.Second) // hang guard
	defer cancel()
	m, err := again.Next(c)
	if err != nil {
		t.Fatal(err)
	}
	var ann struct {
		Type        int `json:"type"`
		Annotations struct {
			Sched struct {
				Reason string `json:"reason_pending"`
			} `json:"sched"`
		} `json:"annotations"`
	}
	m.UnmarshalPayload(&ann)
	if ann.Type != allocAnnotate || !strings.Contains(ann.Annotations.Sched.Reason, "yields to job") {
		t.Fatalf("the requeued job's first response: %s", m.JSON())
	}
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 5, "final": true, "R": busy.R}, nil); err != nil {
		t.Fatal(err)
	}
	u := nextAlloc(t, ctx, urgent)
	if u.Type != 0 || u.ID != 2 {
		t.Fatalf("the preemptor: %+v", u)
	}
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 2, "final": true, "R": u.R}, nil); err != nil {
		t.Fatal(err)
	}
	if r := nextAlloc(t, ctx, again); r.Type != 0 || r.ID != 1 {
		t.Fatalf("the requeued job: %+v", r)
	}
	select {
	case req := <-jm.preempts:
		t.Fatalf("preempted: %+v", req)
	default:
	}
}
