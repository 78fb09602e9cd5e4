// Package jobexec is the job-exec broker module (RFC 32): it starts the
// jobs the job manager hands it, reports start, release, exceptions and
// finish, enforces the allocation's expiration (time limit) and delivers
// signals. How a job actually runs is up to an implementation: the test
// executor "runs" jobs that say attributes.system.exec.test for a set
// time without processes, so large simulated clusters can be scheduled
// on one machine.
package jobexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/kvsbatch"
	"github.com/fluxgo/fluxgo/internal/memo"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Module is the job-exec module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return "job-exec" }

// impl runs jobs one way or another.
type impl interface {
	// start begins running j; it reports progress through j's methods
	// (on the module goroutine).
	start(j *execJob) error
	// signal delivers sig to a running job's processes.
	signal(j *execJob, sig syscall.Signal)
	// reattach takes back a job that ran before job-exec (or the whole
	// instance) restarted: its processes may still run (reattach.go).
	reattach(j *execJob) error
}

// execJob is one job being executed.
type execJob struct {
	x        *executor
	id       jobid.ID
	userid   uint32
	jobspec  json.RawMessage
	R        json.RawMessage
	req      *flux.Request
	impl     impl
	started  bool
	finished bool
	released bool
	killed   bool
	timers   []*time.Timer
	// expiry: the timers of the time limit (the --signal warning and the
	// timeout), rearmed when the expiration changes
	expiry []*time.Timer
	expGen int // which setExpiration armed the expiry timers
	aux    any // implementation data
	info   jobspecInfo
	// pending: responses made while no job manager listened (between a
	// job manager's reload and its reattach), sent at the reattach
	pending [][]byte
	orphan  bool // detached too long: killed, forgotten when it ends
}

type executor struct {
	h           *flux.Handle
	log         *slog.Logger
	jobs        map[jobid.ID]*execJob
	killTimeout time.Duration
	test        *testExec
	shell       *shellExec
	batch       *kvsbatch.Batch
	specs       *memo.Cache[parsedJobspec] // readJobspec by jobspec text
	// generation identifies the job manager this executor said hello to
	// (0: none yet)
	generation int64
	// reattachTimeout bounds how long a job waits for a shell whose
	// broker went away to come back (job-exec.reattach-timeout)
	reattachTimeout time.Duration
	hosts           []string // by rank, for messages (hostlist)
}

// parsedJobspec is what readJobspec made of a jobspec.
type parsedJobspec struct {
	info jobspecInfo
	err  error
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	x := &executor{
		h:           h,
		log:         flux.NewLogger(h, "job-exec"),
		jobs:        make(map[jobid.ID]*execJob),
		killTimeout: 5 * time.Second,
		specs:       memo.New[parsedJobspec](256),
	}
	if v, err := h.Attr(ctx, "job-exec.kill-timeout"); err == nil {
		if d, err := fsd.ParseDuration(v); err == nil {
			x.killTimeout = d
		}
	}
	x.reattachTimeout = lostShellTimeout
	if sd, _ := h.Attr(ctx, "statedir"); sd != "" {
		x.reattachTimeout = defaultReattachTimeout
	}
	if v, err := h.Attr(ctx, "job-exec.reattach-timeout"); err == nil && v != "" {
		d, err := fsd.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("job-exec.reattach-timeout=%q: want a positive duration (FSD)", v)
		}
		x.reattachTimeout = d
	}
	if hl, err := h.Attr(ctx, "hostlist"); err == nil {
		if l, err := hostlist.Parse(hl); err == nil {
			x.hosts = l.Hosts()
		}
	}
	x.test = &testExec{}
	x.shell = &shellExec{}
	x.batch = kvsbatch.New(h, "")
	h.HandleFunc("job-exec.start", x.handleStart)
	h.HandleFunc("job-exec.kill", x.handleKill)
	h.HandleFunc("job-exec.list", x.handleList)
	h.HandleFunc("job-exec.expiration", x.handleExpiration)
	h.HandleFunc("job-exec.critical-ranks", x.handleCriticalRanks)
	h.HandleFunc("job-exec.grow", x.handleGrow)       // realloc.go (RFC 51)
	h.HandleFunc("job-exec.release", x.handleRelease) // realloc.go
	h.HandleFunc("job-exec.disconnect", x.disconnect)
	// a job manager loaded again (flux module reload job-manager) asks
	// for hellos: see jmOnline
	if err := h.OnOwnerEvent(ctx, "job-manager.online", func(m *flux.Message) { x.jmOnline(ctx, m) }); err != nil {
		return err
	}
	go x.hello(ctx)
	err := h.Serve(ctx)
	// Jobs run on: their shells outlive job-exec and the broker, and the
	// next job-exec reattaches them. Only a broker that shuts down for
	// good (no statedir to restart from) ends what is left.
	if sd, _ := h.Attr(context.Background(), "statedir"); sd == "" && module.BrokerStopping(h) {
		for _, j := range x.jobs {
			j.impl.signal(j, syscall.SIGKILL)
		}
	}
	return err
}

