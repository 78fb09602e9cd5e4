package jobingest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	contentmod "github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/jobexec"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func setup(t *testing.T) (*flux.Handle, *modtest.KVS) {
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register(contentmod.Name, contentmod.New)
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{} })
	reg.Register("job-exec", jobexec.New)
	reg.Register("job-ingest", New)
	mods := []broker.ModuleSpec{{Name: contentmod.Name}, {Name: "kvs"}, {Name: "job-manager"}, {Name: "sched"}, {Name: "job-exec"}, {Name: "job-ingest"}}
	inst := brokertest.Start(t, brokertest.Options{Registry: reg, Modules: mods})
	return inst.Handle(0), fk
}

func jobspecJSON(t *testing.T, test bool) []byte {
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	if test {
		js.SetAttribute("system.exec.test", map[string]any{"run_duration": "0.01s"})
	}
	b, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSubmitRunsJob(t *testing.T) {
	h, fk := setup(t)
	ctx := brokertest.Ctx(t)
	f, err := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	J := sign.Wrap(jobspecJSON(t, true), 0)
	if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": J, "urgency": 16, "flags": 0}, &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for len(names) == 0 || names[len(names)-1] != "clean" {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("journal: %v (saw %v)", err, names)
		}
		var e struct {
			ID     jobid.ID `json:"id"`
			Events []struct {
				Name string `json:"name"`
			} `json:"events"`
		}
		m.UnmarshalPayload(&e)
		if e.ID != resp.ID {
			continue
		}
		for _, ev := range e.Events {
			if ev.Name != "annotations" {
				names = append(names, ev.Name)
			}
		}
	}
	want := "submit validate depend priority alloc start finish release free clean"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	dothex, _ := resp.ID.Encode("dothex")
	if got := string(fk.Value("job." + dothex + ".J")); got != J {
		t.Fatalf("J in KVS differs")
	}
	if !strings.Contains(string(fk.Value("job."+dothex+".eventlog")), `"name":"submit"`) {
		t.Fatal("no submit event in KVS")
	}
}

func TestSubmitErrors(t *testing.T) {
	h, _ := setup(t)
	ctx := context.Background()
	good := jobspecJSON(t, true)
	cases := []struct {
		name string
		req  map[string]any
		want syscall.Errno
		text string
	}{
		{"bad J", map[string]any{"J": "junk"}, syscall.EINVAL, "HEADER.PAYLOAD.SIGNATURE"},
		{"other user", map[string]any{"J": sign.Wrap(good, 42)}, syscall.EPERM, "signer userid 42"},
		{"bad jobspec", map[string]any{"J": sign.Wrap([]byte(`{"version":1,"resources":[],"tasks":[]}`), 0)}, syscall.EINVAL, "resources"},
		{"urgency", map[string]any{"J": sign.Wrap(good, 0), "urgency": 40}, syscall.EINVAL, "urgency 40"},
		{"flags", map[string]any{"J": sign.Wrap(good, 0), "flags": 0x1000}, syscall.EINVAL, "flags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, tc.req, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.text)
			}
		})
	}
}
