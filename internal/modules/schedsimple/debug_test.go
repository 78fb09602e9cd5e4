package schedsimple

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// readyJM is a job manager with no running jobs that passes on the
// sched-ready request it gets.
type readyJM struct {
	ready chan map[string]any
}

func (*readyJM) Name() string { return "job-manager" }
func (j *readyJM) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("job-manager.sched-hello", func(r *flux.Request) {
		r.Respond(map[string]any{"alloc": []any{}})
	})
	h.HandleFunc("job-manager.sched-ready", func(r *flux.Request) {
		var req map[string]any
		r.Decode(&req)
		r.Respond(nil)
		j.ready <- req
	})
	return h.Serve(ctx)
}

// debugAllocResp is an RFC 27 alloc response with the annotations the
// debug bits add.
type debugAllocResp struct {
	ID          uint64 `json:"id"`
	Type        int    `json:"type"`
	Note        string `json:"note"`
	Annotations struct {
		Sched struct {
			Summary       string `json:"resource_summary"`
			ReasonPending string `json:"reason_pending"`
			JobsAhead     *int   `json:"jobs_ahead"`
		} `json:"sched"`
	} `json:"annotations"`
}

// TestDebugBits drives sched-simple loaded with mode=limited=3 through
// its debug bits, set with the sched-simple.debug RPC as flux-core's test
// suite sets them: 0x2 annotates pending jobs, 0x4 refuses expiration
// updates, 0x1 denies allocations.
func TestDebugBits(t *testing.T) {
	jm := &readyJM{ready: make(chan map[string]any, 1)}
	reg := module.NewRegistry()
	reg.Register(resource.Name, resource.New)
	reg.Register(Name, New)
	reg.Register("job-manager", func() module.Module { return jm })
	inst := brokertest.Start(t, brokertest.Options{
		Size: 1, Registry: reg,
		Attrs: map[string]string{"resource.config": `[{"hosts":"n0","cores":"0-1"}]`, "resource.monitor-force-up": "1"},
		Modules: []broker.ModuleSpec{{Name: resource.Name}, {Name: "job-manager"},
			{Name: Name, Args: []string{"mode=limited=3", "log-level=debug"}}},
	})
	select {
	case req := <-jm.ready:
		if req["mode"] != "limited" || req["limit"] != float64(3) {
			t.Fatalf("sched-ready %v, want limited mode, limit 3", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no sched-ready")
	}
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	debug := func(op string, flags int) (int, error) {
		var resp struct {
			Flags int `json:"flags"`
		}
		err := h.Call(ctx, Name+".debug", flux.NodeidAny, map[string]any{"op": op, "flags": flags}, &resp)
		return resp.Flags, err
	}
	if n, err := debug("setbit", debugAnnotateReasonPending); err != nil || n != 2 {
		t.Fatalf("setbit 0x2: %d %v", n, err)
	}
	if _, err := debug("clearbit", 1); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("op clearbit (flux-core's is clrbit): %v, want EPROTO", err)
	}
	oneCore, _ := jobspec.FromCommand([]string{"x"}, jobspec.CommandOptions{NTasks: 1})
	raw, _ := oneCore.MarshalJSON()
	alloc := func(id uint64) *flux.Future {
		f, err := h.RPC("sched.alloc", flux.NodeidAny, map[string]any{"id": id, "priority": 16, "userid": 0, "t_submit": float64(id), "jobspec": json.RawMessage(raw)}, flux.Streaming)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	next := func(f *flux.Future) debugAllocResp {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err := f.Next(c)
		if err != nil {
			t.Fatal(err)
		}
		var r debugAllocResp
		m.UnmarshalPayload(&r)
		return r
	}
	f1, f2 := alloc(1), alloc(2)
	for _, f := range []*flux.Future{f1, f2} {
		if r := next(f); r.Type != allocSuccess {
			t.Fatalf("job %d: %+v", r.ID, r)
		}
	}
	// two cores, both taken: jobs 3 and 4 wait, told why and their place
	f3, f4 := alloc(3), alloc(4)
	for i, f := range []*flux.Future{f3, f4} {
		r := next(f)
		if r.Type != allocAnnotate || r.Annotations.Sched.ReasonPending != "insufficient resources" ||
			r.Annotations.Sched.JobsAhead == nil || *r.Annotations.Sched.JobsAhead != i {
			t.Fatalf("pending job %d: %+v, want reason_pending and jobs_ahead %d", i+3, r, i)
		}
	}
	// cancelling job 3 moves job 4 to the head
	if _, err := h.RPC("sched.cancel", flux.NodeidAny, map[string]any{"id": 3}, flux.NoResponse); err != nil {
		t.Fatal(err)
	}
	if r := next(f3); r.Type != allocCancel {
		t.Fatalf("job 3 after cancel: %+v", r)
	}
	if r := next(f4); r.Type != allocAnnotate || r.Annotations.Sched.JobsAhead == nil || *r.Annotations.Sched.JobsAhead != 0 {
		t.Fatalf("job 4 after job 3's cancel: %+v", r)
	}

	// 0x4: expiration updates are refused
	if n, err := debug("set", debugExpirationDeny); err != nil || n != 4 {
		t.Fatalf("set 0x4: %d %v", n, err)
	}
	err := h.Call(ctx, "sched.expiration", flux.NodeidAny, map[string]any{"id": 1, "expiration": 0.0}, nil)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "Rejecting expiration update for testing") {
		t.Fatalf("sched.expiration with 0x4 set: %v", err)
	}
	if _, err := debug("clr", 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "sched.expiration", flux.NodeidAny, map[string]any{"id": 1, "expiration": 0.0}, nil); err != nil {
		t.Fatalf("sched.expiration with the bits clear: %v", err)
	}

	// 0x1: the pending job and a new one are denied
	if n, err := debug("setbit", debugFailAlloc); err != nil || n != 1 {
		t.Fatalf("setbit 0x1: %d %v", n, err)
	}
	f5 := alloc(5)
	for _, f := range []*flux.Future{f4, f5} {
		if r := next(f); r.Type != allocDeny || r.Note != "DEBUG_FAIL_ALLOC" {
			t.Fatalf("with 0x1 set: %+v, want a DEBUG_FAIL_ALLOC denial", r)
		}
	}
	if n, err := debug("clrbit", debugFailAlloc); err != nil || n != 0 {
		t.Fatalf("clrbit 0x1: %d %v", n, err)
	}
}
