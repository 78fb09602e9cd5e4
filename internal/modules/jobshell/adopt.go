package jobshell

// Taking shells back. Each shell keeps a record (shell-PID: its PID,
// start time and user) in the shell directory while it runs. When the
// module loads it writes the broker's URI there (broker.uri), which the
// shells of an earlier broker poll for, and lists the records of shells
// still running: those are expected back. A shell already connected to
// this broker (the module was reloaded) is asked for its hello; the
// others connect on their own and say hello. Until every expected shell
// is back, or settleTimeout has passed, an attach for a job no shell has
// claimed waits: then it fails, the job's shell is gone.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// settleTimeout bounds the wait for the shells expected back (they poll
// for the broker every 500 ms at most).
const settleTimeout = 10 * time.Second

// adopt looks for shells of an earlier broker or module and tells them
// where this broker is.
func (m *manager) adopt(ctx context.Context) error {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "u") || !e.IsDir() {
			continue
		}
		if uid, err := strconv.ParseUint(name[1:], 10, 32); err == nil {
			m.adoptUserDir(uint32(uid))
		}
	}
	if len(m.expect) == 0 {
		return nil
	}
	m.log.Info("taking back the job shells of the node", "shells", len(m.expect))
	for pid, rec := range m.expect {
		// connected already (a module reload): it answers for itself
		svc := shellproc.ProcessService(rec.Userid, pid)
		f, err := m.h.RPC(svc+".hello", uint32(m.rank), nil, 0)
		if err != nil {
			continue
		}
		f.Then(func(msg *flux.Message, err error) {
			if err != nil {
				return // not connected yet: it will say hello itself
			}
			var hm shellproc.Hello
			if msg.UnmarshalPayload(&hm) != nil {
				return
			}
			// whoever answers on that service is checked as a hello is
			if hm.PID != pid {
				m.log.Warn(fmt.Sprintf("the service of shell %d answered for pid %d: ignored", pid, hm.PID))
				return
			}
			if rec.Userid != m.owner {
				if err := shellOf(rec.Userid, hm.Userid, hm.PID, hm.Service); err != nil {
					m.log.Warn("a shell's hello refused: " + err.Error())
					return
				}
			} else if hm.Userid != m.owner {
				return
			}
			m.adoptShell(hm, "")
		})
	}
	m.settle = time.AfterFunc(settleTimeout, func() { m.post(m.settled) })
	return nil
}

// adoptUserDir tells the shells of uid where this broker is and expects
// those whose records are there back.
func (m *manager) adoptUserDir(uid uint32) {
	dir, err := m.userDir(uid) // writes broker.uri
	if err != nil {
		m.log.Error(err.Error())
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if name := e.Name(); strings.HasPrefix(name, "shell-") && !strings.HasSuffix(name, ".new") {
			m.expectShell(filepath.Join(dir, name), uid)
		}
	}
}

// expectShell reads the record at path, of a shell of uid: one still
// running is expected back; the record of one that is not goes.
func (m *manager) expectShell(path string, uid uint32) {
	rec, err := shellproc.ReadRecord(path)
	if err != nil || rec.Userid != uid || !rec.Alive() {
		os.Remove(path) // it ended without removing it (killed), or is not a record
		return
	}
	if puid, err := procfs.UID(rec.PID); err != nil || puid != uid {
		os.Remove(path)
		return
	}
	m.expect[rec.PID] = rec
}

// hello (job-shell.hello, from a shell as it connects).
func (m *manager) hello(r *flux.Request) {
	var hm shellproc.Hello
	if r.Decode(&hm) != nil {
		return
	}
	if hm.Service == "" || hm.PID <= 0 {
		r.Errorf(syscall.EPROTO, "job-shell.hello: pid and service are required")
		return
	}
	if !r.IsOwner() {
		// a guest's shell: it is what it says, and its user has the
		// directory of its jobs' temporary directories here
		if err := shellOf(r.Userid(), hm.Userid, hm.PID, hm.Service); err != nil {
			r.Errorf(syscall.EPERM, "job-shell.hello: %v", err)
			return
		}
		if err := m.tmpParent(hm.Userid); err != nil {
			r.RespondError(err)
			return
		}
	}
	m.adoptShell(hm, r.Msg.RouteString())
	r.Respond(nil)
}

