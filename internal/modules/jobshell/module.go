// Package jobshell is the job-shell broker module: on every broker it
// starts the job shells (flux shell processes, internal/shellproc) that
// run the jobs with resources on that node and relays job-exec's
// requests to them. Shells live outside the broker and outlive it; the
// module keeps a pool of them (a shell runs one job at a time and is
// reused for the next job of its user), and after the broker or the
// module restarts it takes back the shells still running on the node
// (adopt.go). The protocol with job-exec is in docs/JOBS.md, the design
// in docs/RESTART.md.
package jobshell

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Module is the job-shell module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return "job-shell" }

type manager struct {
	h    *flux.Handle
	log  *slog.Logger
	rank uint
	host string
	uri  string
	// dir is the shell directory (Dir); exe the binary run as flux shell
	dir    string
	exe    string
	rundir string
	owner  uint32         // the instance owner: shells of other users are guests
	gids   map[uint32]int // users' primary groups (users.go)
	cg     cgroupState
	// statedir: the instance can restart, so jobs outlive a shutdown
	statedir bool

	shells          map[int]*proc            // by PID
	byJob           map[jobid.ID]*jobEntry   // the jobs shells hold
	expect          map[int]shellproc.Record // shells that ran before the module loaded, not back yet
	queued          []func()                 // waiting for the shells expected
	settle          *time.Timer              // bounds the wait for them
	maxIdle, spares int                      // pool sizes (pool.go)
	stopping        bool
}

// jobEntry is a job one of the shells holds (running, or ended and kept
// for a late attach).
type jobEntry struct {
	p      *proc
	userid uint32
	ended  bool
	// exited: the shell said the job's tasks have all exited (its
	// stream may still be ending): a fence has nothing to kill
	exited bool
	// rivals: shells of other users that also said they hold the job
	// (one of them lies); job-exec's attach, which knows the job's
	// user, picks
	rivals []*proc
	// verified: the job is userid's, as job-exec said (it started it
	// here, or attached to it) or its eventlog says; a guest's shell
	// claiming a job it brought back is not, until checked. Commits
	// waiting for that wait in onVerified.
	verified   bool
	onVerified []func(ok bool)
	// cgroups: the task cgroups the module made for the job, delegated
	// to its user until the tasks are placed
	cgroups []string
}

// verify settles the entry's claim and runs what waited for it.
func (e *jobEntry) verify(ok bool) {
	if ok {
		e.verified = true
	}
	w := e.onVerified
	e.onVerified = nil
	for _, fn := range w {
		fn(ok)
	}
}

// Dir returns the shell directory of a broker: where its shells keep
// their records and find its URI. It is in the state directory when the
// broker has one (a restarted instance finds its shells there), in the
// run directory otherwise.
func Dir(statedir, rundir string, rank uint) string {
	if statedir != "" {
		return filepath.Join(statedir, "shells", strconv.FormatUint(uint64(rank), 10))
	}
	return filepath.Join(rundir, "shells")
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	m := &manager{
		h:      h,
		log:    flux.NewLogger(h, "job-shell"),
		shells: make(map[int]*proc),
		byJob:  make(map[jobid.ID]*jobEntry),
		expect: make(map[int]shellproc.Record),
		gids:   make(map[uint32]int),
	}
	if err := m.configure(ctx, args); err != nil {
		return err
	}
	ccfg, err := shellproc.LoadContainConfig(ctx, h)
	if err != nil {
		return err
	}
	m.initCgroups(ccfg)
	h.HandleFunc("job-shell.start", m.start)
	h.HandleFunc("job-shell.attach", m.attach)
	h.HandleFunc("job-shell.hello", m.hello)
	h.HandleFunc("job-shell.list", m.list)
	h.HandleFunc("job-shell.pids", m.pids)
	m.registerFence() // fence.go
	for _, method := range []string{"kill", "stdin", "pmi-fence", "output", "lost", "grow"} {
		h.HandleFunc("job-shell."+method, m.relayByJob)
	}
	h.HandleFunc("job-shell.disconnect", m.disconnect)
	h.HandleFunc(shellproc.CommitRelay, m.commit) // commit.go
	if err := m.adopt(ctx); err != nil {          // adopt.go
		return err
	}
	stop := m.runPool(ctx) // pool.go
	defer stop()
	err = h.Serve(ctx)
	m.unload()
	return err
}

