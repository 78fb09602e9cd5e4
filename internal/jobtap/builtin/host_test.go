package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// testHost is an in-memory jobtap.Host for plugin unit tests. It records
// every call a plugin makes, holds jobs by id, runs AfterFunc callbacks
// on a manual clock the test advances, and hands each Exec to the test as
// a testProc to finish. Nothing runs in the background: a callback runs
// only when the test advances the clock, finishes a process or completes
// a drain.
type testHost struct {
	t     *testing.T
	owner uint32

	jobs      map[jobid.ID]*jobtap.Job
	aux       map[jobid.ID]map[string]any
	rs        map[jobid.ID]json.RawMessage
	hostnames map[uint]string
	deps      map[jobid.ID]map[string]bool

	// calls is every recorded call in order, as text (see record), so a
	// test can check the order of exceptions and events.
	calls      []string
	events     []postedEvent
	exceptions []raisedException
	added      []depCall
	removed    []depCall
	reprio     []jobid.ID

	now    time.Duration
	timers []*testTimer

	procs   []*testProc
	execErr func(rank uint) error // nil: every Exec succeeds
	drains  []*testDrain

	logs *testLog
}

type postedEvent struct {
	ID      jobid.ID
	Name    string
	Context map[string]any
}

type raisedException struct {
	ID       jobid.ID
	Type     string
	Severity int
	Note     string
}

type depCall struct {
	ID   jobid.ID
	Desc string
}

type testTimer struct {
	at      time.Duration
	fn      func()
	stopped bool
	fired   bool
}

// testProc is a process started with Exec; the test ends it.
type testProc struct {
	h       *testHost
	Rank    uint
	Argv    []string
	Env     map[string]string
	ev      jobtap.ExecEvents
	Signals []syscall.Signal
	exited  bool
}

// testDrain is a Drain call; the test completes it with finish.
type testDrain struct {
	Ranks, Reason string
	done          func(error)
	finished      bool
}

var _ jobtap.Host = (*testHost)(nil)

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	return &testHost{
		t:         t,
		jobs:      make(map[jobid.ID]*jobtap.Job),
		aux:       make(map[jobid.ID]map[string]any),
		rs:        make(map[jobid.ID]json.RawMessage),
		hostnames: make(map[uint]string),
		deps:      make(map[jobid.ID]map[string]bool),
		logs:      &testLog{},
	}
}

func (h *testHost) record(format string, args ...any) {
	h.calls = append(h.calls, fmt.Sprintf(format, args...))
}

// addJob stores j (a copy) so that Job finds it, and returns the copy.
func (h *testHost) addJob(j *jobtap.Job) *jobtap.Job {
	c := *j
	h.jobs[j.ID] = &c
	return &c
}

// setJob updates the stored job with f and returns a copy of the result,
// as the job manager hands plugins a fresh view.
func (h *testHost) setJob(id jobid.ID, f func(*jobtap.Job)) *jobtap.Job {
	h.t.Helper()
	j, ok := h.jobs[id]
	if !ok {
		h.t.Fatalf("setJob: no job %s", id)
	}
	f(j)
	c := *j
	return &c
}

// PostEvent implements jobtap.Host.
func (h *testHost) PostEvent(id jobid.ID, name string, ctx map[string]any) error {
	h.record("event %s %s", id, name)
	h.events = append(h.events, postedEvent{id, name, ctx})
	return nil
}

// RaiseException implements jobtap.Host.
func (h *testHost) RaiseException(id jobid.ID, typ string, severity int, note string) error {
	h.record("exception %s %s %d %s", id, typ, severity, note)
	h.exceptions = append(h.exceptions, raisedException{id, typ, severity, note})
	return nil
}