// hello tells the job manager this is its execution service, waiting
// for it to be loaded (ENOSYS) if needed.
func (x *executor) hello(ctx context.Context) {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var resp struct {
			Generation int64 `json:"generation"`
		}
		err := x.h.Call(ctx, "job-manager.exec-hello", flux.NodeidAny, map[string]any{"service": "job-exec", "attached": true}, &resp)
		if err == nil {
			x.h.Post(func() { x.generation = resp.Generation })
			return
		}
		if !errors.Is(err, syscall.ENOSYS) {
			x.log.Error("exec-hello to job-manager failed", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// jmOnline handles a job manager's job-manager.online event. A job
// manager that is not the one this executor said hello to replaced it
// (it was reloaded). The jobs keep running, detached: what they report
// meanwhile is kept, and the new job manager reattaches them (a start
// request with reattach set) once the executor has said hello to it.
// Jobs not reattached within reattachTimeout (the new job manager did
// not know them) are killed.
func (x *executor) jmOnline(ctx context.Context, m *flux.Message) {
	var ev struct {
		Generation int64 `json:"generation"`
	}
	if json.Unmarshal(m.JSON(), &ev) != nil || x.generation == 0 || ev.Generation == x.generation {
		return // not helloed yet (that hello learns it), or ours
	}
	for _, j := range x.jobs {
		j.req = nil
	}
	if n := len(x.jobs); n > 0 {
		x.log.Info("the job manager was reloaded: jobs keep running until it reattaches them", "jobs", n)
		time.AfterFunc(reattachTimeout, func() { x.h.Post(x.reapDetached) })
	}
	x.generation = 0
	go x.hello(ctx)
}

// disconnect detaches the jobs started by a client that went away (the
// job manager, unloaded): they keep running and what they report is
// kept for the next job manager's reattach.
func (x *executor) disconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	n := 0
	for _, j := range x.jobs {
		if j.req != nil && j.req.Msg.RouteString() == route {
			j.req = nil
			n++
		}
	}
	if n > 0 {
		x.log.Info("the job manager went away: jobs keep running until one reattaches them", "jobs", n)
		time.AfterFunc(reattachTimeout, func() { x.h.Post(x.reapDetached) })
	}
}

// reattachTimeout is how long detached jobs wait for a job manager.
const reattachTimeout = 60 * time.Second

// reapDetached kills (and forgets, once they end) the jobs still detached.
func (x *executor) reapDetached() {
	for id, j := range x.jobs {
		if j.req != nil {
			continue
		}
		if j.released {
			delete(x.jobs, id)
			continue
		}
		x.log.Warn("no job manager reattached the job: killing it", "id", id.String())
		j.orphan = true // forgotten once it has ended
		j.kill(syscall.SIGKILL)
	}
}

// reattach binds a reloaded job manager's start request to a job that
// runs already: it hears that the job started (if it did), then what was
// kept while no one listened, then the rest as usual.
func (x *executor) reattach(r *flux.Request, req startRequest) {
	id := req.ID
	j := x.jobs[id]
	switch {
	case j == nil:
		x.reattachNew(r, req) // reattach.go: after a restart of job-exec
		return
	case j.req != nil:
		r.Errorf(syscall.EEXIST, "job %s is attached already", id.String())
		return
	}
	j.req = r
	pending := j.pending
	j.pending = nil
	if j.started {
		j.req.Respond(flux.JSONBuffer(appendResponse(nil, j.id, "start", []byte("{}"))))
	}
	for _, b := range pending {
		j.req.Respond(flux.JSONBuffer(b))
	}
	if j.released {
		j.req.EndStream()
		delete(x.jobs, j.id)
	}
}

// chooseImpl picks how to run a job: the test executor when the jobspec
// asks for it, job shells otherwise.
func (x *executor) chooseImpl(info *jobspecInfo) impl {
	if info.test != nil {
		return x.test
	}
	return x.shell
}

func (x *executor) handleStart(r *flux.Request) {
	req, err := wire.DecodeExecStart(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "job-exec.start: %v", err)
		return
	}
	if req.Reattach {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "job-exec.start is for the job manager only")
			return
		}
		x.reattach(r, req)
		return
	}
	if err := x.prepareStart(r, &req); err != nil {
		r.RespondError(err)
		return
	}
	if _, dup := x.jobs[req.ID]; dup {
		r.Errorf(syscall.EEXIST, "job %s is already running", req.ID.String())
		return
	}
	j := &execJob{x: x, id: req.ID, userid: req.Userid, jobspec: req.Jobspec, R: req.R, req: r}
	p := x.specs.Get(req.Jobspec, func(js []byte) parsedJobspec {
		info, err := readJobspec(js)
		return parsedJobspec{info, err}
	})
	j.info, err = p.info, p.err
	if err != nil {
		j.impl = x.test
		x.jobs[j.id] = j
		j.exception("exec", 0, "jobspec: "+err.Error())
		j.finish(1 << 8)
		j.release()
		return
	}
	impl := x.chooseImpl(&j.info)
	j.impl = impl
	x.jobs[j.id] = j
	x.armExpiration(j)
	if err := impl.start(j); err != nil {
		j.exception("exec", 0, err.Error())
		j.finish(1 << 8)
		j.release()
	}
}