// configure reads the module's settings: args shell=PATH, then broker
// attributes.
func (m *manager) configure(ctx context.Context, args []string) error {
	rs, err := m.h.Attr(ctx, "rank")
	if err != nil {
		return err
	}
	rank, _ := strconv.ParseUint(rs, 10, 32)
	m.rank = uint(rank)
	m.host, _ = m.h.Attr(ctx, "hostname")
	if m.uri, err = m.h.Attr(ctx, "local-uri"); err != nil {
		return err
	}
	rundir, err := m.h.Attr(ctx, "rundir")
	if err != nil {
		return err
	}
	m.rundir = rundir
	m.owner = uint32(os.Geteuid())
	statedir, _ := m.h.Attr(ctx, "statedir")
	m.statedir = statedir != ""
	m.dir = Dir(statedir, rundir, m.rank)
	if v, err := m.h.Attr(ctx, "job-shell.dir"); err == nil && v != "" {
		m.dir = v
	}
	if m.exe, err = os.Executable(); err != nil {
		return fmt.Errorf("job-shell: the flux binary: %w", err)
	}
	if v, err := m.h.Attr(ctx, "job-shell.path"); err == nil && v != "" {
		m.exe = v
	}
	m.maxIdle, m.spares = defaultMaxIdle(), 1
	if v, err := m.h.Attr(ctx, SparesAttr); err == nil && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxSpares {
			return fmt.Errorf("job-shell: %s=%q: want a count from 0 to %d", SparesAttr, v, maxSpares)
		}
		m.spares = n
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case ok && k == "shell":
			m.exe = v
		case ok && k == "spares":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxSpares {
				return fmt.Errorf("job-shell: spares=%q: want a count from 0 to %d", v, maxSpares)
			}
			m.spares = n
		default:
			return fmt.Errorf("job-shell: unknown argument %q (shell=PATH, spares=N)", a)
		}
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fmt.Errorf("job-shell: shell directory: %w", err)
	}
	return nil
}

// where names this node in messages.
func (m *manager) where() string {
	if m.host != "" {
		return fmt.Sprintf("rank %d (%s)", m.rank, m.host)
	}
	return fmt.Sprintf("rank %d", m.rank)
}

type startHead struct {
	ID     jobid.ID `json:"id"`
	Userid uint32   `json:"userid"`
}

// start (job-shell.start, streaming, from job-exec) runs the job's part
// on this node in a shell of the pool and relays the shell's stream.
func (m *manager) start(r *flux.Request) {
	var req startHead
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.start is for job-exec only")
		return
	}
	if e := m.byJob[req.ID]; e != nil && !e.ended {
		if e.verified && e.userid == req.Userid {
			r.Errorf(syscall.EEXIST, "job %s is already running here", req.ID.String())
			return
		}
		// a claim no one checked (a shell brought it back), that job-exec
		// starting the job here now shows false
		m.log.Warn(fmt.Sprintf("job %s starts here: the claim of the shell of userid %d that said it held it is dropped", req.ID.String(), e.userid))
		m.jobGone(req.ID, e)
		e.verify(false)
	}
	payload := r.Msg.JSON()
	var cgroups []string
	if req.Userid != m.owner {
		mc, err := m.jobCgroups(req.ID, req.Userid, payload) // cgroups.go
		if err != nil {
			r.RespondError(fmt.Errorf("job %s on %s: %w", req.ID.String(), m.where(), err))
			return
		}
		if mc != nil {
			payload = withCgroups(payload, mc)
			cgroups = mc.Procs() // cgroups.go: revoked at the start
		}
	}
	p := m.take(req.Userid) // pool.go: a shell of the job's user
	e := &jobEntry{p: p, userid: req.Userid, verified: true, cgroups: cgroups}
	m.byJob[req.ID] = e
	p.busy++
	p.whenReady(func(err error) {
		if err != nil {
			m.jobGone(req.ID, e)
			r.RespondError(fmt.Errorf("job shell on %s: %w", m.where(), err))
			return
		}
		m.relayStream(r, e, req.ID, "start", payload)
	})
}