// AddDependency implements jobtap.Host; like the job manager it refuses
// a description the job already has.
func (h *testHost) AddDependency(id jobid.ID, desc string) error {
	h.record("dependency-add %s %s", id, desc)
	if h.deps[id][desc] {
		return fmt.Errorf("dependency %q already exists: %w", desc, syscall.EEXIST)
	}
	if h.deps[id] == nil {
		h.deps[id] = make(map[string]bool)
	}
	h.deps[id][desc] = true
	h.added = append(h.added, depCall{id, desc})
	return nil
}

// RemoveDependency implements jobtap.Host; like the job manager it
// refuses a description the job does not have.
func (h *testHost) RemoveDependency(id jobid.ID, desc string) error {
	h.record("dependency-remove %s %s", id, desc)
	h.removed = append(h.removed, depCall{id, desc})
	if !h.deps[id][desc] {
		return fmt.Errorf("dependency %q not found: %w", desc, syscall.ENOENT)
	}
	delete(h.deps[id], desc)
	return nil
}

// Reprioritize implements jobtap.Host.
func (h *testHost) Reprioritize(id jobid.ID) {
	h.record("reprioritize %s", id)
	h.reprio = append(h.reprio, id)
}

// Job implements jobtap.Host: a copy of the stored job.
func (h *testHost) Job(id jobid.ID) (*jobtap.Job, bool) {
	j, ok := h.jobs[id]
	if !ok {
		return nil, false
	}
	c := *j
	return &c, true
}

// SetAux implements jobtap.Host.
func (h *testHost) SetAux(id jobid.ID, key string, v any) {
	if h.aux[id] == nil {
		h.aux[id] = make(map[string]any)
	}
	h.aux[id][key] = v
}

// Aux implements jobtap.Host.
func (h *testHost) Aux(id jobid.ID, key string) any { return h.aux[id][key] }

// AfterFunc implements jobtap.Host on the manual clock.
func (h *testHost) AfterFunc(d time.Duration, fn func()) func() bool {
	tm := &testTimer{at: h.now + d, fn: fn}
	h.timers = append(h.timers, tm)
	return func() bool {
		if tm.stopped || tm.fired {
			return false
		}
		tm.stopped = true
		return true
	}
}

// advance moves the clock on by d, running the timers that come due in
// order (a timer a callback arms runs too if it is due by then).
func (h *testHost) advance(d time.Duration) {
	end := h.now + d
	for {
		var next *testTimer
		for _, tm := range h.timers {
			if !tm.stopped && !tm.fired && tm.at <= end && (next == nil || tm.at < next.at) {
				next = tm
			}
		}
		if next == nil {
			break
		}
		h.now = next.at
		next.fired = true
		next.fn()
	}
	h.now = end
}

// pendingTimers counts the timers neither stopped nor fired.
func (h *testHost) pendingTimers() int {
	n := 0
	for _, tm := range h.timers {
		if !tm.stopped && !tm.fired {
			n++
		}
	}
	return n
}

// Owner implements jobtap.Host.
func (h *testHost) Owner() uint32 { return h.owner }

// Log implements jobtap.Host.
func (h *testHost) Log() *slog.Logger { return slog.New(h.logs) }

// R implements jobtap.Host.
func (h *testHost) R(id jobid.ID) json.RawMessage { return h.rs[id] }

// Hostname implements jobtap.Host: "node<rank>" unless set.
func (h *testHost) Hostname(rank uint) string {
	if n, ok := h.hostnames[rank]; ok {
		return n
	}
	return fmt.Sprintf("node%d", rank)
}

// Exec implements jobtap.Host: it records the process for the test to
// end, or fails as execErr says.
func (h *testHost) Exec(rank uint, argv []string, env map[string]string, ev jobtap.ExecEvents) (jobtap.Proc, error) {
	h.record("exec %d %s", rank, strings.Join(argv, " "))
	if h.execErr != nil {
		if err := h.execErr(rank); err != nil {
			return nil, err
		}
	}
	p := &testProc{h: h, Rank: rank, Argv: append([]string(nil), argv...), Env: env, ev: ev}
	h.procs = append(h.procs, p)
	return p, nil
}

