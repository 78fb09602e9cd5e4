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
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/pkg/flux"
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
}

const (
	// idleTimeout is how long an idle shell is kept.
	idleTimeout = time.Minute
	// minIdle: a shell idle less long than this holds records of the
	// jobs it ran that a restarted job-exec may ask for.
	minIdle = shellproc.EndedLinger + 5*time.Second
	// spareDelay is how long after the module loads the spares start.
	spareDelay = 500 * time.Millisecond
)

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
	for _, p := range m.shells {
		if p.uid != uid || p.busy > 0 || p.exiting {
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
// the shell directory (what it says while connected goes to the broker's
// log). On failure it returns a proc whose waiters get the error.
func (m *manager) spawn(uid uint32) *proc {
	p := &proc{uid: uid, idleSince: time.Now()}
	logf, err := os.OpenFile(filepath.Join(m.dir, "shells.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		m.log.Error("cannot open the shells' log", "err", err)
		logf = nil
	}
	cmd, cleanup, err := m.shellCommand(uid)
	if err == nil {
		if logf != nil {
			cmd.Stdout, cmd.Stderr = logf, logf
		}
		err = cmd.Start()
		cleanup()
	}
	if logf != nil {
		logf.Close()
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
// session of its own, with its user's directory as descriptor 3; a
// guest's runs as that user, from the binary the module holds open, in
// its user's cgroup on cgroup v2 (cgroups.go). cleanup closes what the
// parent no longer needs once the command started.
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
	cmd := exec.Command(m.exe, "shell", "--uri", m.uri, "--dir", dir, "--dir-fd", "3")
	cmd.ExtraFiles = []*os.File{dirf}
	attr := &syscall.SysProcAttr{Setsid: true}
	cmd.SysProcAttr = attr
	cgfd := -1
	cleanup := func() {
		dirf.Close()
		if cgfd >= 0 {
			syscall.Close(cgfd)
		}
	}
	if uid != m.owner {
		cred, err := shellproc.UserCredential(uid)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		attr.Credential = cred
		// the path may be out of the user's reach; the file is not
		cmd.Path = "/proc/self/fd/" + strconv.Itoa(int(m.exeFile.Fd()))
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
			why = fmt.Sprintf("it exited before it connected (%v; see %s)", err, filepath.Join(m.dir, "shells.log"))
		}
		m.failed(p, errors.New(why))
	}
	m.forgetShell(p)
}

// forgetShell drops the jobs of a shell that went away: their relayed
// streams fail on their own.
func (m *manager) forgetShell(p *proc) {
	for id, e := range m.byJob {
		if e.p == p {
			delete(m.byJob, id)
		}
	}
	if !m.stopping && m.spares > 0 {
		m.post(func() { m.topUp(p.uid) })
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
}

// runPool starts the spares and the idle reaper; the returned function
// stops the reaper.
func (m *manager) runPool(ctx context.Context) func() {
	// the spares start a little after the module: not in the way of
	// the instance's own start (a first job starts its shell itself)
	spare := time.AfterFunc(spareDelay, func() { m.post(func() { m.topUp(uint32(os.Getuid())) }) })
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
	for _, p := range m.shells {
		switch {
		case p.busy == 0 && p.ready:
			m.release(p)
		case final && p.ready:
			m.h.RPC(p.svc+".give-up", uint32(m.rank), nil, flux.NoResponse)
		case p.busy > 0:
			n++
		}
	}
	if n > 0 {
		m.log.Info(fmt.Sprintf("%d job shells keep running their jobs until a broker takes them back", n))
	}
	m.dropCgroups() // cgroups.go
}
