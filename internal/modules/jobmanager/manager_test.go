package jobmanager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// fakeExec "runs" jobs: start, then finish with status from the job's
// urgency-free attribute, then release. Jobs named "sleep" wait for kill.
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
		cmd := req.Jobspec.Tasks[0].Command[0]
		switch cmd {
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
	t    *testing.T
	h    *flux.Handle
	kvs  *modtest.KVS
	gen  *jobid.Generator
	jour *flux.Future

	mu     sync.Mutex
	events map[jobid.ID][]string
	notify chan struct{}
}

func start(t *testing.T, hold bool, extra ...module.Module) *env {
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{Hold: hold} })
	reg.Register("job-exec", func() module.Module { return &fakeExec{} })
	mods := []broker.ModuleSpec{{Name: "kvs"}, {Name: "job-manager"}, {Name: "sched"}, {Name: "job-exec"}}
	for _, m := range extra {
		reg.Register(m.Name(), func() module.Module { return m })
		mods = append(mods, broker.ModuleSpec{Name: m.Name()})
	}
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg, Modules: mods})
	e := &env{t: t, h: inst.Handle(0), kvs: fk, events: map[jobid.ID][]string{}, notify: make(chan struct{}, 1)}
	e.gen, _ = jobid.NewGenerator(0, time.Now().Add(-time.Hour))
	f, err := e.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"full": true}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	e.jour = f
	go func() {
		for {
			m, err := f.Next(context.Background())
			if err != nil {
				return
			}
			id, names := entryNames(m)
			e.mu.Lock()
			for _, name := range names {
				if name != "annotations" {
					e.events[id] = append(e.events[id], name)
				}
			}
			e.mu.Unlock()
			select {
			case e.notify <- struct{}{}:
			default:
			}
		}
	}()
	return e
}

func jobspecFor(cmd string, extra map[string]any) json.RawMessage {
	sys := map[string]any{"duration": 0}
	for k, v := range extra {
		sys[k] = v
	}
	js := map[string]any{
		"version":    1,
		"resources":  []any{map[string]any{"type": "slot", "count": 1, "label": "task", "with": []any{map[string]any{"type": "core", "count": 1}}}},
		"tasks":      []any{map[string]any{"command": []string{cmd}, "slot": "task", "count": map[string]any{"per_slot": 1}}},
		"attributes": map[string]any{"system": sys},
	}
	b, _ := json.Marshal(js)
	return b
}

func (e *env) submit(cmd string, urgency int, extra map[string]any) jobid.ID {
	e.t.Helper()
	id, _ := e.gen.Next()
	req := map[string]any{"jobs": []any{map[string]any{
		"id": id, "userid": 0, "urgency": urgency, "t_submit": float64(time.Now().UnixNano()) / 1e9,
		"flags": flagWaitable, "jobspec": jobspecFor(cmd, extra),
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

// waitEvent waits until job id has posted event name.
func (e *env) waitEvent(id jobid.ID, name string) []string {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		e.mu.Lock()
		evs := append([]string(nil), e.events[id]...)
		e.mu.Unlock()
		for _, n := range evs {
			if n == name {
				return evs
			}
		}
		select {
		case <-e.notify:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			e.t.Fatalf("job %s: no %s event; saw %v", id.String(), name, evs)
		}
	}
}

func eq(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestJobRunsToInactive(t *testing.T) {
	e := start(t, false)
	id := e.submit("true", 16, nil)
	evs := e.waitEvent(id, "clean")
	if !eq(evs, "submit", "validate", "depend", "priority", "alloc", "start", "finish", "release", "free", "clean") {
		t.Fatalf("events: %v", evs)
	}
	// the eventlog in the KVS has the same events
	dothex, _ := id.Encode("dothex")
	log := string(e.kvs.Value("job." + dothex + ".eventlog"))
	if n := countLines(log); n != 9 { // submit is written by ingest
		t.Fatalf("kvs eventlog has %d lines:\n%s", n, log)
	}
	var w struct {
		Success bool   `json:"success"`
		Errstr  string `json:"errstr"`
	}
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.wait", flux.NodeidAny, map[string]any{"id": id}, &w); err != nil || !w.Success {
		t.Fatalf("wait: %v %+v", err, w)
	}
	fid := e.submit("false", 16, nil)
	e.waitEvent(fid, "clean")
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.wait", flux.NodeidAny, map[string]any{"id": fid}, &w); err != nil || w.Success {
		t.Fatalf("wait on failed job: %v %+v", err, w)
	}
}

func countLines(s string) int {
	n := 0
	for _, c := range s {
		if c == '\n' {
			n++
		}
	}
	return n
}

func TestCancelPendingAndRunning(t *testing.T) {
	e := start(t, true)
	id := e.submit("true", 16, nil)
	e.waitEvent(id, "priority")
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.raise", flux.NodeidAny, map[string]any{"id": id, "type": "cancel", "severity": 0, "note": ""}, nil); err != nil {
		t.Fatal(err)
	}
	evs := e.waitEvent(id, "clean")
	if !eq(evs, "submit", "validate", "depend", "priority", "exception", "clean") {
		t.Fatalf("events: %v", evs)
	}
	// raising on an inactive job is an error
	err := e.h.Call(brokertest.Ctx(t), "job-manager.raise", flux.NodeidAny, map[string]any{"id": id, "type": "cancel", "severity": 0}, nil)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("raise on inactive: %v", err)
	}
}

