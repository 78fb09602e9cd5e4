// Package subprocess runs processes on Flux brokers through their
// subprocess servers (RFC 42, the "rexec" service): start a command on a
// rank, stream its stdout and stderr back as it is produced, feed its
// stdin with flow control, signal it, and collect its wait status. It is
// the client side of internal/modules/rexec and also defines the wire
// format both sides use (proto.go).
//
// There are two ways to drive a process:
//
//   - Exec (and Run) for ordinary goroutines, such as a command-line tool:
//     Exec waits until the process has started; a goroutine per process
//     then delivers its output, and Write, CloseStdin, Kill and Wait may
//     be called from any goroutine.
//
//   - Start for code running on a handle's Serve goroutine, such as a
//     broker module: it returns at once, and output, the Started and Done
//     callbacks are all delivered on the Serve goroutine, in order, so the
//     caller's state needs no locks. Write never blocks there. Never call
//     Wait on the Serve goroutine: it would wait for itself.
//
// Only the instance owner may use a broker's subprocess server. A client
// that disconnects has its processes killed by the server.
package subprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Command is a process to run.
type Command struct {
	// Args is the command line; Args[0] is looked up in the PATH of Env
	// (the server's PATH when Env has none).
	Args []string
	// Env is the process's whole environment; empty means the server's.
	// The server points FLUX_URI at its own broker either way.
	Env map[string]string
	// Dir is the working directory; empty means the server's.
	Dir string
	// Opts are RFC 42 command options, e.g. OptStdinBufsize.
	Opts map[string]string
	// Label names the process on its server (unique there), optional.
	Label string
	// Service is the subprocess server's service name; empty means
	// Service ("rexec").
	Service string

	// Stdout and Stderr receive the process's output as it arrives, in
	// chunks of at most 4 KiB that need not end on a line boundary. A
	// nil writer means the stream is not forwarded at all (the server
	// sends it to /dev/null). Write errors are ignored.
	Stdout, Stderr io.Writer
}

// Events are the callbacks of a process driven by Start. Each runs on
// the handle's Serve goroutine; any may be nil.
type Events struct {
	// Started runs once the process is running (Pid is known).
	Started func(p *Process)
	// Done runs once, last: after all output was delivered, with the
	// wait status, or with the error that ended the stream (then the
	// status means nothing). An exec failure (no such command, say)
	// arrives here without Started having run.
	Done func(p *Process, status Status, err error)
}

// Errors of a process's local state.
var (
	// ErrStdinClosed is returned by Write after CloseStdin.
	ErrStdinClosed = errors.New("subprocess: stdin is closed")
	// ErrFinished is returned by Write after the process's stream ended.
	ErrFinished = errors.New("subprocess: process has finished")
	// ErrNotStarted is returned by Kill before the process has a pid.
	ErrNotStarted = errors.New("subprocess: process has not started")
)

// Process is a process started on a broker.
type Process struct {
	h       *flux.Handle
	service string
	rank    uint32
	rankStr string
	f       *flux.Future
	stdout  io.Writer
	stderr  io.Writer
	async   bool
	ev      Events

	started chan struct{} // closed when started (or done)
	done    chan struct{} // closed when the stream has ended

	mu          sync.Mutex
	cond        *sync.Cond // signals credit, started and done to blocked writers
	pid         int
	isStarted   bool
	abandoned   bool // Exec gave up waiting: kill on start
	finished    bool // got the finished response
	status      Status
	ended       bool
	err         error
	queue       []byte // stdin not yet sent
	queuedTotal int64  // stdin bytes ever queued
	sentTotal   int64  // stdin bytes ever sent
	credit      int
	gotCredit   bool
	stdinClosed bool
	eofSent     bool
}

func newProcess(h *flux.Handle, rank uint32, cmd *Command) (*Process, error) {
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return nil, fmt.Errorf("subprocess: empty command line: %w", syscall.EINVAL)
	}
	service := cmd.Service
	if service == "" {
		service = Service
	}
	p := &Process{
		h:       h,
		service: service,
		rank:    rank,
		rankStr: strconv.FormatUint(uint64(rank), 10),
		stdout:  cmd.Stdout,
		stderr:  cmd.Stderr,
		started: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.cond = sync.NewCond(&p.mu)
	return p, nil
}

