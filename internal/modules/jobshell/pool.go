package jobshell

// The pool of shells. Starting a process costs more than the rest of a
// small job (bench/exec: a fork+exec+wait of /bin/true alone takes about
// a third of the CPU a whole /bin/true job does, a Go program three
// times that), so a shell is not started per job: a shell runs one job at
// a time and, once that job has ended, waits for the next one of its
// user. The module keeps `spares` shells started ahead (default 1), so a
// job seldom waits for a shell to start, and lets an idle shell go after
// idleTimeout, or sooner when more than maxIdle are idle.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// proc is one shell process.
type proc struct {
	pid   int
	uid   uint32
	svc   string
	route string // its connection (for job-shell.disconnect)
	ready bool   // it said hello
	// waiting: jobs given to it before it said hello
	waiting   []func(error)
	busy      int // jobs running
	idleSince time.Time
	exiting   bool
	cleaned   map[jobid.ID]bool // jobs whose leftovers were ended (orphaned)
}

const (
	// idleTimeout is how long an idle shell is kept.
	idleTimeout = time.Minute
	// minIdle: a shell idle less long than this holds records of the
	// jobs it ran that a restarted job-exec may ask for.
	minIdle = shellproc.EndedLinger + 5*time.Second
	// spareDelay is how long after the module loads the spares start.
	spareDelay = 500 * time.Millisecond
	// maxSpares bounds the spares asked for (each is a process).
	maxSpares = 64
)

// SparesAttr is the broker attribute that sets how many idle shells the
// pool keeps started ahead (default 1; the module's spares=N argument
// wins). 0 starts a shell only when a job needs one: what a test
// instance with more brokers than this host has cores gets (package
// instance), where a spare per broker would double the processes
// starting at once.
const SparesAttr = "job-shell.spares"

func defaultMaxIdle() int { return max(2, runtime.NumCPU()) }

// whenReady runs fn once the shell has said hello (or with the error
// that it never will).
func (p *proc) whenReady(fn func(error)) {
	if p.ready {
		fn(nil)
		return
	}
	p.waiting = append(p.waiting, fn)
}

// take returns an idle shell of uid, or a new one; a spare is started
// to take the place of the one taken.
func (m *manager) take(uid uint32) *proc {
	var best *proc
	for pid, p := range m.shells {
		if p.uid != uid || p.busy > 0 || p.exiting {
			continue
		}
		if p.route == "" && p.ready && procfs.Gone(pid) {
			// gone without a word: one taken back by its answer to the
			// module's hello has no connection whose end the module hears
			// (the others' ends it hears: their exit or disconnect)
			delete(m.shells, pid)
			p.exiting = true
			m.forgetShell(p)
			continue
		}
		// a ready one first; then the one idle the shortest (warm)
		if best == nil || (p.ready && !best.ready) || (p.ready == best.ready && p.idleSince.After(best.idleSince)) {
			best = p
		}
	}
	if best == nil {
		best = m.spawn(uid)
	}
	if m.idle(uid) <= m.spares {
		m.post(func() { m.topUp(uid) })
	}
	return best
}

// post runs fn soon on the module goroutine.
func (m *manager) post(fn func()) { m.h.Post(fn) }

// idle counts the shells of uid not running a job.
func (m *manager) idle(uid uint32) int {
	n := 0
	for _, p := range m.shells {
		if p.uid == uid && p.busy == 0 && !p.exiting {
			n++
		}
	}
	return n
}

// topUp starts shells of uid until spares of them are idle.
func (m *manager) topUp(uid uint32) {
	if m.stopping {
		return
	}
	for m.idle(uid) < m.spares {
		if p := m.spawn(uid); p.exiting {
			return // it could not start: the next job will say why
		}
	}
}

// spawn starts a shell process. It runs in a session of its own, so that
// it and its tasks outlive the broker; its output goes to shells.log in
// its user's shell directory (what it says while connected goes to the
// broker's log). On failure it returns a proc whose waiters get the
// error.
func (m *manager) spawn(uid uint32) *proc {
	p := &proc{uid: uid, idleSince: time.Now()}
	cmd, cleanup, err := m.shellCommand(uid)
	if err == nil {
		err = cmd.Start()
		cleanup()
	}
	if err != nil {
		m.log.Error("cannot start a job shell", "exe", m.exe, "userid", uid, "err", err)
		p.exiting = true
		go m.post(func() { m.failed(p, fmt.Errorf("cannot start %s shell as userid %d: %w", m.exe, uid, err)) })
		return p
	}
	p.pid = cmd.Process.Pid
	m.shells[p.pid] = p
	go func() {
		err := cmd.Wait()
		m.post(func() { m.exited(p, err) })
	}()
	return p
}