func TestCancelRunning(t *testing.T) {
	e := start(t, false)
	id := e.submit("sleep", 16, nil)
	e.waitEvent(id, "start")
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.raise", flux.NodeidAny, map[string]any{"id": id, "type": "cancel", "severity": 0}, nil); err != nil {
		t.Fatal(err)
	}
	evs := e.waitEvent(id, "clean")
	if !eq(evs, "submit", "validate", "depend", "priority", "alloc", "start", "exception", "finish", "release", "free", "clean") {
		t.Fatalf("events: %v", evs)
	}
}

func TestUrgencyHoldAndRelease(t *testing.T) {
	e := start(t, false)
	id := e.submit("true", 0, nil)
	e.waitEvent(id, "priority")
	time.Sleep(100 * time.Millisecond) // a window for events a held job must not get
	e.mu.Lock()
	n := len(e.events[id])
	e.mu.Unlock()
	if n != 4 {
		t.Fatalf("held job progressed: %v", e.events[id])
	}
	var resp struct {
		Old int `json:"old_urgency"`
	}
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.urgency", flux.NodeidAny, map[string]any{"id": id, "urgency": 16}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Old != 0 {
		t.Fatalf("old urgency %d", resp.Old)
	}
	evs := e.waitEvent(id, "clean")
	if !eq(evs, "submit", "validate", "depend", "priority", "urgency", "priority", "alloc", "start", "finish", "release", "free", "clean") {
		t.Fatalf("events: %v", evs)
	}
}

func TestDependencyAfterOK(t *testing.T) {
	e := start(t, false)
	first := e.submit("sleep", 16, nil)
	e.waitEvent(first, "start")
	second := e.submit("true", 16, map[string]any{"dependencies": []any{map[string]any{"scheme": "afterok", "value": first.String()}}})
	e.waitEvent(second, "dependency-add")
	failing := e.submit("true", 16, map[string]any{"dependencies": []any{map[string]any{"scheme": "afternotok", "value": first.String()}}})
	e.waitEvent(failing, "dependency-add")
	// end the first job successfully via kill with signal 0 status
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.kill", flux.NodeidAny, map[string]any{"id": first, "signum": 15}, nil); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(first, "clean")
	// first finished with status 15 -> failed: afterok can never be satisfied
	evs := e.waitEvent(second, "clean")
	if !eq(evs, "submit", "validate", "dependency-add", "exception", "clean") {
		t.Fatalf("afterok job events: %v", evs)
	}
	evs = e.waitEvent(failing, "clean")
	if !eq(evs[:5], "submit", "validate", "dependency-add", "dependency-remove", "depend") {
		t.Fatalf("afternotok job events: %v", evs)
	}
}

