package jobexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// shellExec runs jobs for real: one job shell per node of R, hosted by
// the job-shell module of that node's broker.
type shellExec struct{}

// shellJob tracks the shells of one job.
type shellJob struct {
	plan    *shell.Plan
	js      *jobspec.Jobspec // parsed once, for the plan's growth (realloc.go)
	po      shell.PlanOptions
	origR   json.RawMessage // R at the start (realloc.go)
	started int
	exited  int
	status  int
	lost    []uint
	futs    map[uint]*flux.Future
	// critical lists the shell ranks the job cannot lose (nil: all);
	// see critical.go.
	critical *idset.Set
	// restStarted: the shells other than the leader were sent their
	// start (after the leader's)
	restStarted bool
	// initial is the number of shells of the job's first plan: those
	// the leader's start brings up (shells on nodes the job grows onto
	// are started by job-exec.grow, which may come before it)
	initial int
	// gone marks the shells that exited or were lost: each counts once.
	gone map[uint]bool
	// pre holds the exec events of the job's start (init, starting,
	// the leader's shell.init and shell.start) until every shell runs:
	// they go out together, so a job's start costs one KVS write.
	pre []byte
	// exitTimeout (0: none) and exitOnError are the exit-timeout and
	// exit-on-error shell options; firstExit is set once a task ended.
	exitTimeout time.Duration
	exitOnError bool
	firstExit   bool

	// startedRanks: the shells that said they run (each counts once,
	// however often a shell says it again on a new stream)
	startedRanks map[uint]bool
	// detached: shells whose broker went away, since when (reattach.go)
	detached map[uint]time.Time
	// rec: what the exec eventlog held when the job was reattached
	// after a restart (nil otherwise)
	rec *recorded
	// lastSig is the last signal sent to the job's shells: sent again
	// to a shell that comes back
	lastSig      syscall.Signal
	reattachDone bool // every shell of a reattached job answered

	// RFC 51 (realloc.go): changes are the job's growths and shrinks
	// while it ran, in order (plan is the result); released marks the
	// shells being given back, releases the requests waiting for them.
	changes []wire.PlanChange
	// usage: each shell's report of the job's usage on its node
	usage    map[uint]json.RawMessage
	released map[uint]bool
	releases []*releaseWait
}

// defaultExitTimeout is how long a job's other tasks may run on after
// its first task ended before the job is ended with an exception
// (flux-shell-options(7) exit-timeout; flux batch and alloc set none).
const defaultExitTimeout = 30 * time.Second

// exitOptions reads the exit-timeout and exit-on-error shell options.
func exitOptions(js *jobspec.Jobspec) (time.Duration, bool, error) {
	opts := js.ShellOptions()
	timeout := defaultExitTimeout
	switch v := opts["exit-timeout"].(type) {
	case nil:
	case string:
		if v == "none" {
			timeout = 0
			break
		}
		sec, err := fsd.Parse(v)
		if err != nil || sec <= 0 {
			return 0, false, fmt.Errorf("shell option exit-timeout=%q: want a positive duration (FSD) or none", v)
		}
		timeout = fsd.ToDuration(sec)
	default:
		n, ok := optionNumber(v)
		if !ok || n <= 0 {
			return 0, false, fmt.Errorf("shell option exit-timeout=%v: want a positive duration (FSD) or none", v)
		}
		timeout = fsd.ToDuration(n)
	}
	onError := false
	switch v := opts["exit-on-error"].(type) {
	case nil:
	case bool:
		onError = v
	default:
		n, ok := optionNumber(v)
		if !ok {
			return 0, false, fmt.Errorf("shell option exit-on-error=%v: want 1 or 0", v)
		}
		onError = n != 0
	}
	return timeout, onError, nil
}

// optionNumber reads a numeric shell option value.
func optionNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// taskExited applies exit-on-error and exit-timeout to the first task
// of the job to end (each shell reports its first).
func (s *shellExec) taskExited(j *execJob, taskRank, status int) {
	sj := j.aux.(*shellJob)
	if sj.firstExit || j.finished {
		return
	}
	sj.firstExit = true
	if sj.exitOnError && status != 0 {
		j.exception("exec", 0, fmt.Sprintf("task %d %s (exit-on-error)", taskRank, describeStatus(status)))
		j.kill(syscall.SIGTERM)
		return
	}
	if sj.exitTimeout <= 0 {
		return
	}
	j.after(sj.exitTimeout, func() {
		if j.finished || sj.exited == len(sj.plan.Ranks) {
			return
		}
		j.exception("exec", 0, fmt.Sprintf("task %d %s and the job's other tasks were still running %v later (exit-timeout)",
			taskRank, describeStatus(status), sj.exitTimeout))
		j.kill(syscall.SIGTERM)
	})
}