// shellCommand prepares the command of a shell of uid: it runs in a
// session of its own, with its user's directory as descriptor 3 and
// its user's shells.log as output. A guest's is started as root with
// --user, and becomes that user before anything else (shellproc.DropTo),
// with none of the broker's environment; on cgroup v2 it starts in its
// user's cgroup (cgroups.go). cleanup closes what the parent no longer
// needs once the command started.
func (m *manager) shellCommand(uid uint32) (*exec.Cmd, func(), error) {
	dir, err := m.userDir(uid) // users.go
	if err == nil {
		err = m.tmpParent(uid)
	}
	if err != nil {
		return nil, nil, err
	}
	dirf, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"shell", "--uri", m.uri, "--dir", dir, "--dir-fd", "3"}
	if uid != m.owner {
		args = append(args, "--user", strconv.FormatUint(uint64(uid), 10))
	}
	cmd := exec.Command(m.exe, args...)
	cmd.ExtraFiles = []*os.File{dirf}
	attr := &syscall.SysProcAttr{Setsid: true}
	cmd.SysProcAttr = attr
	logf := m.shellLog(dir, uid)
	if logf != nil {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	cgfd := -1
	cleanup := func() {
		dirf.Close()
		if logf != nil {
			logf.Close()
		}
		if cgfd >= 0 {
			syscall.Close(cgfd)
		}
	}
	if uid != m.owner {
		cmd.Env = shellproc.ShellEnv()
		if cgfd = m.shellCgroupFD(uid); cgfd >= 0 {
			attr.UseCgroupFD, attr.CgroupFD = true, cgfd
		}
	}
	return cmd, cleanup, nil
}

// failed tells the shell's waiters it will not run their jobs.
func (m *manager) failed(p *proc, err error) {
	w := p.waiting
	p.waiting = nil
	for _, fn := range w {
		fn(err)
	}
}

// exited: a shell process this broker started has ended.
func (m *manager) exited(p *proc, err error) {
	if m.shells[p.pid] == p {
		delete(m.shells, p.pid)
	}
	p.exiting = true
	if !p.ready {
		why := "it exited before it connected"
		if err != nil {
			why = fmt.Sprintf("it exited before it connected (%v; see %s)", err, filepath.Join(m.dir, "u"+strconv.FormatUint(uint64(p.uid), 10), "shells.log"))
		}
		m.failed(p, errors.New(why))
	}
	m.forgetShell(p)
}

// forgetShell drops the jobs of a shell that went away: their relayed
// streams fail on their own. A shell that went while it ran jobs (killed:
// its user may kill their own shell) leaves what is left of them to the
// module: the processes of its session are killed and the jobs'
// temporary directories removed.
func (m *manager) forgetShell(p *proc) {
	var orphans []jobid.ID
	for id, e := range m.byJob {
		if e.p == p {
			if !e.ended {
				orphans = append(orphans, id)
			}
			delete(m.byJob, id)
		}
	}
	if len(orphans) > 0 {
		m.orphaned(p, orphans)
	}
	if !m.stopping && m.spares > 0 {
		m.post(func() { m.topUp(p.uid) })
	}
}

// orphaned ends what is left of jobs whose shell p died under them (its
// user may kill their own shell): the processes of its session are
// killed, the jobs' cgroups and temporary directories removed.
func (m *manager) orphaned(p *proc, ids []jobid.ID) {
	if p.cleaned == nil {
		p.cleaned = make(map[jobid.ID]bool)
	}
	n := 0
	for _, id := range ids {
		if !p.cleaned[id] {
			p.cleaned[id] = true
			ids[n] = id
			n++
		}
	}
	if ids = ids[:n]; n == 0 {
		return
	}
	m.log.Warn(fmt.Sprintf("a job shell (pid %d, userid %d) went while it ran %d jobs: ending what is left of them", p.pid, p.uid, len(ids)))
	killSession(p.pid, p.uid)
	parent := m.rundir
	if p.uid != m.owner {
		parent = shellproc.TmpParent(m.rundir, p.uid)
	}
	for _, id := range ids {
		m.removeJobCgroup(id, p.uid)
		go os.RemoveAll(filepath.Join(parent, fmt.Sprintf("jobtmp-%d-%s", m.rank, id.F58(true))))
	}
}