func TestAllocBypass(t *testing.T) {
	e := start(t, true) // the scheduler would hold everything
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.jobtap", flux.NodeidAny, map[string]any{"load": "alloc-bypass.so"}, nil); err != nil {
		t.Fatal(err)
	}
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["x"]}}`
	id := e.submit("true", 16, map[string]any{"alloc-bypass": map[string]any{"R": R}})
	evs := e.waitEvent(id, "clean")
	if !eq(evs, "submit", "set-flags", "validate", "depend", "priority", "alloc", "start", "finish", "release", "free", "clean") {
		t.Fatalf("events: %v", evs)
	}
	var list struct {
		Plugins []string `json:"plugins"`
	}
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.jobtap", flux.NodeidAny, map[string]any{"query_only": true}, &list); err != nil {
		t.Fatal(err)
	}
	// listed by the name it was loaded by, as flux-core lists the file
	if list.Plugins[len(list.Plugins)-1] != "alloc-bypass.so" {
		t.Fatalf("plugins: %v", list.Plugins)
	}
}

// The scheduler's annotations of a pending job are journal-only (never in
// the eventlog): a subscriber that comes after them (job-list loaded or
// reloaded late) finds them in the backlog.
func TestJournalBacklogCarriesAnnotations(t *testing.T) {
	e := start(t, true)
	id := e.submit("true", 16, nil)
	e.waitEvent(id, "priority")
	ctx := brokertest.Ctx(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := e.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"full": true}, flux.Streaming)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for {
			m, err := f.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ent struct {
				ID     int64 `json:"id"`
				Events []struct {
					Name    string          `json:"name"`
					Context json.RawMessage `json:"context"`
				} `json:"events"`
			}
			if err := m.UnmarshalPayload(&ent); err != nil {
				t.Fatal(err)
			}
			if ent.ID == -1 {
				break
			}
			for _, ev := range ent.Events {
				if jobid.ID(ent.ID) == id && ev.Name == "annotations" && strings.Contains(string(ev.Context), "held by test") {
					found = true
				}
			}
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the backlog of a new journal subscriber lacks the pending job's annotations")
		}
		time.Sleep(20 * time.Millisecond) // the scheduler may not have answered yet
	}
}

// TestLeanSpec: the job manager's parsed jobspec leaves out the
// environment, and jobs sharing a parsed jobspec share its lean copy.
func TestLeanSpec(t *testing.T) {
	m := newManager(nil, nil, 0)
	spec, err := jobspec.Parse([]byte(`{"version":1,"resources":[{"type":"slot","count":1,"label":"task",` +
		`"with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],` +
		`"attributes":{"system":{"duration":60,"environment":{"HOME":"/root"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	lean := m.leanSpec(spec)
	if _, ok := lean.Attributes.System["environment"]; ok {
		t.Fatal("lean jobspec kept the environment")
	}
	if d, _ := lean.Duration(); d != 60 {
		t.Fatalf("lean jobspec duration %v", d)
	}
	if _, ok := spec.Attributes.System["environment"]; !ok {
		t.Fatal("the original jobspec lost its environment")
	}
	if m.leanSpec(spec) != lean {
		t.Fatal("a second job with the same parsed jobspec got another copy")
	}
	bare, _ := jobspec.Parse([]byte(`{"version":1,"resources":[{"type":"slot","count":1,"label":"task",` +
		`"with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],` +
		`"attributes":{"system":{"duration":0}}}`))
	if m.leanSpec(bare) != bare {
		t.Fatal("a jobspec without environment was copied")
	}
}

// TestJournalAttached: a subscriber in the broker that asks for the
// journal attached gets, for every response, the same events, jobspec
// and R as the JSON payload a subscriber from outside gets.
func TestJournalAttached(t *testing.T) {
	tap := &journalTap{msgs: make(chan *flux.Message, 64), subscribed: make(chan struct{})}
	e := start(t, false, tap)
	ctx := brokertest.Ctx(t)
	pay, err := e.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	<-tap.subscribed
	id := e.submit("true", 16, nil)
	type ev struct {
		Timestamp float64         `json:"timestamp"`
		Name      string          `json:"name"`
		Context   json.RawMessage `json:"context"`
	}
	type summary struct {
		events     []ev
		jobspec, R string
	}
	read := func(f *flux.Future, attached bool) summary {
		var s summary
		for len(s.events) == 0 || s.events[len(s.events)-1].Name != "clean" {
			var m *flux.Message
			var err error
			if attached {
				select {
				case m = <-tap.msgs:
				case <-ctx.Done():
					err = ctx.Err()
				}
			} else {
				m, err = f.Next(ctx)
			}
			if err != nil {
				t.Fatalf("attached=%v: %v (saw %v)", attached, err, s.events)
			}
			var ent struct {
				ID      jobid.ID        `json:"id"`
				Events  []ev            `json:"events"`
				Jobspec json.RawMessage `json:"jobspec"`
				R       json.RawMessage `json:"R"`
			}
			if attached {
				a, ok := m.Attached.(*wire.JournalEntry)
				if !ok || len(m.Payload) > 0 {
					t.Fatalf("attached subscriber got %T and payload %q", m.Attached, m.Payload)
				}
				ent.ID, ent.Jobspec, ent.R = a.ID, a.Jobspec, a.R
				for _, x := range a.Events {
					ent.Events = append(ent.Events, ev{x.Timestamp, x.Name, x.Context})
				}
			} else {
				if m.Attached != nil {
					t.Fatalf("payload subscriber got an attachment %T", m.Attached)
				}
				if err := m.UnmarshalPayload(&ent); err != nil {
					t.Fatal(err)
				}
			}
			if ent.ID != id {
				continue
			}
			for _, x := range ent.Events {
				if x.Name != "annotations" {
					s.events = append(s.events, x)
				}
			}
			if len(ent.Jobspec) > 0 {
				s.jobspec = string(ent.Jobspec)
			}
			if len(ent.R) > 0 {
				s.R = string(ent.R)
			}
		}
		return s
	}
	a, p := read(nil, true), read(pay, false)
	if len(a.events) != len(p.events) || a.jobspec != p.jobspec || a.R != p.R || a.jobspec == "" || a.R == "" {
		t.Fatalf("attached %+v\npayload %+v", a, p)
	}
	for i := range a.events {
		x, y := a.events[i], p.events[i]
		if x.Name != y.Name || x.Timestamp != y.Timestamp || !bytes.Equal(x.Context, y.Context) {
			t.Fatalf("event %d: attached %+v, payload %+v", i, x, y)
		}
	}
}

// journalTap is a module that subscribes to the journal attached, as
// job-list does, and hands over what it receives.
type journalTap struct {
	msgs       chan *flux.Message
	subscribed chan struct{}
}

func (*journalTap) Name() string { return "journal-tap" }

func (jt *journalTap) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	f, err := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"attached": true}, flux.Streaming)
	if err != nil {
		return err
	}
	f.Then(func(m *flux.Message, err error) {
		if err == nil {
			jt.msgs <- m
		}
	})
	// the subscription is in once the job manager answers a later
	// request from this module (requests are handled in order)
	go func() {
		h.Call(ctx, "job-manager.stats-get", flux.NodeidAny, nil, nil)
		close(jt.subscribed)
	}()
	return h.Serve(ctx)
}