// request is cmd's exec request with flags (RFC 42: env and opts are
// objects, channels an array, even when empty).
func (cmd *Command) request(flags int) ExecRequest {
	env, opts := cmd.Env, cmd.Opts
	if env == nil {
		env = map[string]string{}
	}
	if opts == nil {
		opts = map[string]string{}
	}
	return ExecRequest{
		Cmd: CommandObject{
			Cwd: cmd.Dir, Cmdline: cmd.Args, Env: env, Opts: opts,
			Channels: []string{}, Label: cmd.Label,
		},
		Flags: flags,
	}
}

func (p *Process) send(cmd *Command) error {
	flags := FlagWriteCredit
	if cmd.Stdout != nil {
		flags |= FlagStdout
	}
	if cmd.Stderr != nil {
		flags |= FlagStderr
	}
	req := cmd.request(flags)
	f, err := p.h.RPC(p.service+".exec", p.rank, req, flux.Streaming)
	if err != nil {
		return err
	}
	p.f = f
	return nil
}

// Exec starts cmd on rank and waits until it is running (or failed to
// start: the server's error, e.g. ENOENT for a missing command, is
// returned). If ctx ends first, the process is killed as soon as it
// starts and ctx's error is returned. Output is delivered to cmd's
// writers from one goroutine per process.
func Exec(ctx context.Context, h *flux.Handle, rank uint32, cmd Command) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing is started for a context already done
	}
	p, err := newProcess(h, rank, &cmd)
	if err != nil {
		return nil, err
	}
	if err := p.send(&cmd); err != nil {
		return nil, err
	}
	go p.deliver()
	select {
	case <-p.started:
	case <-ctx.Done():
		p.mu.Lock()
		running := p.isStarted
		if !running {
			p.abandoned = true
		}
		p.mu.Unlock()
		if !running {
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isStarted {
		return nil, p.err
	}
	return p, nil
}

// Run runs cmd on rank with stdin at EOF and returns its status once
// all its output has been delivered.
func Run(ctx context.Context, h *flux.Handle, rank uint32, cmd Command) (Status, error) {
	p, err := Exec(ctx, h, rank, cmd)
	if err != nil {
		return 0, err
	}
	p.CloseStdin()
	return p.Wait(ctx)
}

// Start sends the request to start cmd on rank and returns at once.
// Output, ev.Started and ev.Done are delivered on h's Serve goroutine,
// so Start is meant for code running there (a broker module). An error
// is returned only when the request could not be sent.
func Start(h *flux.Handle, rank uint32, cmd Command, ev Events) (*Process, error) {
	p, err := newProcess(h, rank, &cmd)
	if err != nil {
		return nil, err
	}
	p.async = true
	p.ev = ev
	if err := p.send(&cmd); err != nil {
		return nil, err
	}
	p.f.Then(func(m *flux.Message, err error) { p.handle(m, err) })
	return p, nil
}

// deliver runs the response stream of an Exec'd process.
func (p *Process) deliver() {
	for {
		m, err := p.f.Next(context.Background())
		if !p.handle(m, err) {
			return
		}
	}
}

// handle processes one response; it returns false once the stream is
// over.
func (p *Process) handle(m *flux.Message, err error) bool {
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ENODATA) {
			p.mu.Lock()
			ok := p.finished
			p.mu.Unlock()
			if !ok {
				err = fmt.Errorf("%s.exec on rank %d: stream ended without a finished response: %w", p.service, p.rank, syscall.EPROTO)
			} else {
				err = nil
			}
		}
		p.finish(err)
		return false
	}
	var r Response
	if err := m.UnmarshalPayload(&r); err != nil {
		p.f.Close()
		p.finish(fmt.Errorf("%s.exec on rank %d: %w", p.service, p.rank, err))
		return false
	}
	switch r.Type {
	case TypeStarted, TypeAttached:
		p.mu.Lock()
		p.pid = r.Pid
		p.isStarted = true
		kill := p.abandoned
		p.cond.Broadcast()
		p.mu.Unlock()
		close(p.started)
		if kill {
			p.signalAsync(syscall.SIGKILL)
		}
		if p.ev.Started != nil {
			p.ev.Started(p)
		}
	case TypeOutput:
		if r.IO == nil {
			break
		}
		data, err := r.IO.Bytes()
		if err != nil || len(data) == 0 {
			break
		}
		switch r.IO.Stream {
		case "stdout":
			if p.stdout != nil {
				p.stdout.Write(data)
			}
		case "stderr":
			if p.stderr != nil {
				p.stderr.Write(data)
			}
		}
	case TypeFinished:
		if r.Status != nil {
			p.mu.Lock()
			p.status = Status(*r.Status)
			p.finished = true
			p.mu.Unlock()
		}
	case TypeAddCredit:
		p.mu.Lock()
		p.credit += r.Channels["stdin"]
		p.gotCredit = true
		p.flushLocked()
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	return true
}

