package subprocess

import (
	"context"
	"fmt"
	"io"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// This file holds the client side of the RFC 42 requests that start a
// process in the background or act on one already running: background
// exec, attach, wait, kill by label and list.

// Target names a process on a subprocess server: by Label when it is
// set, otherwise by Pid.
type Target struct {
	Service string // empty means Service ("rexec")
	Pid     int
	Label   string
}

func (t Target) service() string {
	if t.Service == "" {
		return Service
	}
	return t.Service
}

// String describes the target as error messages name it: "label L" or
// "pid N".
func (t Target) String() string {
	if t.Label != "" {
		return "label " + t.Label
	}
	return fmt.Sprintf("pid %d", t.Pid)
}

// Background starts cmd on rank in the background and returns its pid
// once it runs. Its stdin is at EOF and its output goes to the server's
// log (cmd's writers are ignored). A waitable process stays on its
// server as a zombie once it ends, until a Wait or an Attach collects
// its status.
func Background(ctx context.Context, h *flux.Handle, rank uint32, cmd Command, waitable bool) (int, error) {
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return 0, fmt.Errorf("subprocess: empty command line: %w", syscall.EINVAL)
	}
	flags := 0
	if waitable {
		flags |= FlagWaitable
	}
	req := cmd.request(flags)
	var resp Response
	if err := h.Call(ctx, Target{Service: cmd.Service}.service()+".exec", rank, req, &resp); err != nil {
		return 0, err
	}
	return resp.Pid, nil
}

// Attach becomes the listener of a background process on rank: its
// output from now on goes to stdout and stderr (a nil writer: that
// stream is not forwarded), and Wait returns its status. When the
// process has ended already (a waitable zombie) its status comes at
// once. An attach consumes the status: the process cannot be waited
// on or attached to afterwards. Closing h (or the client going away)
// returns the process to the background.
func Attach(ctx context.Context, h *flux.Handle, rank uint32, t Target, stdout, stderr io.Writer) (*Process, error) {
	p, err := newProcess(h, rank, &Command{Args: []string{"attach"}, Stdout: stdout, Stderr: stderr, Service: t.Service})
	if err != nil {
		return nil, err
	}
	p.stdinClosed, p.eofSent = true, true // a background process's stdin is at EOF
	flags := 0
	if stdout != nil {
		flags |= FlagStdout
	}
	if stderr != nil {
		flags |= FlagStderr
	}
	f, err := h.RPC(p.service+".attach", rank, AttachRequest{Pid: t.Pid, Label: t.Label, Flags: flags}, flux.Streaming)
	if err != nil {
		return nil, err
	}
	p.f = f
	go p.deliver()
	select {
	case <-p.started:
	case <-ctx.Done():
		f.Close()
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isStarted {
		return nil, p.err
	}
	return p, nil
}

// Waiter is a pending rexec.wait.
type Waiter struct {
	f *flux.Future
}

// StartWait asks rank's server for the status of a waitable background
// process, without waiting for the answer (Result does).
func StartWait(h *flux.Handle, rank uint32, t Target) (*Waiter, error) {
	f, err := h.RPC(t.service()+".wait", rank, WaitRequest{Pid: t.Pid, Label: t.Label}, 0)
	if err != nil {
		return nil, err
	}
	return &Waiter{f: f}, nil
}

// Result waits for the process to end and returns its status and the
// output its server kept.
func (w *Waiter) Result(ctx context.Context) (WaitResponse, error) {
	var resp WaitResponse
	m, err := w.f.Get(ctx)
	if err != nil {
		return resp, err
	}
	err = m.UnmarshalPayload(&resp)
	return resp, err
}

// WaitFor waits for a waitable background process to end.
func WaitFor(ctx context.Context, h *flux.Handle, rank uint32, t Target) (WaitResponse, error) {
	w, err := StartWait(h, rank, t)
	if err != nil {
		return WaitResponse{}, err
	}
	return w.Result(ctx)
}

// Kill sends sig to a process on rank, by label or pid.
func Kill(ctx context.Context, h *flux.Handle, rank uint32, t Target, sig syscall.Signal) error {
	return h.Call(ctx, t.service()+".kill", rank, KillRequest{Pid: t.Pid, Label: t.Label, Signum: int(sig)}, nil)
}

// ListService is List on a named subprocess server.
func ListService(ctx context.Context, h *flux.Handle, rank uint32, service string) (ListResponse, error) {
	var resp ListResponse
	err := h.Call(ctx, Target{Service: service}.service()+".list", rank, nil, &resp)
	return resp, err
}
