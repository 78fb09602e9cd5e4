package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// startProcs are the broker processes of a flux start --test-size
// instance, each of which can be signalled, waited for and started again
// through the start server (flux-core's local://RUNDIR/start, which its
// test scripts drive with startctl: start.status, start.kill,
// start.wait, start.run).
type startProcs struct {
	launch func(rank int) (*exec.Cmd, error) // builds and starts a rank's broker
	done   chan int                          // ranks, as their broker exits
	wg     sync.WaitGroup

	mu    sync.Mutex
	ranks []startRank
}

type startRank struct {
	cmd     *exec.Cmd // the last process started (nil: never)
	running bool
	exitRC  int
	waiters []func(rc int)
}

func newStartProcs(size int, launch func(int) (*exec.Cmd, error)) *startProcs {
	return &startProcs{launch: launch, done: make(chan int, 4*size+4), ranks: make([]startRank, size)}
}

// start runs rank's broker (not running now) and reports its exit.
func (p *startProcs) start(rank int) error {
	cmd, err := p.launch(rank)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ranks[rank].cmd, p.ranks[rank].running = cmd, true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := cmd.Wait()
		rc := cmdExitCode(cmd, err)
		p.mu.Lock()
		r := &p.ranks[rank]
		r.running, r.exitRC = false, rc
		waiters := r.waiters
		r.waiters = nil
		p.mu.Unlock()
		for _, w := range waiters {
			w(rc)
		}
		select {
		case p.done <- rank:
		default: // nobody counts exits any more
		}
	}()
	return nil
}

// exitCode is rank's broker's exit code (of its last run).
func (p *startProcs) exitCode(rank int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ranks[rank].exitRC
}

// signal sends sig to every running broker (rank 0 too if withLeader).
func (p *startProcs) signal(sig os.Signal, withLeader bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for rank, r := range p.ranks {
		if r.running && (rank > 0 || withLeader) {
			r.cmd.Process.Signal(sig)
		}
	}
}

// waitAll waits for every broker started.
func (p *startProcs) waitAll() { p.wg.Wait() }

// serveStart answers the start server's requests on a unix socket at
// path, from this user only, until the listener is closed.
func (p *startProcs) serveStart(path string) (net.Listener, error) {
	removeStaleSocket(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("start server %s: %w", filepath.Base(path), err)
	}
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go p.serveConn(c)
		}
	}()
	return ln, nil
}

// serveConn answers one client: flux's local protocol (a status byte,
// then framed messages).
func (p *startProcs) serveConn(c *net.UnixConn) {
	defer c.Close()
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil || (cred.Uid != uint32(os.Getuid()) && cred.Uid != 0) {
		c.Write([]byte{byte(syscall.EPERM)})
		return
	}
	if _, err := c.Write([]byte{0}); err != nil {
		return
	}
	var wmu sync.Mutex
	send := func(m *message.Message) {
		wmu.Lock()
		defer wmu.Unlock()
		m.WriteTo(c)
	}
	r := message.NewReader(c)
	for {
		m, err := r.Read()
		if err != nil {
			return
		}
		if m.Type != message.Request {
			continue
		}
		p.handle(m, send)
	}
}

// handle answers one start server request.
func (p *startProcs) handle(m *message.Message, send func(*message.Message)) {
	respond := func(v any) {
		if m.NoResponse() {
			return
		}
		b, _ := json.Marshal(v)
		send(message.ResponseTo(m, b))
	}
	fail := func(errno syscall.Errno, text string) {
		if !m.NoResponse() {
			send(message.ErrorTo(m, uint32(errno), text))
		}
	}
	var req struct {
		Rank   *int `json:"rank"`
		Signum int  `json:"signum"`
	}
	if m.Topic == "start.status" {
		p.mu.Lock()
		procs := make([]map[string]int, len(p.ranks))
		for i, r := range p.ranks {
			pid := -1
			if r.running {
				pid = r.cmd.Process.Pid
			}
			procs[i] = map[string]int{"pid": pid}
		}
		p.mu.Unlock()
		respond(map[string]any{"procs": procs})
		return
	}
	if err := json.Unmarshal(m.JSON(), &req); err != nil || req.Rank == nil {
		fail(syscall.EPROTO, m.Topic+": the request needs an integer rank")
		return
	}
	rank := *req.Rank
	if rank < 0 || rank >= len(p.ranks) {
		fail(syscall.ESRCH, fmt.Sprintf("%s: no broker rank %d (size %d)", m.Topic, rank, len(p.ranks)))
		return
	}
	p.mu.Lock()
	r := &p.ranks[rank]
	switch m.Topic {
	case "start.kill":
		if req.Signum <= 0 || req.Signum > 64 {
			p.mu.Unlock()
			fail(syscall.EINVAL, fmt.Sprintf("start.kill: signum %d is not a signal", req.Signum))
			return
		}
		if r.running {
			r.cmd.Process.Signal(syscall.Signal(req.Signum))
		}
		p.mu.Unlock()
		respond(nil)
	case "start.wait":
		if r.running {
			if len(r.waiters) > 0 {
				p.mu.Unlock()
				fail(syscall.EEXIST, fmt.Sprintf("start.wait: rank %d is waited for already", rank))
				return
			}
			r.waiters = append(r.waiters, func(rc int) { respond(map[string]int{"exit_rc": rc}) })
			p.mu.Unlock()
			return
		}
		rc := r.exitRC
		p.mu.Unlock()
		respond(map[string]int{"exit_rc": rc})
	case "start.run":
		running := r.running
		p.mu.Unlock()
		if running {
			fail(syscall.EEXIST, fmt.Sprintf("start.run: rank %d is running", rank))
			return
		}
		if err := p.start(rank); err != nil {
			fail(syscall.EINVAL, fmt.Sprintf("start.run: rank %d: %v", rank, err))
			return
		}
		respond(nil)
	default:
		p.mu.Unlock()
		fail(syscall.ENOSYS, m.Topic+": unknown start server method")
	}
}
