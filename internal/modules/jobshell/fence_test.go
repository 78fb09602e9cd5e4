package jobshell

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	contentmod "github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/jobexec"
	"github.com/fluxgo/fluxgo/internal/modules/jobingest"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// TestFence: job-shell.fence (what a broker cut off from its parent
// sends) kills the tasks of the running job on its node and names it;
// the job then ends killed, and a second fence finds nothing to kill.
func TestFence(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["a"]}}`
	reg := module.NewRegistry()
	reg.Register(contentmod.Name, contentmod.New)
	reg.Register("kvs", func() module.Module { return modtest.NewKVS() })
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{R: R} })
	reg.Register("job-exec", jobexec.New)
	reg.Register("job-ingest", jobingest.New)
	reg.Register("job-shell", New)
	mods := []broker.ModuleSpec{{Name: contentmod.Name}, {Name: "kvs"}, {Name: "job-manager"}, {Name: "sched"},
		{Name: "job-shell"}, {Name: "job-exec"}, {Name: "job-ingest"}}
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg, Modules: mods, Attrs: shellAttrs(t, nil)})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	js, err := jobspec.FromCommand([]string{"sleep", "300"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	b, _ := json.Marshal(js)
	journal, err := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		ID jobid.ID `json:"id"`
	}
	if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": sign.Wrap(b, 0)}, &sub); err != nil {
		t.Fatal(err)
	}
	// waitFor reads the journal up to the job's event name and returns
	// that event's context
	waitFor := func(name string) map[string]any {
		for {
			m, err := journal.Next(ctx)
			if err != nil {
				t.Fatalf("journal, waiting for %s: %v", name, err)
			}
			var e struct {
				ID     jobid.ID `json:"id"`
				Events []struct {
					Name    string         `json:"name"`
					Context map[string]any `json:"context"`
				} `json:"events"`
			}
			m.UnmarshalPayload(&e)
			for _, ev := range e.Events {
				if e.ID == sub.ID && ev.Name == name {
					return ev.Context
				}
			}
		}
	}
	waitFor("start")
	var resp wire.JobShellFenceResponse
	if err := h.Call(ctx, wire.JobShellFence, 0, wire.JobShellFenceRequest{Reason: "test"}, &resp); err != nil {
		t.Fatal(err)
	}
	if want := []string{sub.ID.String()}; !slices.Equal(resp.Jobs, want) {
		t.Errorf("fence killed %v, want %v", resp.Jobs, want)
	}
	fin := waitFor("finish")
	// killed by SIGKILL: the wait status of the signal, or the shell's
	// exit code for it (128+9)
	if st, _ := fin["status"].(float64); int(st)&0x7f != 9 && int(st)>>8 != 128+9 {
		t.Errorf("the fenced job finished with status %v, want killed by SIGKILL (9)", fin["status"])
	}
	waitFor("clean")
	if err := h.Call(ctx, wire.JobShellFence, 0, wire.JobShellFenceRequest{Reason: "again"}, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Jobs) != 0 {
		t.Errorf("a second fence killed %v, want none", resp.Jobs)
	}
}