// Drain implements jobtap.Host: recorded; the test completes it.
func (h *testHost) Drain(ranks, reason string, done func(error)) {
	h.record("drain %s %s", ranks, reason)
	h.drains = append(h.drains, &testDrain{Ranks: ranks, Reason: reason, done: done})
}

func (d *testDrain) String() string { return fmt.Sprintf("{%s %q}", d.Ranks, d.Reason) }

// finish completes a drain with err.
func (d *testDrain) finish(t *testing.T, err error) {
	t.Helper()
	if d.finished {
		t.Fatalf("drain %s finished twice", d.Ranks)
	}
	d.finished = true
	d.done(err)
}

// Signal implements jobtap.Proc.
func (p *testProc) Signal(sig syscall.Signal) {
	p.h.record("signal %d %d", p.Rank, sig)
	p.Signals = append(p.Signals, sig)
}

// output delivers a line of output.
func (p *testProc) output(stream, line string) {
	if p.ev.Output != nil {
		p.ev.Output(stream, line)
	}
}

// exit ends the process with a wait status.
func (p *testProc) exit(t *testing.T, status int) {
	t.Helper()
	if p.exited {
		t.Fatalf("process on rank %d exited twice", p.Rank)
	}
	p.exited = true
	p.ev.Done(status, nil)
}

// fail ends the process with the error that kept it from running.
func (p *testProc) fail(t *testing.T, err error) {
	t.Helper()
	p.exited = true
	p.ev.Done(0, err)
}

// proc returns the process started on rank (the last one if several).
func (h *testHost) proc(rank uint) *testProc {
	h.t.Helper()
	for i := len(h.procs) - 1; i >= 0; i-- {
		if h.procs[i].Rank == rank {
			return h.procs[i]
		}
	}
	h.t.Fatalf("no process was started on rank %d (calls: %q)", rank, h.calls)
	return nil
}

// eventNames lists the names of the events posted to id.
func (h *testHost) eventNames(id jobid.ID) []string {
	var out []string
	for _, e := range h.events {
		if e.ID == id {
			out = append(out, e.Name)
		}
	}
	return out
}

// event returns the last event called name posted to id.
func (h *testHost) event(id jobid.ID, name string) (postedEvent, bool) {
	for i := len(h.events) - 1; i >= 0; i-- {
		if e := h.events[i]; e.ID == id && e.Name == name {
			return e, true
		}
	}
	return postedEvent{}, false
}

// testLog is a slog.Handler keeping every record (safe for concurrent
// use: the mail plugin logs from a goroutine).
type testLog struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l *testLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *testLog) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, logRecord{r.Level, r.Message, attrs})
	return nil
}

func (l *testLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *testLog) WithGroup(string) slog.Handler      { return l }

// messages lists the messages logged at level.
func (l *testLog) messages(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if r.Level == level {
			out = append(out, r.Msg)
		}
	}
	return out
}

// newSpec returns a one-task jobspec running command.
func newSpec(t *testing.T, command ...string) *jobspec.Jobspec {
	t.Helper()
	if len(command) == 0 {
		command = []string{"true"}
	}
	js, err := jobspec.FromCommand(command, jobspec.CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// withDeps returns a jobspec with the dependencies given as URIs
// (flux submit --dependency=URI).
func withDeps(t *testing.T, uris ...string) *jobspec.Jobspec {
	t.Helper()
	js := newSpec(t)
	var deps []jobspec.Dependency
	for _, u := range uris {
		d, err := jobspec.ParseDependencyURI(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		deps = append(deps, d)
	}
	js.SetDependencies(deps)
	return js
}

// rOf is an Rv1 of one core on each of ranks (an idset) named node<rank>.
func rOf(ranks, nodelist string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"version":1,"execution":{"R_lite":[{"rank":%q,"children":{"core":"0"}}],"nodelist":[%q],"starttime":0,"expiration":0}}`, ranks, nodelist))
}

// sameStrings compares string lists, nil and empty alike.
func sameStrings(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// sortedKeys lists the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
