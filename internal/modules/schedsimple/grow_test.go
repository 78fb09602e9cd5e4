package schedsimple

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestGrowAndShrink: a job waiting for cores starts on nodes the
// resource module adds (resource.grow), a node nobody uses leaves the
// pool (resource.shrink) and one a job holds stays.
func TestGrowAndShrink(t *testing.T) {
	jm := &helloJM{ready: make(chan struct{})} // job 99 holds rank 0
	reg := module.NewRegistry()
	reg.Register(resource.Name, resource.New)
	reg.Register(Name, New)
	reg.Register("job-manager", func() module.Module { return jm })
	inst := brokertest.Start(t, brokertest.Options{
		Size: 1, Registry: reg,
		Attrs: map[string]string{"resource.config": `[{"hosts":"n0","cores":"0-1"}]`, "resource.monitor-force-up": "1"},
		Modules: []broker.ModuleSpec{{Name: resource.Name}, {Name: "job-manager"},
			{Name: Name, Args: []string{"alloc-mode=first-fit"}}},
	})
	select {
	case <-jm.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no sched-ready")
	}
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	status := func() (all, allocated *rset.R) {
		t.Helper()
		var st struct{ All, Down, Allocated json.RawMessage }
		if err := h.Call(ctx, "sched.resource-status", flux.NodeidAny, nil, &st); err != nil {
			t.Fatal(err)
		}
		all, _ = rset.Parse(st.All)
		allocated, _ = rset.Parse(st.Allocated)
		return all, allocated
	}
	js, _ := jobspec.FromCommand([]string{"x"}, jobspec.CommandOptions{NTasks: 3})
	raw, _ := js.MarshalJSON()
	// three cores: more than the instance has, so denied now
	f, err := h.RPC("sched.alloc", flux.NodeidAny, map[string]any{"id": 1, "priority": 16, "userid": 0, "t_submit": 1.0, "jobspec": json.RawMessage(raw)}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	next := func(f *flux.Future) allocResp {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := f.Next(c)
		if err != nil {
			t.Fatal(err)
		}
		var r allocResp
		m.UnmarshalPayload(&r)
		return r
	}
	if r := next(f); r.Type != allocDeny {
		t.Fatalf("3 cores of 2: %+v", r)
	}
	// three nodes of two cores join; the job fits now, and waits for
	// them to come up (force-up: at once)
	grow := `{"version":1,"execution":{"R_lite":[{"rank":"1-3","children":{"core":"0-1"}}],"nodelist":["n[1-3]"]}}`
	if err := h.Call(ctx, "resource.grow", 0, map[string]any{"R": json.RawMessage(grow)}, nil); err != nil {
		t.Fatal(err)
	}
	// the scheduler hears of changes on its acquire stream, after the
	// call's answer: wait for its view
	waitAll := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for all, _ := status(); all.Ranks().String() != want; all, _ = status() {
			if time.Now().After(deadline) {
				t.Fatalf("scheduler inventory %s, want %s", all.Ranks(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAll("0-3")
	f, err = h.RPC("sched.alloc", flux.NodeidAny, map[string]any{"id": 2, "priority": 16, "userid": 0, "t_submit": 2.0, "jobspec": json.RawMessage(raw)}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	r := next(f)
	for r.Type == allocAnnotate {
		r = next(f)
	}
	if r.Type != allocSuccess || r.Annotations.Sched.Summary != "rank1/core[0-1] rank2/core0" {
		t.Fatalf("job 2 on grown nodes: %+v", r)
	}
	// rank 3 is free: it leaves once drained
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "2-3"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "resource.shrink", 0, map[string]any{"ranks": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	waitAll("0-2")
	// rank 2 is held by job 2: the resource module lets it go, the pool
	// refuses (an error in the log) and keeps it; the expiration update
	// behind it on the stream says when the shrink has been seen
	if err := h.Call(ctx, "resource.shrink", 0, map[string]any{"ranks": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "resource.expiration-update", 0, map[string]any{"expiration": 4e9}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for all, _ := status(); all.Expiration() != 4e9; all, _ = status() {
		if time.Now().After(deadline) {
			t.Fatal("the scheduler never saw the expiration update")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if all, allocated := status(); all.Ranks().String() != "0-2" || allocated.String() != "rank[0-1]/core[0-1] rank2/core0" {
		t.Fatalf("after a refused shrink: all %s allocated %s", all.Ranks(), allocated)
	}
}