// relayStream sends method to the job's shell and relays its stream of
// responses to r.
func (m *manager) relayStream(r *flux.Request, e *jobEntry, id jobid.ID, method string, payload []byte) {
	f, err := m.h.RPCRaw(e.p.svc+"."+method, uint32(m.rank), payload, flux.Streaming)
	if err != nil {
		m.jobEnded(id, e)
		r.RespondError(err)
		return
	}
	exited := false
	f.Then(func(msg *flux.Message, err error) {
		if err != nil {
			switch {
			case flux.ErrnoOf(err) != syscall.ENODATA:
				if !e.ended && e.p.pid > 0 && procfs.Gone(e.p.pid) {
					m.orphaned(e.p, []jobid.ID{id}) // pool.go: its shell died
				}
				if method == "start" {
					m.jobGone(id, e)
				}
				r.RespondError(err)
				return
			case exited:
				m.jobEnded(id, e)
			}
			r.EndStream()
			return
		}
		b := msg.JSON()
		if e.cgroups != nil && bytes.Contains(b, []byte(`"type":"start"`)) {
			revoke(e.cgroups) // cgroups.go: the tasks are placed
			e.cgroups = nil
		}
		if !exited && bytes.Contains(b, []byte(`"type":"exit"`)) {
			exited = true
			e.exited = true
		}
		r.RespondRaw(b)
	})
}

// jobEnded: the job's stream ended; the shell keeps its record a while.
func (m *manager) jobEnded(id jobid.ID, e *jobEntry) {
	if e.ended {
		return
	}
	e.end()
	m.removeJobCgroup(id, e.userid)
	time.AfterFunc(shellproc.EndedLinger, func() {
		m.h.Post(func() {
			if m.byJob[id] == e {
				delete(m.byJob, id)
			}
		})
	})
}

// jobGone forgets a job its shell does not have.
func (m *manager) jobGone(id jobid.ID, e *jobEntry) {
	if !e.ended {
		e.end()
		m.removeJobCgroup(id, e.userid)
	}
	if m.byJob[id] == e {
		delete(m.byJob, id)
	}
}

// end counts the job as no longer running in its shell.
func (e *jobEntry) end() {
	e.ended = true
	e.p.busy--
	if e.p.busy == 0 {
		e.p.idleSince = time.Now()
	}
}