// adoptShell records a shell that said hello: one this module started,
// or one of an earlier broker with the jobs it holds.
func (m *manager) adoptShell(hm shellproc.Hello, route string) {
	p := m.shells[hm.PID]
	if p == nil {
		p = &proc{pid: hm.PID, idleSince: time.Now()}
		m.shells[hm.PID] = p
	}
	p.uid, p.svc = hm.Userid, hm.Service
	if route != "" {
		p.route = route
	}
	// a guest's claims are checked against each job's user (checkWanted,
	// or job-exec's attach) before the module relays or commits for them
	trusted := hm.Userid == m.owner
	for _, id := range hm.Jobs {
		e := m.byJob[id]
		switch {
		case e != nil && e.p == p:
		case e != nil && e.userid != hm.Userid && m.shells[e.p.pid] == e.p:
			// two users' shells say they hold it: the job's user picks
			e.rivals = append(e.rivals, p)
		default:
			m.byJob[id] = &jobEntry{p: p, userid: hm.Userid, verified: trusted}
			p.busy++
		}
		m.checkWanted(p, id)
	}
	for _, id := range hm.Ended {
		if e := m.byJob[id]; e == nil {
			m.byJob[id] = &jobEntry{p: p, userid: hm.Userid, ended: true, verified: trusted}
			m.checkWanted(p, id)
		} else if e.p != p && e.userid != hm.Userid {
			e.rivals = append(e.rivals, p)
		}
	}
	if p.busy == 0 && p.idleSince.IsZero() {
		p.idleSince = time.Now()
	}
	wasReady := p.ready
	p.ready = true
	if !wasReady {
		w := p.waiting
		p.waiting = nil
		for _, fn := range w {
			fn(nil)
		}
	}
	if _, ok := m.expect[hm.PID]; ok {
		delete(m.expect, hm.PID)
		if len(m.expect) == 0 {
			m.settled()
			return
		}
	}
	// what waited for the jobs this shell holds goes on now (the rest
	// waits again for the shells still expected)
	q := m.queued
	m.queued = nil
	for _, fn := range q {
		fn()
	}
}

// settled: every expected shell is back, or the wait is over. Attaches
// that waited are answered.
func (m *manager) settled() {
	if m.settle != nil {
		m.settle.Stop()
		m.settle = nil
	}
	if n := len(m.expect); n > 0 {
		m.log.Warn("job shells did not come back", "shells", n)
		m.expect = make(map[int]shellproc.Record)
	}
	q := m.queued
	m.queued = nil
	for _, fn := range q {
		fn()
	}
}

// checkWanted looks a job a shell brought back up in its eventlog: the
// job's user must be the shell's (a guest's claim on another user's job
// is dropped), and a job the instance has ended meanwhile (job-exec gave
// up waiting for the shell, or it was canceled while no broker could
// reach it: its eventlog has its clean event) has its tasks killed.
func (m *manager) checkWanted(p *proc, id jobid.ID) {
	f, err := m.h.RPC("job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"eventlog"}, "flags": 0}, 0)
	if err != nil {
		return
	}
	f.Then(func(msg *flux.Message, err error) {
		if err != nil {
			return // no job-info (yet): job-exec's attach decides
		}
		var resp struct {
			Eventlog string `json:"eventlog"`
		}
		if msg.UnmarshalPayload(&resp) != nil {
			return
		}
		owner, ok := submitUserid(resp.Eventlog)
		if !ok {
			return
		}
		m.claimChecked(p, id, owner)
		if !strings.Contains(resp.Eventlog, `"name":"clean"`) {
			return
		}
		e := m.byJob[id]
		if e == nil || e.p != p {
			return
		}
		m.log.Warn(fmt.Sprintf("job %s ended while its shell on %s was away: killing its tasks", id.String(), m.where()))
		m.h.RPC(p.svc+".kill", uint32(m.rank), map[string]any{"id": id, "signum": int(syscall.SIGKILL)}, flux.NoResponse)
		m.jobEnded(id, e) // no one will attach to it
	})
}

// submitUserid reads the job's user from its eventlog's submit event.
func submitUserid(eventlog string) (uint32, bool) {
	first, _, _ := strings.Cut(eventlog, "\n")
	var ev struct {
		Name    string `json:"name"`
		Context struct {
			Userid *uint32 `json:"userid"`
		} `json:"context"`
	}
	if json.Unmarshal([]byte(first), &ev) != nil || ev.Name != "submit" || ev.Context.Userid == nil {
		return 0, false
	}
	return *ev.Context.Userid, true
}

// claimChecked settles p's claim on job id of user owner: the entry is
// the right shell's and verified, or the claim (a shell of another user)
// is dropped.
func (m *manager) claimChecked(p *proc, id jobid.ID, owner uint32) {
	e := m.byJob[id]
	if e == nil {
		return
	}
	if e.userid != owner && !m.pickRival(id, e, owner) {
		if e.p == p {
			m.log.Warn(fmt.Sprintf("a job shell of userid %d said it holds job %s of userid %d: claim dropped", e.userid, id.String(), owner))
			if !e.ended {
				p.busy--
			}
			delete(m.byJob, id)
			e.verify(false)
		}
		return
	}
	e.verify(true)
}