// killSession kills the processes of uid in session sid (a shell's: it
// is its session's leader, and its tasks are in it unless they left).
func killSession(sid int, uid uint32) {
	if sid <= 1 {
		return
	}
	for _, pid := range procfs.PIDs() {
		if pid <= 1 {
			continue
		}
		if s, err := procfs.Session(pid); err != nil || s != sid {
			continue
		}
		if puid, err := procfs.UID(pid); err == nil && puid == uid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// disconnect: a client of the module went away; if it was a shell (it
// exited, or gave up), its jobs are no more.
func (m *manager) disconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	for pid, p := range m.shells {
		if p.route == route {
			delete(m.shells, pid)
			p.exiting = true
			m.forgetShell(p)
		}
	}
	if !r.Msg.NoResponse() {
		r.Respond(nil) // sent by hand: it names only the sender's own connection
	}
}

// runPool starts the spares and the idle reaper; the returned function
// stops the reaper.
func (m *manager) runPool(ctx context.Context) func() {
	// the spares start a little after the module: not in the way of
	// the instance's own start (a first job starts its shell itself)
	spare := time.AfterFunc(spareDelay, func() { m.post(func() { m.topUp(uint32(os.Getuid())) }) })
	if m.spares == 0 {
		spare.Stop()
	}
	t := time.NewTicker(5 * time.Second)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-t.C:
				m.post(m.reap)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { spare.Stop(); t.Stop(); close(done) }
}

// reap lets idle shells go: those idle longer than idleTimeout, and the
// longest idle beyond maxIdle (never one idle less than minIdle, nor the
// spares).
func (m *manager) reap() {
	var idle []*proc
	for _, p := range m.shells {
		if p.ready && p.busy == 0 && !p.exiting {
			idle = append(idle, p)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].idleSince.Before(idle[j].idleSince) })
	keep := max(m.spares, 0)
	for i, p := range idle {
		left := len(idle) - i
		d := time.Since(p.idleSince)
		if left <= keep || d < minIdle {
			continue
		}
		if d > idleTimeout || left > m.maxIdle {
			m.release(p)
		}
	}
}

// release asks an idle shell to exit.
func (m *manager) release(p *proc) {
	p.exiting = true
	f, err := m.h.RPC(p.svc+".exit", uint32(m.rank), nil, 0)
	if err != nil {
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil && flux.ErrnoOf(err) == syscall.EBUSY {
			p.exiting = false // it took a job meanwhile
		}
	})
}

// unload: the module stops. Idle shells are let go; shells running jobs
// go on, and the next module or broker on this node takes them back.
//
// When the broker itself shuts down and the instance has no statedir,
// no broker will take them back: they end their jobs and exit.
func (m *manager) unload() {
	m.stopping = true
	final := !m.statedir && module.BrokerStopping(m.h)
	n := 0
	var exits []*flux.Future
	for _, p := range m.shells {
		switch {
		case p.busy == 0 && p.ready:
			// told to exit, and the answers awaited (briefly): a request
			// still queued when the broker closes the connection is lost,
			// and a shell holding records of ended jobs would wait a
			// minute for a broker to come back
			p.exiting = true
			if f, err := m.h.RPC(p.svc+".exit", uint32(m.rank), nil, 0); err == nil {
				exits = append(exits, f)
			}
		case final && p.ready:
			m.h.RPC(p.svc+".give-up", uint32(m.rank), nil, flux.NoResponse)
		case p.busy > 0:
			n++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	for _, f := range exits {
		f.Get(ctx)
	}
	cancel()
	if n > 0 {
		m.log.Info(fmt.Sprintf("%d job shells keep running their jobs until a broker takes them back", n))
	}
	m.dropCgroups() // cgroups.go
}