// TestJournalTwoStreamsOneClient: a client may follow the journal twice
// at once; the second stream does not replace the first.
func TestJournalTwoStreamsOneClient(t *testing.T) {
	e := start(t, false) // e.h follows the journal already
	f, err := e.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	id := e.submit("true", 16, nil)
	e.waitEvent(id, "clean") // the first stream
	ctx := brokertest.Ctx(t)
	for {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("second stream: %v", err)
		}
		if got, names := entryNames(m); got == id && slices.Contains(names, "clean") {
			return
		}
	}
}

// entryNames reads a journal response's job id and event names.
func entryNames(m *flux.Message) (jobid.ID, []string) {
	var ent struct {
		ID     jobid.ID `json:"id"`
		Events []struct {
			Name string `json:"name"`
		} `json:"events"`
	}
	m.UnmarshalPayload(&ent)
	names := make([]string, len(ent.Events))
	for i, ev := range ent.Events {
		names[i] = ev.Name
	}
	return ent.ID, names
}

// TestJournalFilter: flux-core's allow and deny lists of event names
// choose what a subscriber gets; the jobspec comes only with submit.
func TestJournalFilter(t *testing.T) {
	e := start(t, false)
	ctx := brokertest.Ctx(t)
	if err := e.h.Call(ctx, "job-manager.events-journal", flux.NodeidAny, map[string]any{"allow": []string{"clean"}}, nil); !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "allow") {
		t.Fatalf("allow given as a list: %v", err)
	}
	held := e.submit("true", 0, nil) // pending: in the backlog
	type entry struct {
		ID     int64 `json:"id"` // -1: the end of the backlog
		Events []struct {
			Name string `json:"name"`
		} `json:"events"`
		Jobspec json.RawMessage `json:"jobspec"`
	}
	follow := func(req map[string]any) *flux.Future {
		f, err := e.h.RPC("job-manager.events-journal", flux.NodeidAny, req, flux.Streaming)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// read collects a stream's event names for job id until its clean
	read := func(f *flux.Future, id jobid.ID) (names []string, jobspec bool) {
		for {
			m, err := f.Next(ctx)
			if err != nil {
				t.Fatalf("%v (saw %v)", err, names)
			}
			var ent entry
			if err := m.UnmarshalPayload(&ent); err != nil {
				t.Fatal(err)
			}
			if ent.ID != int64(id) {
				continue
			}
			jobspec = jobspec || len(ent.Jobspec) > 0
			for _, ev := range ent.Events {
				names = append(names, ev.Name)
				if ev.Name == "clean" {
					return names, jobspec
				}
			}
		}
	}
	backlog := follow(map[string]any{"full": true, "allow": map[string]int{"submit": 1}})
	for {
		m, err := backlog.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ent entry
		m.UnmarshalPayload(&ent)
		if ent.ID == -1 {
			t.Fatal("the backlog lacks the pending job's submit")
		}
		if ent.ID == int64(held) {
			if len(ent.Events) != 1 || ent.Events[0].Name != "submit" || len(ent.Jobspec) == 0 {
				t.Fatalf("backlog allowing submit: %+v", ent)
			}
			break
		}
	}
	clean := follow(map[string]any{"allow": map[string]int{"clean": 1}})
	noAlloc := follow(map[string]any{"deny": map[string]int{"alloc": 1, "annotations": 1}})
	id := e.submit("true", 16, nil)
	if names, js := read(clean, id); !eq(names, "clean") || js {
		t.Fatalf("allow clean: %v (jobspec %v)", names, js)
	}
	if names, js := read(noAlloc, id); !eq(names, "submit", "validate", "depend", "priority", "start", "finish", "release", "free", "clean") || !js {
		t.Fatalf("deny alloc: %v (jobspec %v)", names, js)
	}
}

// TestReallocUnsupported: a scheduler without sched.realloc makes
// job-manager.realloc answer UNSUPPORTED (RFC 51), and a request without
// spec_add or spec_sub is refused naming the keys.
func TestReallocUnsupported(t *testing.T) {
	e := start(t, false)
	id := e.submit("sleep", 16, nil)
	e.waitEvent(id, "start")
	spec := jobspecFor("realloc", nil)
	var resp fluxjob.ReallocResponse
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.realloc", flux.NodeidAny, map[string]any{"id": id, "spec_add": spec}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Type != fluxjob.ReallocUnsupported {
		t.Errorf("realloc with a scheduler that has none: %+v, want UNSUPPORTED", resp)
	}
	err := e.h.Call(brokertest.Ctx(t), "job-manager.realloc", flux.NodeidAny, map[string]any{"id": id}, nil)
	if err == nil || !strings.Contains(err.Error(), "at least one of spec_add and spec_sub") {
		t.Errorf("realloc without spec_add or spec_sub: %v", err)
	}
}
