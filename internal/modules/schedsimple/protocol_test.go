package schedsimple

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// helloJM is a job manager that reports one running job at hello and
// then lets the test drive the sched.* protocol itself.
type helloJM struct {
	ready chan struct{}
}

func (*helloJM) Name() string { return "job-manager" }
func (j *helloJM) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("job-manager.sched-hello", func(r *flux.Request) {
		r.Respond(map[string]any{"alloc": []any{map[string]any{
			"id": 99, "priority": 16, "userid": 0, "t_submit": 1.0,
			"R": json.RawMessage(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}]}}`),
		}}})
	})
	h.HandleFunc("job-manager.sched-ready", func(r *flux.Request) {
		var req struct {
			Mode string `json:"mode"`
		}
		r.Decode(&req)
		r.Respond(nil)
		if req.Mode == "unlimited" {
			close(j.ready)
		}
	})
	return h.Serve(ctx)
}

type allocResp struct {
	ID          uint64          `json:"id"`
	Type        int             `json:"type"`
	R           json.RawMessage `json:"R"`
	Note        string          `json:"note"`
	Annotations struct {
		Sched struct {
			Summary string `json:"resource_summary"`
		} `json:"sched"`
	} `json:"annotations"`
}

func TestProtocol(t *testing.T) {
	jm := &helloJM{ready: make(chan struct{})}
	reg := module.NewRegistry()
	reg.Register(resource.Name, resource.New)
	reg.Register(Name, New)
	reg.Register("job-manager", func() module.Module { return jm })
	inst := brokertest.Start(t, brokertest.Options{
		Size: 1, Registry: reg,
		Attrs: map[string]string{"resource.config": `[{"hosts":"n[0-1]","cores":"0-1"}]`, "resource.monitor-force-up": "1"},
		Modules: []broker.ModuleSpec{{Name: resource.Name}, {Name: "job-manager"},
			{Name: Name, Args: []string{"queue-depth=1"}}},
	})
	select {
	case <-jm.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("no sched-ready")
	}
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	twoCores, _ := jobspec.FromCommand([]string{"x"}, jobspec.CommandOptions{NTasks: 2})
	raw, _ := twoCores.MarshalJSON()
	alloc := func(id uint64, ts float64, js json.RawMessage) *flux.Future {
		f, err := h.RPC("sched.alloc", flux.NodeidAny, map[string]any{"id": id, "priority": 16, "userid": 0, "t_submit": ts, "jobspec": js}, flux.Streaming)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	next := func(f *flux.Future) allocResp {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err := f.Next(c)
		if err != nil {
			t.Fatal(err)
		}
		var r allocResp
		m.UnmarshalPayload(&r)
		return r
	}
	// rank 0 is held by job 99 from hello: job 1 gets rank 1
	f1 := alloc(1, 1, raw)
	if r := next(f1); r.Type != 0 || r.ID != 1 || r.Annotations.Sched.Summary != "rank1/core[0-1]" {
		t.Fatalf("job 1: %+v", r)
	}
	// jobs 2 and 3 wait; prioritizing 3 puts it first
	f2 := alloc(2, 2, raw)
	f3 := alloc(3, 3, raw)
	if _, err := h.RPC("sched.prioritize", flux.NodeidAny, map[string]any{"jobs": [][2]any{{3, 100}}}, flux.NoResponse); err != nil {
		t.Fatal(err)
	}
	var st struct{ All, Down, Allocated json.RawMessage }
	if err := h.Call(ctx, "sched.resource-status", flux.NodeidAny, nil, &st); err != nil {
		t.Fatal(err)
	}
	if a, _ := rset.Parse(st.Allocated); a.String() != "rank[0-1]/core[0-1]" {
		t.Fatalf("allocated %s", st.Allocated)
	}
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 99, "final": true,
		"R": json.RawMessage(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}]}}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if r := next(f3); r.Type != 0 || r.ID != 3 {
		t.Fatalf("job 3: %+v", r)
	}
	// cancelling the waiting job 2 answers its alloc with CANCEL
	if _, err := h.RPC("sched.cancel", flux.NodeidAny, map[string]any{"id": 2}, flux.NoResponse); err != nil {
		t.Fatal(err)
	}
	if r := next(f2); r.Type != 3 || r.ID != 2 {
		t.Fatalf("job 2: %+v", r)
	}
	// a jobspec that is not version 1 is denied
	if r := next(alloc(4, 4, json.RawMessage(`{"version":2}`))); r.Type != 2 || r.Note == "" {
		t.Fatalf("job 4: %+v", r)
	}
	// expiration of a running job; of an unknown one
	if err := h.Call(ctx, "sched.expiration", flux.NodeidAny, map[string]any{"id": 3, "expiration": 4e9}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "sched.expiration", flux.NodeidAny, map[string]any{"id": 77, "expiration": 4e9}, nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("expiration of unknown job: %v", err)
	}
	// partial then final free of job 1
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 1, "final": false,
		"R": json.RawMessage(`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0"}}]}}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "sched.free", flux.NodeidAny, map[string]any{"id": 1, "final": true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "sched.resource-status", flux.NodeidAny, nil, &st); err != nil {
		t.Fatal(err)
	}
	if a, _ := rset.Parse(st.Allocated); a.String() != "rank0/core[0-1]" {
		t.Fatalf("allocated after frees %s", st.Allocated)
	}
}

func TestDecodeAllocRequest(t *testing.T) {
	good := `{"id":12, "jobspec": {"a":"}\\\"{[", "b":[1,{"c":2}]}, "priority":16,"t_submit":1.5,"userid":1000,"extra":null}`
	req, err := wire.DecodeAllocRequest([]byte(good), nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.ID != 12 || req.Priority != 16 || req.Userid != 1000 || req.TSubmit != 1.5 ||
		string(req.Jobspec) != `{"a":"}\\\"{[", "b":[1,{"c":2}]}` {
		t.Fatalf("%+v %s", req, req.Jobspec)
	}
	for _, bad := range []string{
		`{"id":1,"priority":16,"userid":0,"t_submit":1}`,                  // no jobspec
		`{"id":"1","priority":16,"userid":0,"t_submit":1,"jobspec":{}}`,   // id a string
		`{"id":1,"priority":16,"userid":0,"t_submit":1,"jobspec":[]}`,     // jobspec not an object
		`{"id":1,"priority":16,"userid":0,"t_submit":1,"jobspec":{"a":1}`, // unterminated
		`{"id":1,"priority":16,"userid":0,"t_submit":1,"jobspec":{}} x`,   // trailing data
		`[]`,
	} {
		if _, err := wire.DecodeAllocRequest([]byte(bad), nil); !errors.Is(err, errSyntax) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// the job manager's in-process form: the jobspec attached
	req, err = wire.DecodeAllocRequest([]byte(`{"id":1,"priority":16,"userid":0,"t_submit":1}`), wire.AttachedJobspec(`{"x":1}`))
	if err != nil || string(req.Jobspec) != `{"x":1}` {
		t.Fatalf("attached jobspec: %+v %v", req, err)
	}
	fr, err := decodeFreeRequest([]byte(`{"id":5,"R":null,"final":false}`))
	if err != nil || fr.ID != 5 || fr.R != nil || fr.Final {
		t.Fatalf("%+v %v", fr, err)
	}
}
