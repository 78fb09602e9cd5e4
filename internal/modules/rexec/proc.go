package rexec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

// proc is one process of the server. A proc is created on the Serve
// goroutine, launched on a spawner thread, then watched by the goroutines
// of run. Fields are marked with who may touch them.
type proc struct {
	s        *server
	name     string // for logs and rexec.list (immutable)
	label    string
	flags    int
	pgroup   bool // in its own process group: signal the group
	bg       bool // started in the background (immutable)
	waitable bool // kept as a zombie once it ends, until waited on (immutable)
	cmd      *subprocess.CommandObject

	// the exec request; for streaming processes also req, and who sent
	// it (immutable)
	exec  *flux.Request
	req   *flux.Request
	route string
	tag   uint32

	stdin     *stdinPipe // nil unless stdin is forwarded (has its own lock)
	stdinSize int
	fds       [3]uintptr // the child's stdio, until launch closes them
	childEnds []int      // our copies of the child's pipe ends
	outs      []output

	// Set by launch before the process is published (then read-only).
	pid   int
	pidfd *os.File // nil when the kernel has no pidfds

	// Serve goroutine only.
	seq         uint64
	running     bool           // launched and in s.procs
	pendingSig  syscall.Signal // signal asked for before the launch ended
	completed   bool           // reaped and its output drained
	collected   bool           // its status went to a waiter or an attached client
	waiter      *flux.Request  // a pending rexec.wait
	waiterRoute string
	attachRoute string // the attached client, if any

	// mu guards who receives the process's output and status: the
	// streaming exec request, or the client attached to a background
	// process (readers, reaper and Serve goroutine).
	mu       sync.Mutex
	listener *flux.Request
	lflags   int     // the listener's forwarding flags
	eof      [2]bool // stdout, stderr reached EOF
	reaped   bool
	status   syscall.WaitStatus
	retained []subprocess.IO // a waitable process's latest output
	retSize  int

	pending atomic.Int32 // goroutines still running: readers and reaper
	exited  atomic.Bool  // reaped
	ended   atomic.Bool  // stream ended: send nothing more
}

type output struct {
	f      *os.File
	stream string
}

// chunkSize bounds one output response: output is read and forwarded
// in pieces of at most this size as soon as it is produced.
const chunkSize = 4096

var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

// procName is the command name shown in logs and lists: argv[0]'s base
// name, with the subcommand for flux (every flux command starts alike).
func procName(argv []string) string {
	name := filepath.Base(argv[0])
	if name == "flux" && len(argv) > 1 {
		name += " " + argv[1]
	}
	return name
}