// prepareStart checks a start request and fills in its jobspec.
func (x *executor) prepareStart(r *flux.Request, req *startRequest) error {
	if js, ok := r.Msg.Attached.(wire.AttachedJobspec); ok && req.Jobspec == nil {
		req.Jobspec = json.RawMessage(js) // from the job manager, in-process
	}
	if req.Jobspec == nil {
		return flux.NewError(syscall.EPROTO, "job-exec.start: no jobspec")
	}
	if !r.IsOwner() {
		return flux.NewError(syscall.EPERM, "job-exec.start is for the job manager only")
	}
	return nil
}

// armExpiration raises a timeout exception when the allocation expires,
// then terminates the job.
func (x *executor) armExpiration(j *execJob) {
	j.setExpiration(readExpiration(j.R))
}

// setExpiration (re)arms the job's time limit for expiration (seconds
// since the epoch; 0: none): the --signal=SIG@TIME warning TIME before
// it, and the timeout at it.
func (j *execJob) setExpiration(expiration float64) {
	for _, t := range j.expiry {
		t.Stop()
	}
	j.expiry = nil
	j.expGen++
	gen := j.expGen // a timer that fired before the change does nothing
	if expiration <= 0 {
		return
	}
	// in time left, not as a time: an expiration past 2262 overflows one
	// (fsd.ToDuration saturates: such a limit never fires)
	left := fsd.ToDuration(max(expiration-float64(time.Now().UnixNano())/1e9, 0))
	// --signal=SIG@TIME: warn the job TIME before the end
	if s := j.info.signal; s != nil && s.Signum > 0 {
		at := left - fsd.ToDuration(max(s.Timeleft, 0))
		sig := syscall.Signal(s.Signum)
		j.expiry = append(j.expiry, j.after(max(at, 0), func() {
			if !j.finished && gen == j.expGen {
				j.impl.signal(j, sig)
			}
		}))
	}
	if left == time.Duration(math.MaxInt64) {
		return // longer than any timer
	}
	j.expiry = append(j.expiry, j.after(left, func() {
		if j.finished || gen != j.expGen {
			return
		}
		j.exception("timeout", 0, "resource allocation expired")
		j.kill(syscall.SIGALRM) // as flux-core: tasks that do not catch it end with 128+14
	}))
}

