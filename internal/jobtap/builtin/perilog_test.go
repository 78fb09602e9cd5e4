package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// pjob is the job the perilog tests run prologs and epilogs for.
var pjob = jobid.ID(123456789)

func loadPerilog(t *testing.T, conf string) (*Perilog, *testHost) {
	t.Helper()
	h := newTestHost(t)
	p := &Perilog{}
	if err := p.Load(h, json.RawMessage(conf)); err != nil {
		t.Fatalf("Load %s: %v", conf, err)
	}
	return p, h
}

// enterRun stores pjob allocated ranks (an idset of node<rank> hosts) and
// shows the plugin its entering RUN.
func enterRun(p *Perilog, h *testHost, ranks, nodelist string) *jobtap.Job {
	h.rs[pjob] = rOf(ranks, nodelist)
	j := h.addJob(&jobtap.Job{ID: pjob, Userid: alice, State: jobtap.StateRun, Ran: true, WaitStatus: -1})
	p.JobState(j, jobtap.StateSched)
	return j
}

func exceptionEvent(p *Perilog, j *jobtap.Job, severity any) {
	p.JobEvent(j, "exception", map[string]any{"type": "cancel", "severity": severity, "note": ""})
}

// wantFinish checks that name-finish was posted once to pjob with
// status.
func wantFinish(t *testing.T, h *testHost, name string, status int) {
	t.Helper()
	n := 0
	for _, e := range h.events {
		if e.ID == pjob && e.Name == name+"-finish" {
			n++
			want := map[string]any{"description": "job-manager." + name, "status": status}
			if !reflect.DeepEqual(e.Context, want) {
				t.Errorf("%s-finish context %v, want %v", name, e.Context, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("%s-finish posted %d times, want once (calls %q)", name, n, h.calls)
	}
}

func wantNoFinish(t *testing.T, h *testHost, name string) {
	t.Helper()
	if _, ok := h.event(pjob, name+"-finish"); ok {
		t.Errorf("%s-finish posted early (calls %q)", name, h.calls)
	}
}

func wantExceptions(t *testing.T, h *testHost, notes ...string) {
	t.Helper()
	var want []raisedException
	for _, n := range notes {
		want = append(want, raisedException{pjob, "prolog", 0, n})
	}
	if !reflect.DeepEqual(h.exceptions, want) {
		t.Errorf("exceptions %v, want %v", h.exceptions, want)
	}
}

// callsFrom returns the recorded calls from the first one starting with
// prefix on.
func callsFrom(h *testHost, prefix string) []string {
	for i, c := range h.calls {
		if strings.HasPrefix(c, prefix) {
			return h.calls[i:]
		}
	}
	return nil
}

// TestPerilogConfigErrors: each malformed configuration is refused with
// EINVAL and a message naming the table and the key.
func TestPerilogConfigErrors(t *testing.T) {
	for conf, want := range map[string]string{
		`[1]`:                                "config: want an object of prolog, epilog and perilog tables: invalid argument",
		`{"housekeeping":{}}`:                `config: unknown key "housekeeping" (prolog, epilog or perilog): invalid argument`,
		`{"prolog":{"command":[]}}`:          "[job-manager.prolog]: command must not be empty: invalid argument",
		`{"prolog":{"command":"prolog.sh"}}`: "[job-manager.prolog]: command must be an array of strings: invalid argument",
		`{"prolog":[]}`:                      "[job-manager.prolog]: must be a table: invalid argument",
		`{"epilog":{}}`:                      "[job-manager.epilog]: no command specified and exec.imp not defined: invalid argument",
		`{"epilog":{"command":["x"],"kill-timeout":3}}`:    "[job-manager.epilog]: kill-timeout not allowed for epilog: invalid argument",
		`{"prolog":{"command":["x"],"kill-timeout":0}}`:    "[job-manager.prolog]: kill-timeout must be a number of seconds > 0, not 0: invalid argument",
		`{"prolog":{"command":["x"],"kill-timeout":"5s"}}`: `[job-manager.prolog]: kill-timeout: wrong type "5s": invalid argument`,
		`{"prolog":{"command":["x"],"timeout":30}}`:        `[job-manager.prolog]: timeout must be a string (an FSD such as "30m"), not 30: invalid argument`,
		`{"prolog":{"command":["x"],"timeout":"soon"}}`:    `[job-manager.prolog]: invalid prolog timeout "soon": invalid argument`,
		`{"epilog":{"command":["x"],"timeout":"-1s"}}`:     `[job-manager.epilog]: invalid epilog timeout "-1s": invalid argument`,
		`{"prolog":{"command":["x"],"per-rank":"yes"}}`:    `[job-manager.prolog]: per-rank: wrong type "yes": invalid argument`,
		`{"prolog":{"command":["x"],"per_rank":true}}`:     `[job-manager.prolog]: unknown key "per_rank": invalid argument`,
		`{"perilog":{"log-ignore":["("]}}`:                 "[job-manager.perilog]: error parsing log-ignore: failed to compile regex: (: invalid argument",
		`{"perilog":{"log-ignore":"x"}}`:                   "[job-manager.perilog]: error parsing log-ignore: must be an array of strings: invalid argument",
		`{"perilog":{"other":1}}`:                          `[job-manager.perilog]: unknown key "other": invalid argument`,
	} {
		err := (&Perilog{}).Load(newTestHost(t), json.RawMessage(conf))
		if err == nil || err.Error() != want || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s:\n got %v\nwant %q (EINVAL)", conf, err, want)
		}
	}
	// the same tables under [job-manager] in the instance configuration
	_, err := (&Perilog{}).ConfigUpdate(json.RawMessage(`{"job-manager":{"prolog":{"command":[]}}}`))
	if err == nil || err.Error() != "[job-manager.prolog]: command must not be empty: invalid argument" {
		t.Errorf("ConfigUpdate: %v", err)
	}
}

// queryConf returns the plugin's configuration as flux jobtap query
// shows it.
func queryConf(t *testing.T, p *Perilog) map[string]map[string]any {
	t.Helper()
	b, err := json.Marshal(p.Query())
	if err != nil {
		t.Fatal(err)
	}
	var q struct {
		Conf map[string]map[string]any `json:"conf"`
	}
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	return q.Conf
}

// TestPerilogConfigDefaults: without a command the IMP runs the prolog
// and epilog; the prolog times out after 30m and is canceled by an
// exception, the epilog neither; "infinity" disables a timeout.
func TestPerilogConfigDefaults(t *testing.T) {
	p := &Perilog{}
	if err := p.Load(newTestHost(t), nil); err != nil {
		t.Fatal(err)
	}
	apply, err := p.ConfigUpdate(json.RawMessage(`{"exec":{"imp":"/usr/libexec/flux/flux-imp"},"job-manager":{"prolog":{},"epilog":{"per-rank":true,"timeout":"infinity"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	conf := queryConf(t, p)
	want := map[string]map[string]any{
		"prolog": {"command": []any{"/usr/libexec/flux/flux-imp", "run", "prolog"}, "per_rank": false,
			"cancel_on_exception": true, "timeout": 1800.0, "kill-timeout": 10.0},
		"epilog": {"command": []any{"/usr/libexec/flux/flux-imp", "run", "epilog"}, "per_rank": true,
			"cancel_on_exception": false, "timeout": 0.0, "kill-timeout": 10.0},
	}
	if !reflect.DeepEqual(conf, want) {
		t.Errorf("conf %v,\nwant %v", conf, want)
	}
	// an instance configuration without the tables removes them
	apply, err = p.ConfigUpdate(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if conf := queryConf(t, p); len(conf["prolog"])+len(conf["epilog"]) != 0 {
		t.Errorf("conf after removal %v, want empty tables", conf)
	}
}

// TestPerilogLoadConfigOverridesInstance: a configuration given at load
// time wins over the instance's [job-manager] tables.
func TestPerilogLoadConfigOverridesInstance(t *testing.T) {
	p, _ := loadPerilog(t, `{"prolog":{"command":["mine"]}}`)
	apply, err := p.ConfigUpdate(json.RawMessage(`{"job-manager":{"prolog":{"command":["instance"]},"epilog":{"command":["instance"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	conf := queryConf(t, p)
	if !reflect.DeepEqual(conf["prolog"]["command"], []any{"mine"}) || len(conf["epilog"]) != 0 {
		t.Errorf("conf %v, want the load-time prolog only", conf)
	}
}

// TestPrologRunsOnRankZeroAndSucceeds: entering RUN posts prolog-start
// and runs the command once, on rank 0, with the job's id and user in
// its environment; its success posts prolog-finish with status 0 and
// stops the timeout.
func TestPrologRunsOnRankZeroAndSucceeds(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["/etc/flux/prolog","-v"]}}`)
	enterRun(p, h, "0-1", "node[0-1]")
	wantCalls := []string{"event " + pjob.String() + " prolog-start", "exec 0 /etc/flux/prolog -v"}
	if !reflect.DeepEqual(h.calls, wantCalls) {
		t.Fatalf("calls %q, want %q", h.calls, wantCalls)
	}
	if e, _ := h.event(pjob, "prolog-start"); !reflect.DeepEqual(e.Context, map[string]any{"description": "job-manager.prolog"}) {
		t.Errorf("prolog-start context %v", e.Context)
	}
	pr := h.proc(0)
	if pr.Env["FLUX_JOB_ID"] != pjob.String() || pr.Env["FLUX_JOB_USERID"] != "1001" {
		t.Errorf("env FLUX_JOB_ID=%q FLUX_JOB_USERID=%q", pr.Env["FLUX_JOB_ID"], pr.Env["FLUX_JOB_USERID"])
	}
	if h.pendingTimers() != 1 {
		t.Errorf("%d timers pending, want the prolog timeout", h.pendingTimers())
	}
	wantNoFinish(t, h, "prolog")
	pr.exit(t, 0)
	wantFinish(t, h, "prolog", 0)
	wantExceptions(t, h)
	if len(h.drains) != 0 || h.pendingTimers() != 0 {
		t.Errorf("drains %v, %d timers pending: want none", h.drains, h.pendingTimers())
	}
	h.advance(time.Hour)
	if len(pr.Signals) != 0 {
		t.Errorf("signals %v after the prolog ended", pr.Signals)
	}
}

// TestPrologStartsOncePerJob: a second RUN notification while the
// prolog runs starts nothing.
func TestPrologStartsOncePerJob(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"]}}`)
	j := enterRun(p, h, "0", "node0")
	p.JobState(j, jobtap.StateRun)
	if len(h.procs) != 1 || len(h.eventNames(pjob)) != 1 {
		t.Errorf("procs %d, events %v: want one prolog", len(h.procs), h.eventNames(pjob))
	}
	// no prolog configured: nothing at all
	p2, h2 := loadPerilog(t, `{"epilog":{"command":["epilog"]}}`)
	enterRun(p2, h2, "0", "node0")
	if len(h2.calls) != 0 {
		t.Errorf("without a prolog: calls %q", h2.calls)
	}
}

// TestPrologPerRankRunsOnEveryRank: with per-rank the prolog runs on
// each rank of R and finishes when the last one ends.
func TestPrologPerRankRunsOnEveryRank(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true}}`)
	enterRun(p, h, "0-2,5", "node[0-2,5]")
	var ranks []uint
	for _, pr := range h.procs {
		ranks = append(ranks, pr.Rank)
	}
	if !reflect.DeepEqual(ranks, []uint{0, 1, 2, 5}) {
		t.Fatalf("ran on ranks %v, want 0 1 2 5", ranks)
	}
	for _, r := range []uint{2, 0, 1} {
		h.proc(r).exit(t, 0)
	}
	wantNoFinish(t, h, "prolog")
	b, _ := json.Marshal(p.Query())
	if !strings.Contains(string(b), `"procs":{"`+pjob.String()+`":{"active":1,"active_ranks":"5","name":"prolog","state":"running","total":4}}`) {
		t.Errorf("query %s", b)
	}
	h.proc(5).exit(t, 0)
	wantFinish(t, h, "prolog", 0)
	wantExceptions(t, h)
}

// TestPrologFailurePerRankDrainsThenRaises: a per-rank prolog failure
// drains the ranks where it failed, and only once the drain is done
// raises the fatal prolog exception and then posts prolog-finish.
func TestPrologFailurePerRankDrainsThenRaises(t *testing.T) {
	for _, drainErr := range []error{nil, errors.New("resource.drain: no such rank")} {
		p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true}}`)
		enterRun(p, h, "0-2", "node[0-2]")
		h.proc(1).exit(t, 1<<8)
		h.proc(2).exit(t, 3<<8)
		h.proc(0).exit(t, 0)
		if len(h.drains) != 1 || h.drains[0].Ranks != "1-2" || h.drains[0].Reason != "prolog failed for job "+pjob.String() {
			t.Fatalf("drains %+v, want ranks 1-2 for prolog failure", h.drains)
		}
		wantExceptions(t, h)
		wantNoFinish(t, h, "prolog")
		h.drains[0].finish(t, drainErr)
		note := "prolog exited with code=3 on node1,node2 (rank 1-2)"
		wantExceptions(t, h, note)
		wantFinish(t, h, "prolog", 3<<8)
		id := pjob.String()
		if got, want := callsFrom(h, "exception"), []string{"exception " + id + " prolog 0 " + note, "event " + id + " prolog-finish"}; !reflect.DeepEqual(got, want) {
			t.Errorf("calls after the drain %q, want %q", got, want)
		}
		if drainErr != nil {
			want := "Failed to drain ranks with failed prolog for " + id + ": resource.drain: no such rank"
			if msgs := h.logs.messages(slog.LevelError); !sameStrings(msgs, []string{want}) {
				t.Errorf("logged %q, want %q", msgs, want)
			}
		}
	}
}

// TestPrologFailureNotes: the exception note says how the prolog failed
// (exit code, signal, or a shell's 127/126 for a command that could not
// run); without per-rank nothing is drained.
func TestPrologFailureNotes(t *testing.T) {
	for _, c := range []struct {
		name    string
		status  int   // wait status, or
		execErr error // Exec's error, or
		doneErr error // the error Done reports
		note    string
		fstatus int
	}{
		{"exit code", 2 << 8, nil, nil, "prolog exited with code=2 on node0 (rank 0)", 2 << 8},
		{"signal", int(syscall.SIGKILL), nil, nil, "prolog killed by signal 9 on node0 (rank 0)", 9},
		{"shell code for a signal", 143 << 8, nil, nil, "prolog killed by signal 15 on node0 (rank 0)", 143 << 8},
		{"exit 128 is a code", 128 << 8, nil, nil, "prolog exited with code=128 on node0 (rank 0)", 128 << 8},
		{"not found at start", 0, syscall.ENOENT, nil, "prolog exited with code=127 on node0 (rank 0)", 127 << 8},
		{"not executable at start", 0, syscall.EACCES, nil, "prolog exited with code=126 on node0 (rank 0)", 126 << 8},
		{"other start error", 0, errors.New("rank 0 is down"), nil, "prolog exited with code=1 on node0 (rank 0)", 1 << 8},
		{"not found remotely", 0, nil, fmt.Errorf("exec: %w", syscall.ENOENT), "prolog exited with code=127 on node0 (rank 0)", 127 << 8},
		{"permission denied remotely", 0, nil, syscall.EPERM, "prolog exited with code=126 on node0 (rank 0)", 126 << 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, h := loadPerilog(t, `{"prolog":{"command":["prolog"]}}`)
			if c.execErr != nil {
				h.execErr = func(uint) error { return c.execErr }
			}
			enterRun(p, h, "0-3", "node[0-3]")
			switch {
			case c.doneErr != nil:
				h.proc(0).fail(t, c.doneErr)
			case c.execErr == nil:
				h.proc(0).exit(t, c.status)
			}
			wantExceptions(t, h, c.note)
			wantFinish(t, h, "prolog", c.fstatus)
			if len(h.drains) != 0 {
				t.Errorf("drains %+v without per-rank", h.drains)
			}
			if err := firstErr(c.execErr, c.doneErr); err != nil {
				want := pjob.String() + ": prolog: node0 (rank 0): " + err.Error()
				if msgs := h.logs.messages(slog.LevelError); !sameStrings(msgs, []string{want}) {
					t.Errorf("logged %q, want %q", msgs, want)
				}
			}
			if h.pendingTimers() != 0 {
				t.Errorf("%d timers left", h.pendingTimers())
			}
		})
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestPrologTimeout: at its timeout the prolog gets SIGTERM; ranks where
// it then fails are drained (per-rank) and the exception says it timed
// out.
func TestPrologTimeout(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true,"timeout":"30s","kill-timeout":5}}`)
	enterRun(p, h, "0-1", "node[0-1]")
	h.advance(29 * time.Second)
	if len(h.proc(0).Signals)+len(h.proc(1).Signals) != 0 {
		t.Fatal("signaled before the timeout")
	}
	h.advance(time.Second)
	for _, r := range []uint{0, 1} {
		if got := h.proc(r).Signals; !reflect.DeepEqual(got, []syscall.Signal{syscall.SIGTERM}) {
			t.Errorf("rank %d got signals %v, want SIGTERM", r, got)
		}
	}
	if b, _ := json.Marshal(p.Query()); !strings.Contains(string(b), `"state":"timeout"`) {
		t.Errorf("query %s, want state timeout", b)
	}
	h.proc(0).exit(t, int(syscall.SIGTERM))
	h.proc(1).exit(t, int(syscall.SIGTERM))
	if len(h.drains) != 1 || h.drains[0].Ranks != "0-1" || h.drains[0].Reason != "prolog timed out for job "+pjob.String() {
		t.Fatalf("drains %+v", h.drains)
	}
	h.drains[0].finish(t, nil)
	wantExceptions(t, h, "prolog timed out on node0,node1 (rank 0-1)")
	wantFinish(t, h, "prolog", int(syscall.SIGTERM))
	if h.pendingTimers() != 0 {
		t.Errorf("%d timers left (the kill timer must stop)", h.pendingTimers())
	}
	h.advance(time.Minute)
	if len(h.proc(0).Signals) != 1 {
		t.Errorf("signals %v after the end", h.proc(0).Signals)
	}
}

// TestPrologTimeoutThenKillTimeout: a prolog still running kill-timeout
// after its SIGTERM is sent SIGKILL, its rank is drained (per-rank or
// not), and the job gets the timeout exception; a late exit changes
// nothing.
func TestPrologTimeoutThenKillTimeout(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"timeout":"1m","kill-timeout":5}}`)
	enterRun(p, h, "0", "node0")
	pr := h.proc(0)
	h.advance(time.Minute)
	h.advance(4 * time.Second)
	if !reflect.DeepEqual(pr.Signals, []syscall.Signal{syscall.SIGTERM}) || len(h.drains) != 0 {
		t.Fatalf("signals %v drains %+v before the kill timeout", pr.Signals, h.drains)
	}
	h.advance(time.Second)
	if !reflect.DeepEqual(pr.Signals, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals %v, want SIGTERM then SIGKILL", pr.Signals)
	}
	if len(h.drains) != 1 || h.drains[0].Ranks != "0" || h.drains[0].Reason != "prolog timed out for job "+pjob.String() {
		t.Fatalf("drains %+v", h.drains)
	}
	want := pjob.String() + ": timed out waiting for SIGTERM to terminate prolog"
	if msgs := h.logs.messages(slog.LevelError); !sameStrings(msgs, []string{want}) {
		t.Errorf("logged %q, want %q", msgs, want)
	}
	h.drains[0].finish(t, nil)
	wantExceptions(t, h, "prolog timed out on node0 (rank 0)")
	wantFinish(t, h, "prolog", int(syscall.SIGKILL))
	pr.exit(t, int(syscall.SIGKILL))
	wantFinish(t, h, "prolog", int(syscall.SIGKILL))
	wantExceptions(t, h, "prolog timed out on node0 (rank 0)")
}

