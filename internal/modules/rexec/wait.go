package rexec

import (
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

// This file holds the RFC 42 requests on processes already started:
// wait (collect a waitable background process's status) and attach
// (receive a background process's output and status as if it had been
// started streaming). Both consume the exit status, so they exclude
// each other.

// find looks a process up by label, or by pid when label is empty.
func (s *server) find(pid int, label string) (*proc, error) {
	if label != "" {
		if p := s.labels[label]; p != nil {
			return p, nil
		}
		return nil, flux.NewError(syscall.ESRCH, "label "+label+" does not belong to any subprocess")
	}
	if p := s.procs[pid]; p != nil {
		return p, nil
	}
	return nil, flux.NewError(syscall.ESRCH, "pid "+strconv.Itoa(pid)+" does not belong to any subprocess")
}

func (s *server) watch(route string, p *proc) {
	m := s.watches[route]
	if m == nil {
		m = make(map[*proc]bool)
		s.watches[route] = m
	}
	m[p] = true
}

func (s *server) unwatch(route string, p *proc) {
	if m := s.watches[route]; m != nil {
		delete(m, p)
		if len(m) == 0 {
			delete(s.watches, route)
		}
	}
}

// handleWait answers once a waitable process has ended: its wait status
// and the output it retained. A process that ended already is answered
// at once; either way it is then forgotten.
func (s *server) handleWait(r *flux.Request) {
	var req subprocess.WaitRequest
	if r.Decode(&req) != nil || !s.allowed(r) {
		return
	}
	p, err := s.find(req.Pid, req.Label)
	switch {
	case err != nil:
		r.RespondError(err)
		return
	case !p.waitable || p.collected:
		r.Errorf(syscall.EINVAL, "process is not waitable")
		return
	case p.waiter != nil:
		r.Errorf(syscall.EINVAL, "process is already being waited on")
		return
	case p.attachRoute != "":
		r.Errorf(syscall.EBUSY, "subprocess has a client attached")
		return
	}
	p.waiter, p.waiterRoute = r, r.Msg.RouteString()
	s.watch(p.waiterRoute, p)
	if p.completed {
		s.respondWait(p)
		s.forget(p)
		s.checkDrained()
	}
}

// respondWait answers p's waiter with its status (p has completed).
func (s *server) respondWait(p *proc) {
	p.mu.Lock()
	resp := subprocess.WaitResponse{Status: int(p.status), Output: p.retained}
	p.mu.Unlock()
	p.waiter.Respond(resp)
	s.unwatch(p.waiterRoute, p)
	p.waiter, p.waiterRoute = nil, ""
	p.collected = true
}

// handleAttach makes the sender the listener of a background process:
// an "attached" response with the command, an EOF for each forwarded
// stream already closed, then output as it comes, "finished" and the
// end of the stream. Output from before the attach is not replayed.
func (s *server) handleAttach(r *flux.Request) {
	var req subprocess.AttachRequest
	if r.Decode(&req) != nil || !s.allowed(r) {
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "attach request is missing STREAMING flag")
		return
	}
	p, err := s.find(req.Pid, req.Label)
	switch {
	case err != nil:
		r.Errorf(syscall.ENOENT, "%s", flux.ErrorText(err))
		return
	case !p.bg:
		r.Errorf(syscall.EBUSY, "subprocess is not in background mode")
		return
	case p.attachRoute != "":
		r.Errorf(syscall.EBUSY, "subprocess already has a client attached")
		return
	case p.waiter != nil:
		r.Errorf(syscall.EBUSY, "subprocess is being waited on")
		return
	case p.collected:
		r.Errorf(syscall.ENOENT, "pid %d does not belong to any subprocess", p.pid)
		return
	}
	p.mu.Lock()
	p.listener, p.lflags = r, req.Flags
	r.Respond(subprocess.AttachedResponse{Type: subprocess.TypeAttached, Pid: p.pid, Cmd: *p.cmd})
	for _, stream := range []string{"stdout", "stderr"} {
		if p.eof[streamIndex(stream)] && p.forwardsLocked(stream) {
			p.respondOutputLocked(stream, nil, true)
		}
	}
	if p.reaped {
		r.Respond(subprocess.FinishedResponse{Type: subprocess.TypeFinished, Status: int(p.status)})
	}
	p.mu.Unlock()
	if p.completed { // a zombie: the whole sequence is sent, reap it
		p.mu.Lock()
		p.listener = nil
		p.mu.Unlock()
		r.EndStream()
		p.collected = true
		s.forget(p)
		s.checkDrained()
		return
	}
	p.attachRoute = r.Msg.RouteString()
	s.watch(p.attachRoute, p)
}

// detach returns an attached process to the background (its client went
// away). Serve goroutine only.
func (p *proc) detach() {
	p.mu.Lock()
	p.listener = nil
	p.mu.Unlock()
	p.attachRoute = ""
}