// handleExpiration answers job-exec.expiration {id, expiration}: the job
// manager moved a running job's time limit (flux update of its
// duration); 0 removes it.
func (x *executor) handleExpiration(r *flux.Request) {
	var req struct {
		ID         jobid.ID `json:"id"`
		Expiration float64  `json:"expiration"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-exec.expiration is for the job manager only")
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok || j.finished {
		r.Errorf(syscall.ENOENT, "job %s is not running", req.ID.String())
		return
	}
	if req.Expiration < 0 {
		r.Errorf(syscall.EINVAL, "expiration %g: must be a time after the epoch, or 0 for none", req.Expiration)
		return
	}
	if j.killed {
		r.Errorf(syscall.EINVAL, "job %s is being terminated", req.ID.String())
		return
	}
	j.setExpiration(req.Expiration)
	r.Respond(nil)
}

func (x *executor) handleKill(r *flux.Request) {
	var req struct {
		ID     jobid.ID `json:"id"`
		Signum int      `json:"signum"`
		Fatal  bool     `json:"fatal"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-exec.kill is for the job manager only")
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok {
		r.Errorf(syscall.ENOENT, "job %s is not running", req.ID.String())
		return
	}
	if req.Fatal {
		j.kill(syscall.Signal(req.Signum))
	} else {
		j.impl.signal(j, syscall.Signal(req.Signum))
	}
	r.Respond(nil)
}

func (x *executor) handleList(r *flux.Request) {
	if !r.IsOwner() { // job ids of every user
		r.Errorf(syscall.EPERM, "job-exec.list is for the instance owner")
		return
	}
	ids := make([]jobid.ID, 0, len(x.jobs))
	for id := range x.jobs {
		ids = append(ids, id)
	}
	r.Respond(map[string]any{"jobs": ids})
}

// after runs fn on the module goroutine after d (cancelled when the job
// is done).
func (j *execJob) after(d time.Duration, fn func()) *time.Timer {
	t := time.AfterFunc(d, func() { j.x.h.Post(fn) })
	j.timers = append(j.timers, t)
	return t
}

// kill terminates the job: sig now, SIGKILL after the kill timeout.
func (j *execJob) kill(sig syscall.Signal) {
	if j.finished {
		return
	}
	first := !j.killed
	j.killed = true
	j.impl.signal(j, sig)
	if first && sig != syscall.SIGKILL {
		j.after(j.x.killTimeout, func() {
			if !j.finished {
				j.impl.signal(j, syscall.SIGKILL)
			}
		})
	}
}

// respond sends a job-exec.start response with data, a JSON object.
func (j *execJob) respond(typ string, data []byte) {
	if data == nil {
		data = []byte("{}")
	}
	b := appendResponse(make([]byte, 0, 64+len(data)), j.id, typ, data)
	if j.req == nil {
		if typ != "start" { // a reattach reports the start itself
			j.pending = append(j.pending, b)
		}
		return
	}
	j.req.Respond(flux.JSONBuffer(b))
}

// start reports that the job's tasks are running.
func (j *execJob) start() {
	if j.started {
		return
	}
	j.started = true
	j.respond("start", nil)
}

// exception reports an exception (severity 0 is fatal).
func (j *execJob) exception(typ string, severity int, note string) {
	b := append(make([]byte, 0, 64+len(note)), `{"note":`...)
	b = jsonwire.AppendString(b, note)
	b = append(b, `,"severity":`...)
	b = jsonwire.AppendInt(b, int64(severity))
	b = append(b, `,"type":`...)
	b = jsonwire.AppendString(b, typ)
	j.respond("exception", append(b, '}'))
}

// finish reports the job's wait status.
func (j *execJob) finish(status int) {
	if j.finished {
		return
	}
	j.finished = true
	b := append(make([]byte, 0, 24), `{"status":`...)
	b = jsonwire.AppendInt(b, int64(status))
	j.respond("finish", append(b, '}'))
}

// release gives back all resources and ends the job's exec stream.
func (j *execJob) release() {
	if j.released {
		return
	}
	j.released = true
	j.respond("release", []byte(`{"final":true,"ranks":"all"}`))
	for _, t := range j.timers {
		t.Stop()
	}
	if j.req == nil {
		if j.orphan {
			delete(j.x.jobs, j.id)
		}
		return // detached: kept for the job manager's reattach
	}
	j.req.EndStream()
	delete(j.x.jobs, j.id)
}