// newProc prepares the process of an exec request on the Serve
// goroutine: a streaming request gets a stdin pipe (writes may arrive
// before the launch is done: they go straight into it) and pipes for
// the output streams its flags forward; a background one gets /dev/null
// for stdin and pipes that feed the broker log.
func (s *server) newProc(r *flux.Request, req *subprocess.ExecRequest) (*proc, error) {
	c := &req.Cmd
	streaming := r.Msg.IsStreaming()
	p := &proc{
		s:         s,
		name:      procName(c.Cmdline),
		label:     c.Label,
		flags:     req.Flags,
		pgroup:    req.LocalFlags&subprocess.LocalNoSetpgrp == 0,
		cmd:       c,
		exec:      r,
		stdinSize: s.cfg.StdinBufsize,
	}
	if v, ok := c.Opts[subprocess.OptStdinBufsize]; ok {
		fmt.Sscan(v, &p.stdinSize) // validated already
	}
	if streaming {
		p.req, p.route, p.tag = r, r.Msg.RouteString(), r.Msg.Matchtag
		p.listener, p.lflags = r, req.Flags
	} else {
		p.bg = true
		p.waitable = req.Flags&subprocess.FlagWaitable != 0
	}
	devnull := s.devnull.Fd()
	p.fds = [3]uintptr{devnull, devnull, devnull}
	if req.LocalFlags&subprocess.LocalStdioFallthrough != 0 {
		p.fds = [3]uintptr{0, 1, 2}
		return p, nil
	}
	if streaming {
		f, child, err := pipe(false, "stdin")
		if err != nil {
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
		p.childEnds = append(p.childEnds, child)
		p.fds[0] = uintptr(child)
		p.stdin = newStdinPipe(p, f, p.stdinSize)
	}
	for i, o := range []struct {
		stream string
		flag   int
	}{{"stdout", subprocess.FlagStdout}, {"stderr", subprocess.FlagStderr}} {
		if streaming && req.Flags&o.flag == 0 {
			continue
		}
		f, child, err := pipe(true, o.stream)
		if err != nil {
			p.closeChildEnds()
			p.closeFiles()
			return nil, fmt.Errorf("%s pipe: %w", o.stream, err)
		}
		p.childEnds = append(p.childEnds, child)
		p.fds[i+1] = uintptr(child)
		p.outs = append(p.outs, output{f: f, stream: o.stream})
	}
	return p, nil
}

// launch forks and execs the process. It runs on a spawner thread:
// the file system lookups and the fork wait there, not on the Serve
// goroutine, which gets the outcome.
func (p *proc) launch() {
	s := p.s
	pid, err := p.forkExec()
	p.closeChildEnds()
	if err != nil {
		p.closeFiles()
		p.exec.RespondError(err)
		s.h.Post(func() { s.launchFailed(p) })
		return
	}
	p.pid = pid
	s.h.Post(func() { s.launched(p) })
}

func (p *proc) forkExec() (int, error) {
	s, c := p.s, p.cmd
	if s.halting.Load() {
		return 0, flux.NewError(syscall.ENOSYS, "subprocess server is shutting down")
	}
	env, pathEnv := s.baseEnv, os.Getenv("PATH")
	if len(c.Env) > 0 {
		env, pathEnv = s.environ(c.Env), c.Env["PATH"]
	}
	if c.Cwd != "" {
		fi, err := os.Stat(c.Cwd)
		if err != nil {
			return 0, launchError("working directory "+c.Cwd, errnoOf(err))
		}
		if !fi.IsDir() {
			return 0, launchError("working directory "+c.Cwd, syscall.ENOTDIR)
		}
	}
	path, err := lookPath(c.Cmdline[0], pathEnv)
	if err != nil {
		return 0, launchError("", err)
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   c.Cwd,
		Env:   env,
		Files: p.fds[:],
		Sys: &syscall.SysProcAttr{
			Setpgid:   p.pgroup,
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	}
	pid, err := syscall.ForkExec(path, c.Cmdline, attr)
	if err != nil {
		return 0, launchError("", errnoOf(err))
	}
	if pidfd >= 0 {
		if syscall.SetNonblock(pidfd, true) == nil {
			p.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
		} else {
			syscall.Close(pidfd)
		}
	}
	return pid, nil
}

// launchError is the error response for a process that could not be
// started, worded as flux-core's server words it ("error launching
// process: No such file or directory"); clients add the command name.
func launchError(what string, err error) error {
	en, _ := err.(syscall.Errno)
	if en == 0 {
		en = syscall.EINVAL
	}
	text := strerror(en)
	if what != "" {
		text = what + ": " + text
	}
	return flux.NewError(en, "error launching process: "+text)
}

// strerror is the C library's words for en ("No such process").
func strerror(en syscall.Errno) string {
	text := en.Error()
	if text == "" {
		return text
	}
	return strings.ToUpper(text[:1]) + text[1:]
}

func (p *proc) closeChildEnds() {
	for _, fd := range p.childEnds {
		syscall.Close(fd)
	}
	p.childEnds = nil
}

// pipe makes a pipe: the child's end blocking, ours non-blocking so the
// Go netpoller parks the goroutine using it instead of an OS thread.
// Both ends are close-on-exec (the child gets its end by dup2).
func pipe(weRead bool, name string) (ours *os.File, child int, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	o, c := fds[1], fds[0]
	if weRead {
		o, c = fds[0], fds[1]
	}
	if err := syscall.SetNonblock(o, true); err != nil {
		syscall.Close(o)
		syscall.Close(c)
		return nil, -1, err
	}
	return os.NewFile(uintptr(o), name), c, nil
}

// run starts the process's goroutines: a reader per output pipe and the
// reaper. The last to finish hands the process back to the Serve
// goroutine.
func (p *proc) run() {
	n := len(p.outs) + 1
	p.pending.Store(int32(n))
	p.s.wg.Add(n)
	for _, o := range p.outs {
		go p.readOutput(o)
	}
	go p.reap()
}

func (p *proc) finishOne() {
	if p.pending.Add(-1) == 0 {
		p.s.h.Post(func() { p.s.complete(p) })
	}
	p.s.wg.Done()
}

// readOutput forwards one output pipe as it is produced, in chunks of at
// most chunkSize, then its EOF. A background process's output goes to
// the broker log, a line at a time.
func (p *proc) readOutput(o output) {
	defer p.finishOne()
	buf := chunkPool.Get().(*[chunkSize]byte)
	defer chunkPool.Put(buf)
	var lines *lineLog
	if p.bg {
		lines = &lineLog{p: p, stream: o.stream}
	}
	for {
		n, err := o.f.Read(buf[:])
		if n > 0 {
			if lines != nil {
				lines.write(buf[:n])
			}
			p.output(o.stream, buf[:n], false)
		}
		if err != nil {
			break
		}
	}
	o.f.Close()
	if lines != nil {
		lines.flush()
	}
	p.output(o.stream, nil, true)
}

// maxRetained bounds the output a waitable process keeps for its wait
// response (the most recent, whole chunks; at least one is kept).
const maxRetained = 8192

// output hands a chunk of output (or a stream's EOF) to the listener if
// there is one and it forwards the stream, and keeps a waitable
// process's latest output for its wait response.
func (p *proc) output(stream string, data []byte, eof bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if eof {
		p.eof[streamIndex(stream)] = true
	} else if p.waitable {
		p.retained = append(p.retained, subprocess.EncodeIO(stream, p.s.rankStr, data, false))
		p.retSize += len(data)
		for p.retSize > maxRetained && len(p.retained) > 1 {
			b, _ := p.retained[0].Bytes()
			p.retSize -= len(b)
			p.retained = p.retained[1:]
		}
	}
	if p.listener != nil && p.forwardsLocked(stream) && !p.ended.Load() {
		p.respondOutputLocked(stream, data, eof)
	}
}

func streamIndex(stream string) int {
	if stream == "stderr" {
		return 1
	}
	return 0
}

func (p *proc) forwardsLocked(stream string) bool {
	if stream == "stderr" {
		return p.lflags&subprocess.FlagStderr != 0
	}
	return p.lflags&subprocess.FlagStdout != 0
}

func (p *proc) respondOutputLocked(stream string, data []byte, eof bool) {
	p.listener.Respond(subprocess.OutputResponse{
		Type: subprocess.TypeOutput,
		Pid:  p.pid,
		IO:   subprocess.EncodeIO(stream, p.s.rankStr, data, eof),
	})
}

// reap waits for the process to end and reports its wait status.
func (p *proc) reap() {
	defer p.finishOne()
	ws, err := p.wait()
	p.exited.Store(true)
	if err != nil {
		p.s.logf(sevErr, "%s[%d]: wait: %v", p.name, p.pid, err)
		return
	}
	p.mu.Lock()
	p.reaped, p.status = true, ws
	if p.listener != nil && !p.ended.Load() {
		p.listener.Respond(subprocess.FinishedResponse{Type: subprocess.TypeFinished, Status: int(ws)})
	}
	p.mu.Unlock()
	if !p.bg {
		return
	}
	// A background process's end is logged as flux-core's server
	// logs it: "[LABEL: ]NAME[PID]: Exit N" or "...: Killed by signal N".
	prefix := ""
	if p.label != "" {
		prefix = p.label + ": "
	}
	if ws.Signaled() {
		p.s.logf(sevInfo, "%s%s[%d]: Killed by signal %d", prefix, p.name, p.pid, int(ws.Signal()))
	} else {
		p.s.logf(sevInfo, "%s%s[%d]: Exit %d", prefix, p.name, p.pid, ws.ExitStatus())
	}
}

// wait reaps the process. With a pidfd the goroutine parks in the
// netpoller until the process has exited; without one it blocks an OS
// thread in wait4.
func (p *proc) wait() (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	if p.pidfd != nil {
		rc, err := p.pidfd.SyscallConn()
		if err != nil {
			return ws, err
		}
		var werr error
		err = rc.Read(func(uintptr) bool {
			for {
				pid, e := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
				switch {
				case e == syscall.EINTR:
					continue
				case e != nil:
					werr = e
					return true
				case pid == 0:
					return false // still running: wait for the pidfd
				default:
					return true
				}
			}
		})
		if err != nil {
			return ws, err
		}
		return ws, werr
	}
	for {
		_, err := syscall.Wait4(p.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

// signal sends sig to the process group (or the process, for a
// no-setpgrp command). Before the launch has ended the signal is kept
// and sent once the process runs (SIGKILL wins over any other). Serve
// goroutine only.
func (p *proc) signal(sig syscall.Signal) error {
	if p.completed {
		return syscall.ESRCH // a zombie: its pid may belong to another process now
	}
	if !p.running {
		if p.pendingSig != syscall.SIGKILL {
			p.pendingSig = sig
		}
		return nil
	}
	if p.pgroup {
		return syscall.Kill(-p.pid, sig)
	}
	if p.exited.Load() {
		return syscall.ESRCH
	}
	return syscall.Kill(p.pid, sig)
}

// closeFiles releases every descriptor of the process; blocked readers
// and writers return.
func (p *proc) closeFiles() {
	p.ended.Store(true)
	if p.stdin != nil {
		p.stdin.close()
	}
	for _, o := range p.outs {
		o.f.Close()
	}
	if p.pidfd != nil {
		p.pidfd.Close()
	}
}

// credit returns n bytes of stdin buffer to a client that asked for
// write credit.
func (p *proc) credit(n int) {
	if n <= 0 || p.req == nil || p.flags&subprocess.FlagWriteCredit == 0 || p.ended.Load() {
		return
	}
	p.req.Respond(subprocess.AddCreditResponse{Type: subprocess.TypeAddCredit, Channels: map[string]int{"stdin": n}})
}

// maxLogLine bounds a logged line of background output.
const maxLogLine = 4096

// lineLog sends a background process's output to the broker log a line
// at a time (stderr as errors).
type lineLog struct {
	p      *proc
	stream string
	buf    []byte
}

func (l *lineLog) write(b []byte) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) >= maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return
		}
		l.emit(l.buf[:i])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
}

func (l *lineLog) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLog) emit(line []byte) {
	sev := sevInfo
	if l.stream == "stderr" {
		sev = sevErr
	}
	name := l.p.label
	if name == "" {
		name = l.p.name
	}
	l.p.s.logf(sev, "%s[%d]: %s", name, l.p.pid, line)
}
