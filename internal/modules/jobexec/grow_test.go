package jobexec

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// fakeShells stands in for the job-shell module on every broker: it
// counts job-shell.start requests per rank and holds the leader's
// "start" answer until release is closed.
type fakeShells struct {
	mu      sync.Mutex
	starts  map[string]int
	release chan struct{}
}

type fakeShell struct{ f *fakeShells }

func (*fakeShell) Name() string { return "job-shell" }

func (s *fakeShell) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	rank, err := h.Attr(ctx, "rank")
	if err != nil {
		return err
	}
	h.HandleFunc("job-shell.start", func(r *flux.Request) {
		s.f.mu.Lock()
		s.f.starts[rank]++
		s.f.mu.Unlock()
		go func() {
			if rank == "0" {
				<-s.f.release
			}
			r.Respond(map[string]any{"type": "start", "exec": ""})
		}()
	})
	h.HandleFunc("job-shell.grow", func(r *flux.Request) { r.Respond(map[string]any{}) })
	return h.Serve(ctx)
}

// TestGrowBeforeLeaderStarts: a job whose first task asks for more
// nodes at once can be grown before job-exec has heard its leader shell
// start (CI caught it: TestReallocShell). The new nodes' shells are
// started once, by the growth, not again as the rest of the first plan.
func TestGrowBeforeLeaderStarts(t *testing.T) {
	f := &fakeShells{starts: map[string]int{}, release: make(chan struct{})}
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return modtest.NewKVS() })
	reg.Register("job-shell", func() module.Module { return &fakeShell{f} })
	reg.Register("job-exec", New)
	inst := brokertest.Start(t, brokertest.Options{Size: 3, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs", Ranks: "0"}, {Name: "job-shell"}, {Name: "job-exec", Ranks: "0"}}})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":1,"expiration":0}}`
	jobspec := `{"version":1,"resources":[{"type":"node","count":1,"with":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]}],` +
		`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}`
	start, err := h.RPC("job-exec.start", flux.NodeidAny, []byte(`{"id":42,"userid":0,"flags":0,"jobspec":`+jobspec+`,"R":`+R+`}`), flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	defer start.Close()
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.starts["0"] == 1 })
	add := `{"version":1,"execution":{"R_lite":[{"rank":"1-2","children":{"core":"0"}}],"starttime":1,"expiration":0}}`
	all := `{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0"}}],"starttime":1,"expiration":0}}`
	if err := h.Call(ctx, "job-exec.grow", flux.NodeidAny, []byte(`{"id":42,"R_delta_add":`+add+`,"R":`+all+`}`), nil); err != nil {
		t.Fatal(err)
	}
	close(f.release)
	time.Sleep(200 * time.Millisecond) // the leader's start is handled; nothing more may come
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rank := range []string{"0", "1", "2"} {
		if f.starts[rank] != 1 {
			t.Errorf("rank %s: %d job-shell.start requests, want 1 (all: %v)", rank, f.starts[rank], f.starts)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
