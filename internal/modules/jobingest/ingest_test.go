package jobingest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
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

func setup(t *testing.T, extra ...module.Module) (*flux.Handle, *modtest.KVS) {
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register(contentmod.Name, contentmod.New)
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{} })
	reg.Register("job-exec", jobexec.New)
	reg.Register("job-ingest", New)
	mods := []broker.ModuleSpec{{Name: contentmod.Name}, {Name: "kvs"}, {Name: "job-manager"}, {Name: "sched"}, {Name: "job-exec"}}
	for _, m := range extra {
		reg.Register(m.Name(), func() module.Module { return m })
		mods = append(mods, broker.ModuleSpec{Name: m.Name()})
	}
	mods = append(mods, broker.ModuleSpec{Name: "job-ingest"})
	inst := brokertest.Start(t, brokertest.Options{Registry: reg, Modules: mods})
	return inst.Handle(0), fk
}

// feasibility is a stand-in feasibility service: every jobspec is
// feasible except one whose command is "nope"; it counts the requests.
type feasibility struct {
	mu    sync.Mutex
	asked int
}

func (*feasibility) Name() string { return "feasibility" }
func (f *feasibility) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("feasibility.check", func(r *flux.Request) {
		f.mu.Lock()
		f.asked++
		f.mu.Unlock()
		if strings.Contains(string(r.Msg.JSON()), `"nope"`) {
			r.Errorf(syscall.EINVAL, "unsatisfiable request")
			return
		}
		r.Respond(nil)
	})
	return h.Serve(ctx)
}

func (f *feasibility) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}

// TestFeasibilityRemembered: a jobspec found feasible is not checked
// again for a while (the jobs of a burst share it); an infeasible one is
// refused every time; a configuration reload forgets the answers.
func TestFeasibilityRemembered(t *testing.T) {
	fs := &feasibility{}
	h, _ := setup(t, fs)
	ctx := brokertest.Ctx(t)
	J := sign.Wrap(jobspecJSON(t, true), 0)
	submit := func(J string) error {
		return h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": J, "urgency": 16, "flags": 0}, nil)
	}
	for i := 0; i < 5; i++ {
		if err := submit(J); err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.count(); n != 1 {
		t.Fatalf("5 identical submissions asked the scheduler %d times, want 1", n)
	}
	js, err := jobspec.FromCommand([]string{"nope"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(js)
	for i := 0; i < 2; i++ {
		if err := submit(sign.Wrap(b, 0)); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "unsatisfiable") {
			t.Fatalf("infeasible job: %v", err)
		}
	}
	if n := fs.count(); n != 3 {
		t.Fatalf("scheduler asked %d times, want 3 (an infeasible answer is not remembered)", n)
	}
	if err := h.Call(ctx, "job-ingest.config-reload", flux.NodeidAny, map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := submit(J); err != nil {
		t.Fatal(err)
	}
	if n := fs.count(); n != 4 {
		t.Fatalf("after a configuration reload the scheduler was asked %d times in all, want 4", n)
	}
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

// TestJobRecordedWithItsFirstEvents: the job manager writes a submitted
// job's J, jobspec and eventlog in one commit with its first events, and
// the submitter has its ID only once that commit is done. A job the job
// manager refuses is never written.
func TestJobRecordedWithItsFirstEvents(t *testing.T) {
	h, fk := setup(t)
	ctx := brokertest.Ctx(t)
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	J := sign.Wrap(jobspecJSON(t, true), 0)
	if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": J, "urgency": 0, "flags": 0}, &resp); err != nil {
		t.Fatal(err)
	}
	dothex, _ := resp.ID.Encode("dothex")
	dir := "job." + dothex + "."
	// answered: the records are there already
	if got := string(fk.Value(dir + "J")); got != J {
		t.Fatalf("J in the KVS when the ID was given: %q", got)
	}
	var first []string
	for _, keys := range fk.Commits() {
		if slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, dir) }) {
			first = keys
			break
		}
	}
	for _, k := range []string{"J", "jobspec", "eventlog"} {
		if !slices.Contains(first, dir+k) {
			t.Fatalf("first commit of the job %v lacks %s", first, k)
		}
	}
	if n := strings.Count(string(fk.Value(dir+"eventlog")), "\n"); n < 4 {
		t.Fatalf("eventlog of the held job has %d events, want submit validate depend priority:\n%s", n, fk.Value(dir+"eventlog"))
	}

	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	js.SetDependencies([]jobspec.Dependency{{Scheme: "afterok", Value: "123456789"}})
	b, _ := json.Marshal(js)
	err = h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": sign.Wrap(b, 0), "urgency": 16, "flags": 0}, nil)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("job with a dependency on an unknown job: %v", err)
	}
	for _, keys := range fk.Commits() {
		for _, k := range keys {
			if strings.HasPrefix(k, "job.") && !strings.HasPrefix(k, dir) {
				t.Fatalf("a refused job was written: %s", k)
			}
		}
	}
}