// TestPrologCanceledByFatalException: a fatal exception (not a
// non-fatal one) sends the prolog SIGTERM once; a canceled prolog
// raises no exception of its own and drains nothing, and the epilog
// starts before prolog-finish is posted.
func TestPrologCanceledByFatalException(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true},"epilog":{"command":["epilog","x"]}}`)
	j := enterRun(p, h, "0-1", "node[0-1]")
	exceptionEvent(p, j, 1)
	p.JobEvent(j, "exception", map[string]any{"type": "x"}) // no severity
	if len(h.proc(0).Signals)+len(h.proc(1).Signals) != 0 {
		t.Fatal("a non-fatal exception signaled the prolog")
	}
	exceptionEvent(p, j, float64(0)) // as decoded from JSON
	exceptionEvent(p, j, int64(0))
	for _, r := range []uint{0, 1} {
		if got := h.proc(r).Signals; !reflect.DeepEqual(got, []syscall.Signal{syscall.SIGTERM}) {
			t.Errorf("rank %d signals %v, want one SIGTERM", r, got)
		}
	}
	if b, _ := json.Marshal(p.Query()); !strings.Contains(string(b), `"state":"canceled"`) {
		t.Errorf("query %s, want state canceled", b)
	}
	h.proc(0).exit(t, int(syscall.SIGTERM))
	h.proc(1).exit(t, int(syscall.SIGTERM))
	wantExceptions(t, h)
	if len(h.drains) != 0 {
		t.Errorf("drains %+v for a canceled prolog", h.drains)
	}
	wantFinish(t, h, "prolog", int(syscall.SIGTERM))
	id := pjob.String()
	want := []string{"event " + id + " epilog-start", "event " + id + " prolog-finish", "exec 0 epilog x"}
	if got := callsFrom(h, "event "+id+" epilog-start"); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	h.proc(0).exit(t, 0)
	wantFinish(t, h, "epilog", 0)
}

// TestPrologCanceledThenKillTimeout: a canceled prolog that ignores
// SIGTERM is killed and its rank drained "canceled then timed out",
// still without an exception of the plugin's own.
func TestPrologCanceledThenKillTimeout(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"kill-timeout":5}}`)
	j := enterRun(p, h, "0", "node0")
	exceptionEvent(p, j, 0)
	h.advance(5 * time.Second)
	if got := h.proc(0).Signals; !reflect.DeepEqual(got, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("signals %v", got)
	}
	if len(h.drains) != 1 || h.drains[0].Ranks != "0" || h.drains[0].Reason != "prolog canceled then timed out for job "+pjob.String() {
		t.Fatalf("drains %+v", h.drains)
	}
	h.drains[0].finish(t, nil)
	wantExceptions(t, h)
	wantFinish(t, h, "prolog", int(syscall.SIGKILL))
}