func (p *Process) finish(err error) {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	p.ended = true
	p.err = err
	wasStarted := p.isStarted
	status := p.status
	p.queue = nil
	p.cond.Broadcast()
	p.mu.Unlock()
	if !wasStarted {
		close(p.started)
	}
	close(p.done)
	if p.ev.Done != nil {
		p.ev.Done(p, status, err)
	}
}

// flushLocked sends queued stdin as far as credit allows, then EOF once
// CloseStdin was called and everything is sent.
func (p *Process) flushLocked() {
	if p.ended || p.eofSent {
		return
	}
	avail := p.credit
	if !p.gotCredit {
		avail += DefaultCredit // RFC 42: borrow before the first credit
	}
	n := min(avail, len(p.queue))
	eof := p.stdinClosed && n == len(p.queue)
	if n == 0 && !eof {
		return
	}
	req := WriteRequest{Matchtag: p.f.Matchtag(), IO: EncodeIO("stdin", p.rankStr, p.queue[:n], eof)}
	if _, err := p.h.RPC(p.service+".write", p.rank, req, flux.NoResponse); err != nil {
		p.queue = nil
		return
	}
	p.credit -= n
	p.sentTotal += int64(n)
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil
	}
	p.eofSent = eof
}

// Write sends b to the process's stdin. For an Exec'd process it blocks
// until all of b is sent (credit from the server paces it, so a process
// that does not read holds the writer back); do not call it from the
// process's own output writers. For a Start'ed process it queues b and
// returns at once. It fails after CloseStdin and once the process has
// finished.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinClosed {
		return 0, ErrStdinClosed
	}
	if p.ended {
		return 0, ErrFinished
	}
	p.queue = append(p.queue, b...)
	p.queuedTotal += int64(len(b))
	target := p.queuedTotal
	p.flushLocked()
	if p.async {
		return len(b), nil
	}
	for p.sentTotal < target && !p.ended {
		p.cond.Wait()
	}
	if p.sentTotal < target {
		return 0, ErrFinished
	}
	return len(b), nil
}

// CloseStdin sends EOF to the process's stdin after any queued data. It
// never blocks; closing twice is a no-op.
func (p *Process) CloseStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinClosed {
		return nil
	}
	p.stdinClosed = true
	p.flushLocked()
	return nil
}

// Kill sends sig to the process (to its process group) and waits for
// the server's answer: ESRCH once the process is gone. It may be called
// from any goroutine, including a Serve goroutine, where it blocks the
// loop for one round trip.
func (p *Process) Kill(ctx context.Context, sig syscall.Signal) error {
	pid, ok := p.Pid()
	if !ok {
		return ErrNotStarted
	}
	return p.h.Call(ctx, p.service+".kill", p.rank, KillRequest{Pid: pid, Signum: int(sig)}, nil)
}

// Signal sends sig to the process without waiting for the server's
// answer (nothing happens before the process has started). Safe on a
// Serve goroutine.
func (p *Process) Signal(sig syscall.Signal) { p.signalAsync(sig) }

// signalAsync sends a kill request without waiting for the answer.
func (p *Process) signalAsync(sig syscall.Signal) {
	pid, ok := p.Pid()
	if !ok {
		return
	}
	if f, err := p.h.RPC(p.service+".kill", p.rank, KillRequest{Pid: pid, Signum: int(sig)}, 0); err == nil {
		f.Close()
	}
}

// Wait waits until the stream has ended (the process was reaped and all
// its output delivered) and returns its status, or the error that ended
// the stream. Not for the Serve goroutine of a Start'ed process.
func (p *Process) Wait(ctx context.Context) (Status, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.err
}

// Done is closed when the stream has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid returns the process id on its broker, once started.
func (p *Process) Pid() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.isStarted
}

// Rank is the broker rank the process runs on.
func (p *Process) Rank() uint32 { return p.rank }

// List returns the processes the subprocess server on rank is running.
func List(ctx context.Context, h *flux.Handle, rank uint32) (ListResponse, error) {
	var resp ListResponse
	err := h.Call(ctx, Service+".list", rank, nil, &resp)
	return resp, err
}