// attach (job-shell.attach {id}, streaming, from job-exec) binds a new
// stream to a job a shell here holds. While shells that ran before the
// module loaded are still coming back, it waits for them.
func (m *manager) attach(r *flux.Request) {
	var req struct {
		ID     jobid.ID `json:"id"`
		Userid *uint32  `json:"userid"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.attach is for job-exec only")
		return
	}
	if e := m.byJob[req.ID]; e != nil && req.Userid != nil && e.userid != *req.Userid {
		if !m.pickRival(req.ID, e, *req.Userid) {
			// a shell of another user claimed it: that claim is false;
			// the job's own shell may still be coming back
			m.log.Warn(fmt.Sprintf("job %s is userid %d's: the claim of a shell of userid %d is dropped", req.ID.String(), *req.Userid, e.userid))
			m.jobGone(req.ID, e)
			e.verify(false)
		}
	}
	if e := m.byJob[req.ID]; e != nil && req.Userid != nil && e.userid == *req.Userid {
		e.verify(true) // job-exec knows the job's user
	}
	if e := m.byJob[req.ID]; e != nil && e.p.ready {
		if e.ended {
			// the job ended and its stream was relayed: a job-exec that
			// lost its end asks again
			e.ended = false
			e.p.busy++
		}
		e.exited = false // the relayed stream says again whether it did
		m.relayStream(r, e, req.ID, "attach", r.Msg.JSON())
		return
	}
	if len(m.expect) > 0 {
		m.queued = append(m.queued, func() { m.attach(r) })
		return
	}
	r.Errorf(syscall.ENOENT, "no job shell on %s holds job %s: it did not survive (its node or shell restarted)", m.where(), req.ID.String())
}

// relayByJob relays job-shell.METHOD {id, ...} to the shell holding id.
func (m *manager) relayByJob(r *flux.Request) {
	var req struct {
		ID jobid.ID `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	e := m.byJob[req.ID]
	if !r.IsOwner() && e != nil && !e.verified && e.userid == r.Userid() && guestRelayed(r.Topic()) {
		// a job a shell brought back, not checked yet: relay once it is
		e.onVerified = append(e.onVerified, func(bool) { m.relayByJob(r) })
		return
	}
	if !r.IsOwner() && e == nil && len(m.expect) > 0 && guestRelayed(r.Topic()) {
		// the job's shell here may be one still coming back (a shell of
		// the job on another node reconnected first): its claim is
		// checked once it is back, and this request with it
		m.queued = append(m.queued, func() { m.relayByJob(r) })
		return
	}
	if !r.IsOwner() && !m.guestMayRelay(r, e) {
		r.Errorf(syscall.EPERM, "%s is for job-exec and the job's shells only", r.Topic())
		return
	}
	if (e == nil || !e.p.ready) && len(m.expect) > 0 {
		// its shell may be one still coming back
		m.queued = append(m.queued, func() { m.relayByJob(r) })
		return
	}
	if e == nil || !e.p.ready {
		r.Errorf(syscall.ENOENT, "job %s is not running on %s", req.ID.String(), m.where())
		return
	}
	m.relay(r, e.p, r.Topic()[len("job-shell."):])
}

// guestMayRelay: a guest's shell sends the shells of its job on other
// nodes output, PMI and stdin (the requests a shell of the job's user
// sends); everything else is job-exec's.
func (m *manager) guestMayRelay(r *flux.Request, e *jobEntry) bool {
	return guestRelayed(r.Topic()) && e != nil && e.verified && e.userid == r.Userid()
}

// guestRelayed names the methods a guest's shell sends its job's other
// shells.
func guestRelayed(topic string) bool {
	switch topic {
	case "job-shell.output", "job-shell.pmi-fence", "job-shell.stdin", "job-shell.lost":
		return true
	}
	return false
}

// pickRival makes the shell of userid that also claimed id the job's,
// in place of e's (a shell of another user that claimed it first).
func (m *manager) pickRival(id jobid.ID, e *jobEntry, userid uint32) bool {
	for _, p := range e.rivals {
		if p.uid == userid && m.shells[p.pid] == p {
			if !e.ended {
				e.p.busy--
				p.busy++
			}
			m.log.Warn(fmt.Sprintf("job %s: a shell of userid %d claimed it; it is userid %d's", id.String(), e.userid, userid))
			e.p, e.userid, e.rivals = p, userid, nil
			return true
		}
	}
	return false
}

// relay passes r to the shell's method and its answer back.
func (m *manager) relay(r *flux.Request, p *proc, method string) {
	var flags uint8
	if r.Msg.NoResponse() {
		flags = flux.NoResponse
	}
	f, err := m.h.RPCRaw(p.svc+"."+method, uint32(m.rank), r.Msg.JSON(), flags)
	if err != nil {
		r.RespondError(err)
		return
	}
	if flags != 0 {
		return
	}
	f.Then(func(msg *flux.Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.RespondRaw(msg.JSON())
	})
}

// pids (job-shell.pids {id}): the job's owner and the instance owner may
// ask for its task PIDs here (flux job hostpids).
func (m *manager) pids(r *flux.Request) {
	var req struct {
		ID jobid.ID `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	e := m.byJob[req.ID]
	if e == nil || e.ended || !e.p.ready {
		r.Errorf(syscall.ENOENT, "no tasks of job %s here", req.ID.String())
		return
	}
	if !r.IsOwner() && r.Userid() != e.userid {
		r.Errorf(syscall.EPERM, "job %s belongs to another user", req.ID.String())
		return
	}
	m.relay(r, e.p, "pids")
}

// list (job-shell.list): the jobs running here (instance owner).
func (m *manager) list(r *flux.Request) {
	if !r.IsOwner() { // job ids of every user
		r.Errorf(syscall.EPERM, "job-shell.list is for the instance owner")
		return
	}
	ids := make([]jobid.ID, 0, len(m.byJob))
	for id, e := range m.byJob {
		if !e.ended {
			ids = append(ids, id)
		}
	}
	shells := make([]map[string]any, 0, len(m.shells))
	for _, p := range m.shells {
		shells = append(shells, map[string]any{"pid": p.pid, "ready": p.ready, "busy": p.busy})
	}
	r.Respond(map[string]any{"jobs": ids, "shells": shells})
}