// TestPrologNotCanceledWithoutCancelOnException: with
// cancel-on-exception=false a fatal exception leaves the prolog running.
func TestPrologNotCanceledWithoutCancelOnException(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"cancel-on-exception":false}}`)
	j := enterRun(p, h, "0", "node0")
	exceptionEvent(p, j, 0)
	if len(h.proc(0).Signals) != 0 {
		t.Fatalf("signals %v", h.proc(0).Signals)
	}
	h.proc(0).exit(t, 0)
	wantFinish(t, h, "prolog", 0)
	wantExceptions(t, h)
}

// TestPrologFailureRunsEpilog: after a failed prolog the epilog runs
// (there will be no finish event): exception, epilog-start, then
// prolog-finish, then the epilog command.
func TestPrologFailureRunsEpilog(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"]},"epilog":{"command":["epilog"]}}`)
	enterRun(p, h, "0", "node0")
	h.proc(0).exit(t, 1<<8)
	id := pjob.String()
	note := "prolog exited with code=1 on node0 (rank 0)"
	want := []string{"exception " + id + " prolog 0 " + note, "event " + id + " epilog-start", "event " + id + " prolog-finish", "exec 0 epilog"}
	if got := callsFrom(h, "exception"); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	h.proc(0).exit(t, 0)
	wantFinish(t, h, "epilog", 0)
}