// describeStatus says how a task ended from its wait status.
func describeStatus(status int) string {
	ws := syscall.WaitStatus(status)
	if ws.Signaled() {
		return "was killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}

// Job-exec is the only writer of a job's exec eventlog, so its events
// are in the order they happened without waiting for one commit before
// the next step: the shells send theirs (shell.init, shell.start,
// shell.task-exit, shell-exit) in their job-shell.start responses and
// job-exec appends them. The leader shell writes the output eventlog,
// except that a job whose output it has not written by the time its
// tasks are done (a job without output) hands the whole log over in its
// exit response, which job-exec writes with the completion events: a
// short job then costs two KVS writes here.

// execEvent appends an event to the job's exec eventlog, its keys in
// flux-core's order (timestamp, name, context).
func (x *executor) execEvent(j *execJob, name string, ctx any) {
	b, err := encodeEvent(name, ctx)
	if err != nil {
		x.log.Error("exec eventlog", "id", j.id.String(), "err", err)
		return
	}
	x.appendExec(j, b)
}

// appendExec appends encoded events to the job's exec eventlog, after
// any held back.
func (x *executor) appendExec(j *execJob, b []byte) {
	if sj, ok := j.aux.(*shellJob); ok && sj.pre != nil {
		b = append(sj.pre, b...)
		sj.pre = nil
	}
	if len(b) > 0 {
		x.batch.Append(jobDir(j)+".guest.exec.eventlog", b)
	}
}

func encodeEvent(name string, ctx any) ([]byte, error) {
	ev, err := eventlog.New(name, ctx)
	if err != nil {
		return nil, err
	}
	return eventlog.Encode(ev)
}

func jobDir(j *execJob) string {
	dothex, _ := j.id.Encode("dothex")
	return "job." + dothex
}

// newShellJob plans the job's shells.
func newShellJob(j *execJob) (*shellJob, error) {
	js, err := jobspec.Parse(j.jobspec)
	if err != nil {
		return nil, fmt.Errorf("jobspec: %v", err)
	}
	R, err := rset.Parse(j.R)
	if err != nil {
		return nil, fmt.Errorf("R: %v", err)
	}
	po, err := shell.PlanOptionsFrom(js)
	if err != nil {
		return nil, err
	}
	plan, err := shell.MakePlan(js, R, po)
	if err != nil {
		return nil, err
	}
	exitTimeout, exitOnError, err := exitOptions(js)
	if err != nil {
		return nil, err
	}
	return &shellJob{plan: plan, initial: len(plan.Ranks), js: js, po: po, origR: j.R, futs: make(map[uint]*flux.Future), gone: make(map[uint]bool),
		exitTimeout: exitTimeout, exitOnError: exitOnError,
		startedRanks: make(map[uint]bool), detached: make(map[uint]time.Time)}, nil
}

// firstPlan is the number of shells of the job's first plan still in
// its plan (a release can have truncated it).
func (sj *shellJob) firstPlan() int { return min(sj.initial, len(sj.plan.Ranks)) }

func (s *shellExec) start(j *execJob) error {
	sj, err := newShellJob(j)
	if err != nil {
		return err
	}
	j.aux = sj
	for _, name := range []string{"init", "starting"} {
		b, err := encodeEvent(name, nil)
		if err != nil {
			return err
		}
		sj.pre = append(sj.pre, b...)
	}
	// the leader first: the other shells send it their output
	s.startShells(j, sj.plan.Ranks[:1])
	return nil
}

// startShells sends job-shell.start to the shells on ranks.
func (s *shellExec) startShells(j *execJob, ranks []uint) {
	x := j.x
	sj := j.aux.(*shellJob)
	// the payload, built once for every shell: jobspec and R as they came
	req := make(json.RawMessage, 0, 64+len(j.jobspec)+len(j.R))
	req = append(req, `{"id":`...)
	req = strconv.AppendUint(req, uint64(j.id), 10)
	req = append(req, `,"userid":`...)
	req = strconv.AppendUint(req, uint64(j.userid), 10)
	req = append(append(req, `,"jobspec":`...), j.jobspec...)
	if len(sj.changes) > 0 {
		// a shell on a node the job was given later: the original R
		// and each change, from which it works out the job's plan
		req = append(append(req, `,"R":`...), sj.origR...)
		g, _ := json.Marshal(sj.changes)
		req = append(append(req, `,"changes":`...), g...)
	} else {
		req = append(append(req, `,"R":`...), j.R...)
	}
	req = append(req, '}')
	for _, rank := range ranks {
		f, err := x.h.RPC("job-shell.start", uint32(rank), req, flux.Streaming)
		if err != nil {
			s.shellFailed(j, rank, err)
			continue
		}
		sj.futs[rank] = f
		f.Then(func(m *flux.Message, err error) { s.response(j, f, rank, m, err) })
	}
}

// startRest starts the shells other than the leader once the leader
// runs, or, if the job is being killed already, counts them as done.
func (s *shellExec) startRest(j *execJob) {
	sj := j.aux.(*shellJob)
	if sj.restStarted || sj.firstPlan() <= 1 {
		return
	}
	sj.restStarted = true
	rest := sj.plan.Ranks[1:sj.firstPlan()]
	if j.killed || j.finished {
		for _, rank := range rest {
			sj.started++
			s.notifyLost(j, rank)
			s.shellExited(j, rank, 0)
		}
		return
	}
	s.startShells(j, rest)
}

// response handles a job-shell.start response from the shell on rank.
func (s *shellExec) response(j *execJob, f *flux.Future, rank uint, m *flux.Message, err error) {
	sj := j.aux.(*shellJob)
	if sj.futs[rank] != f {
		return // a stream given up for a newer one
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ENODATA) {
			return
		}
		if s.mayComeBack(j, rank, err) {
			s.detach(j, rank, err) // reattach.go
			return
		}
		s.shellFailed(j, rank, err)
		return
	}
	s.attached(j, rank)
	var resp struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Rank   int    `json:"rank"`
		Code   int    `json:"code"`
		Note   string `json:"note"`
		// Exec holds exec eventlog events, Output a whole output
		// eventlog (see above).
		Exec   string `json:"exec"`
		Output string `json:"output"`
		// Usage: the job's peak memory and CPU time on the node, from
		// its cgroups (written to guest.usage with the job's end)
		Usage json.RawMessage `json:"usage"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		s.shellFailed(j, rank, err)
		return
	}
	switch resp.Type {
	case "start":
		if sj.startedRanks[rank] {
			return // said again on a new stream
		}
		sj.startedRanks[rank] = true
		// held until every shell runs: shell.init names the stdin
		// service, which forwards to all of them
		if sj.rec == nil || !sj.rec.started {
			sj.pre = append(sj.pre, resp.Exec...)
		}
		if rank == sj.plan.Ranks[0] {
			s.startRest(j)
		}
		sj.started++
		if sj.started == len(sj.plan.Ranks) {
			j.x.appendExec(j, nil)
			j.start()
		}
	case "exit":
		if sj.gone[rank] {
			return // said again on a new stream
		}
		if resp.Output != "" {
			j.x.batch.Put(jobDir(j)+".guest.output", []byte(resp.Output))
		}
		if resp.Exec != "" && !sj.rec.hasExit(rank) {
			j.x.appendExec(j, []byte(resp.Exec))
		}
		if len(resp.Usage) > 0 {
			if sj.usage == nil {
				sj.usage = make(map[uint]json.RawMessage)
			}
			sj.usage[rank] = resp.Usage
		}
		s.shellExited(j, rank, resp.Status)
	case "task-exit":
		if sj.released[rank] {
			return // stopped because the job gave its node back
		}
		s.taskExited(j, resp.Rank, resp.Status)
	case "abort":
		if j.killed {
			return
		}
		note := fmt.Sprintf("MPI_Abort: task %d aborted with code %d", resp.Rank, resp.Code)
		if resp.Note != "" {
			note += ": " + resp.Note
		}
		j.exception("exec", 0, note)
		j.kill(syscall.SIGTERM)
	}
}

// shellFailed handles a shell that could not start or was lost with its
// broker: the job gets a fatal exception and the other shells are killed.
func (s *shellExec) shellFailed(j *execJob, rank uint, err error) {
	sj := j.aux.(*shellJob)
	if sj.gone[rank] {
		return // it had reported its exit already
	}
	if sj.released[rank] {
		s.shellExited(j, rank, 0) // given back: it was being stopped
		return
	}
	if rank == sj.plan.Ranks[0] && !sj.restStarted {
		defer func() {
			sj.restStarted = true
			for _, r := range sj.plan.Ranks[1:sj.firstPlan()] {
				s.shellExited(j, r, 0)
			}
		}()
	}
	s.notifyLost(j, rank)
	if sj.started == len(sj.plan.Ranks) && !sj.isCritical(rank) {
		s.lostNoncritical(j, rank, err)
		return
	}
	if f := sj.futs[rank]; f != nil {
		f.Close()
		delete(sj.futs, rank)
	}
	// a shell whose broker was lost is a node failure; one that failed
	// by itself (a bad shell option, its setup refused) is the job's
	// execution failing, as flux-core's job-exec reports it
	typ, note := "exec", fmt.Sprintf("job shell on broker rank %d failed: %v", rank, err)
	var lost *lostShell
	switch {
	case errors.As(err, &lost):
		typ, note = "node-failure", lost.note
	case errors.Is(err, syscall.EHOSTUNREACH):
		typ, note = "node-failure", fmt.Sprintf("lost contact with job shell on broker rank %d", rank)
	}
	sj.lost = append(sj.lost, rank)
	j.exception(typ, 0, note)
	j.kill(syscall.SIGTERM)
	status := int(syscall.SIGKILL) // a lost shell is as good as killed
	if typ == "exec" {
		// it may never have run anything, but the job failed: a zero
		// finish status would read as success to tools that look at it
		status = 1 << 8
	}
	s.shellExited(j, rank, status)
}

func (s *shellExec) shellExited(j *execJob, rank uint, status int) {
	sj := j.aux.(*shellJob)
	if sj.gone[rank] {
		return
	}
	sj.gone[rank] = true
	sj.exited++
	if status > sj.status && sj.isCritical(rank) && !sj.released[rank] {
		sj.status = status
	}
	if len(sj.releases) > 0 {
		defer s.checkReleases(j)
	}
	if sj.exited < len(sj.plan.Ranks) {
		return
	}
	x := j.x
	if !j.started {
		j.start()
	}
	if sj.rec == nil || !sj.rec.done {
		x.execEvent(j, "complete", map[string]any{"status": sj.status})
		x.execEvent(j, "done", nil)
	}
	if len(sj.usage) > 0 {
		// {"<rank>": {peak_memory, cpu_time}, ...}, once, with the end
		u := make(map[string]json.RawMessage, len(sj.usage))
		for rank, v := range sj.usage {
			u[strconv.FormatUint(uint64(rank), 10)] = v
		}
		if b, err := json.Marshal(u); err == nil {
			x.batch.Put(jobDir(j)+".guest.usage", b)
		}
	}
	x.batch.AfterCommit(func(error) {
		j.finish(sj.status)
		j.release()
	})
}

// notifyLost tells the leader shell that the shell on rank is gone (or
// never ran): it stops waiting for that shell's output.
func (s *shellExec) notifyLost(j *execJob, rank uint) {
	sj := j.aux.(*shellJob)
	if leader := sj.plan.Ranks[0]; leader != rank {
		j.x.h.RPC("job-shell.lost", uint32(leader), map[string]any{"id": j.id, "rank": rank}, flux.NoResponse)
	}
}

// signal delivers sig to the job's tasks on every node.
func (s *shellExec) signal(j *execJob, sig syscall.Signal) {
	sj, ok := j.aux.(*shellJob)
	if !ok {
		return
	}
	sj.lastSig = sig
	for _, rank := range sj.plan.Ranks {
		if _, away := sj.detached[rank]; away {
			continue // sent when it comes back
		}
		j.x.h.RPC("job-shell.kill", uint32(rank), map[string]any{"id": j.id, "signum": int(sig)}, flux.NoResponse)
	}
}