// TestEpilogRunsAtFinish: the epilog starts at the finish event, not
// after a successful prolog; its failure drains the failed ranks
// (per-rank), logs, and raises no exception; an exception does not
// cancel it by default.
func TestEpilogRunsAtFinish(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"]},"epilog":{"command":["epilog"],"per-rank":true}}`)
	j := enterRun(p, h, "0-1", "node[0-1]")
	h.proc(0).exit(t, 0)
	if _, ok := h.event(pjob, "epilog-start"); ok {
		t.Fatal("epilog started after a successful prolog")
	}
	p.JobEvent(j, "finish", map[string]any{"status": 0})
	if e, ok := h.event(pjob, "epilog-start"); !ok || !reflect.DeepEqual(e.Context, map[string]any{"description": "job-manager.epilog"}) {
		t.Fatalf("epilog-start %v %v", ok, e.Context)
	}
	if len(h.procs) != 3 || h.pendingTimers() != 0 {
		t.Fatalf("%d procs, %d timers: want the epilog on ranks 0 and 1, without a timeout", len(h.procs), h.pendingTimers())
	}
	exceptionEvent(p, j, 0)
	h.proc(1).exit(t, 1<<8)
	h.proc(0).exit(t, 0)
	if len(h.proc(0).Signals)+len(h.proc(1).Signals) != 0 {
		t.Error("an exception signaled the epilog")
	}
	if len(h.drains) != 1 || h.drains[0].Ranks != "1" || h.drains[0].Reason != "epilog failed for job "+pjob.String() {
		t.Fatalf("drains %+v", h.drains)
	}
	wantNoFinish(t, h, "epilog")
	h.drains[0].finish(t, nil)
	wantFinish(t, h, "epilog", 1<<8)
	wantExceptions(t, h)
	want := pjob.String() + ": epilog failed with status 256"
	if msgs := h.logs.messages(slog.LevelError); !sameStrings(msgs, []string{want}) {
		t.Errorf("logged %q, want %q", msgs, want)
	}
	// without an epilog, finish does nothing
	p2, h2 := loadPerilog(t, `{"prolog":{"command":["prolog"]}}`)
	p2.JobEvent(h2.addJob(&jobtap.Job{ID: pjob}), "finish", map[string]any{"status": 0})
	if len(h2.calls) != 0 {
		t.Errorf("finish without an epilog: calls %q", h2.calls)
	}
}

// TestPerilogOutputLogged: each output line is logged with the job,
// host and rank, stderr at error level; blank lines and log-ignore
// matches are not.
func TestPerilogOutputLogged(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"]},"perilog":{"log-ignore":["^debug:"]}}`)
	h.hostnames[0] = "login1"
	enterRun(p, h, "0", "login1")
	pr := h.proc(0)
	pr.output("stdout", "mounting /scratch")
	pr.output("stderr", "warning: slow")
	pr.output("stdout", "   ")
	pr.output("stderr", "debug: noise")
	id := pjob.String()
	if got, want := h.logs.messages(slog.LevelInfo), []string{id + ": prolog: login1 (rank 0): stdout: mounting /scratch"}; !sameStrings(got, want) {
		t.Errorf("info %q, want %q", got, want)
	}
	if got, want := h.logs.messages(slog.LevelError), []string{id + ": prolog: login1 (rank 0): stderr: warning: slow"}; !sameStrings(got, want) {
		t.Errorf("error %q, want %q", got, want)
	}
}

// TestPerilogUnloadFinishesRunningJobs: unloading kills what runs and
// posts its finish event (status 1<<8) so the jobs do not hang.
func TestPerilogUnloadFinishesRunningJobs(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true}}`)
	enterRun(p, h, "0-1", "node[0-1]")
	p.Unload()
	for _, r := range []uint{0, 1} {
		if got := h.proc(r).Signals; !reflect.DeepEqual(got, []syscall.Signal{syscall.SIGKILL}) {
			t.Errorf("rank %d signals %v, want SIGKILL", r, got)
		}
	}
	wantFinish(t, h, "prolog", 1<<8)
	if h.pendingTimers() != 0 || len(p.procs) != 0 {
		t.Errorf("%d timers, %d runs left", h.pendingTimers(), len(p.procs))
	}
}

// TestPrologExecFailureOnFirstRankWaitsForTheOthers: when Exec fails on
// the first rank of a per-rank prolog, the run must still wait for the
// ranks started after it (flux-core's bulk exec counts a rank that
// failed to start as complete and finishes when all are).
func TestPrologExecFailureOnFirstRankWaitsForTheOthers(t *testing.T) {
	p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true}}`)
	h.execErr = func(rank uint) error {
		if rank == 0 {
			return syscall.ENOENT
		}
		return nil
	}
	enterRun(p, h, "0-2", "node[0-2]")
	if len(h.drains) != 0 {
		t.Fatalf("drained %+v while ranks 1-2 still run", h.drains)
	}
	wantNoFinish(t, h, "prolog")
	h.proc(1).exit(t, 0)
	h.proc(2).exit(t, 0)
	if len(h.drains) != 1 || h.drains[0].Ranks != "0" {
		t.Fatalf("drains %+v, want rank 0", h.drains)
	}
	h.drains[0].finish(t, nil)
	wantExceptions(t, h, "prolog exited with code=127 on node0 (rank 0)")
	wantFinish(t, h, "prolog", 127<<8)
}

// TestPrologStatusIsLargestWaitStatus: with ranks failing in different
// ways the run's status, and so the note, must not depend on map order;
// flux-core uses the largest wait status (bulk_exec_rc).
func TestPrologStatusIsLargestWaitStatus(t *testing.T) {
	notes := map[string]int{}
	for range 64 {
		p, h := loadPerilog(t, `{"prolog":{"command":["prolog"],"per-rank":true}}`)
		enterRun(p, h, "0-1", "node[0-1]")
		h.proc(0).exit(t, int(syscall.SIGKILL))
		h.proc(1).exit(t, 1<<8)
		h.drains[0].finish(t, nil)
		if len(h.exceptions) == 1 {
			notes[h.exceptions[0].Note]++
		}
		e, _ := h.event(pjob, "prolog-finish")
		if e.Context["status"] != 1<<8 {
			t.Errorf("prolog-finish status %v, want 256 (the largest wait status)", e.Context["status"])
		}
	}
	if want := "prolog exited with code=1 on node0,node1 (rank 0-1)"; len(notes) != 1 || notes[want] != 64 {
		t.Errorf("notes %v, want always %q", notes, want)
	}
}
