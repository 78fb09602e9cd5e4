// Package rexec is the broker's subprocess server: the "rexec" module,
// loaded on every broker, that runs processes for the instance owner and
// streams their output back (RFC 42). flux exec and the job executor use
// it through pkg/flux/subprocess.
//
// Services: rexec.exec (streaming: started, output..., finished, then
// ENODATA; non-streaming: one started response and the process runs in
// the background), rexec.write (stdin data, no response), rexec.kill,
// rexec.list and rexec.disconnect. Only the instance owner may use them.
//
// Every process runs in its own process group. A client's streaming
// processes are SIGKILLed when it disconnects, and every process group is
// SIGKILLed when the module unloads (broker shutdown included); each child
// also gets SIGKILL from the kernel should the broker die without
// unloading (PR_SET_PDEATHSIG).
//
// Concurrency: the module's state (the process table) belongs to the
// Serve goroutine. Launches (PATH lookup, fork, exec) run on a few
// spawner threads (spawn.go), so the Serve goroutine never waits for
// them. Each running process costs one goroutine per forwarded output
// pipe, one reaper (parked in the netpoller on a pidfd, so no OS thread),
// and a stdin writer only while stdin data is backed up. Those goroutines
// send their responses directly and hand results back to the Serve
// goroutine with Handle.Post.
package rexec

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

// Module is the rexec broker module.
type Module struct{}

// New returns the module (a module.Factory).
func New() module.Module { return &Module{} }

// Name is the module's name and service.
func (*Module) Name() string { return subprocess.Service }

// Run serves the subprocess protocol until ctx ends, then kills every
// process it started.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, err := parseArgs(args)
	if err != nil {
		return err
	}
	s, err := newServer(ctx, h, cfg)
	if err != nil {
		return err
	}
	s.register()
	err = h.Serve(ctx)
	s.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// server is the module's state. Every field is owned by the Serve
// goroutine except where noted.
type server struct {
	h        *flux.Handle
	cfg      Config
	rank     int
	rankStr  string
	localURI string
	baseEnv  []string // the broker's environment, adjusted, for commands without env
	devnull  *os.File
	spawn    *spawner

	seq     uint64
	procs   map[int]*proc               // by pid
	labels  map[string]*proc            // by command label
	clients map[string]map[uint32]*proc // streaming procs by requestor route, then matchtag
	watches map[string]map[*proc]bool   // procs a client waits on or is attached to, by route
	wg      sync.WaitGroup              // process goroutines (safe from any goroutine)

	starting int         // procs handed to the spawner, not yet launched or failed
	halting  atomic.Bool // shutdown began: launches fail (any goroutine)
	stopping bool
	drained  context.CancelFunc // set while shutdown waits for procs to end

	// multiuser is access.allow-guest-user: then rank 0 refuses requests
	// that come from other brokers (as flux-core's rexec does), so that
	// a compromised node cannot run commands on the management node.
	multiuser bool
}

// Log severities (syslog levels, as log.append takes them).
const (
	sevErr  = 3
	sevInfo = 6
)

func newServer(ctx context.Context, h *flux.Handle, cfg Config) (*server, error) {
	rankStr, err := h.Attr(ctx, "rank")
	if err != nil {
		return nil, err
	}
	rank, err := strconv.Atoi(rankStr)
	if err != nil {
		return nil, fmt.Errorf("broker attribute rank=%q is not a number: %w", rankStr, syscall.EPROTO)
	}
	uri, err := h.Attr(ctx, "local-uri")
	if err != nil {
		return nil, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("rexec: %w", err)
	}
	s := &server{
		h:        h,
		cfg:      cfg,
		rank:     rank,
		rankStr:  rankStr,
		localURI: uri,
		devnull:  devnull,
		spawn:    newSpawner(),
		procs:    make(map[int]*proc),
		labels:   make(map[string]*proc),
		clients:  make(map[string]map[uint32]*proc),
		watches:  make(map[string]map[*proc]bool),
	}
	s.baseEnv = s.environ(envMap(os.Environ()))
	if rank == 0 {
		var conf accessConf
		if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err == nil {
			s.multiuser = conf.Access.AllowGuestUser
		}
	}
	return s, nil
}

// accessConf is the part of the configuration rexec reads.
type accessConf struct {
	Access struct {
		AllowGuestUser bool `json:"allow-guest-user"`
	} `json:"access"`
}

// handleConfigReload takes a new configuration (offered by the broker).
func (s *server) handleConfigReload(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload the configuration")
		return
	}
	var conf accessConf
	if err := r.Msg.UnmarshalPayload(&conf); err != nil {
		r.Errorf(syscall.EPROTO, "rexec: configuration: %v", err)
		return
	}
	if s.rank == 0 {
		s.multiuser = conf.Access.AllowGuestUser
	}
	r.Respond(nil)
}

func (s *server) register() {
	s.h.HandleFunc("rexec.exec", s.handleExec)
	s.h.HandleFunc("rexec.write", s.handleWrite)
	s.h.HandleFunc("rexec.kill", s.handleKill)
	s.h.HandleFunc("rexec.list", s.handleList)
	s.h.HandleFunc("rexec.wait", s.handleWait)
	s.h.HandleFunc("rexec.attach", s.handleAttach)
	s.h.HandleFunc("rexec.disconnect", s.handleDisconnect)
	s.h.HandleFunc("rexec.config-reload", s.handleConfigReload)
}

// logf writes to the broker log (fire and forget).
func (s *server) logf(sev int, format string, args ...any) {
	s.h.RPC("log.append", flux.NodeidAny, map[string]any{
		"severity": sev, "name": "rexec", "message": fmt.Sprintf(format, args...),
	}, flux.NoResponse)
}

// allowed answers EPERM unless the requestor is the instance owner
// (RFC 42: the broker's server runs processes as the owner, so nobody
// else may use it) and, on rank 0 of a multi-user instance, the request
// started on this broker.
func (s *server) allowed(r *flux.Request) bool {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "%s: only the instance owner may use the subprocess server", r.Topic())
		return false
	}
	if s.multiuser && r.Msg.Rolemask&message.RoleLocal == 0 {
		r.Errorf(syscall.EPERM, "Remote rexec requests are not allowed on rank 0")
		return false
	}
	return true
}

func (s *server) handleExec(r *flux.Request) {
	var req subprocess.ExecRequest
	if r.Decode(&req) != nil || !s.allowed(r) {
		return
	}
	if s.stopping {
		r.Errorf(syscall.ENOSYS, "subprocess server is shutting down")
		return
	}
	if err := s.validate(r, &req); err != nil {
		r.RespondError(err)
		return
	}
	p, err := s.newProc(r, &req)
	if err != nil {
		r.RespondError(err)
		return
	}
	s.starting++
	if p.label != "" {
		s.labels[p.label] = p
	}
	if p.req != nil {
		m := s.clients[p.route]
		if m == nil {
			m = make(map[uint32]*proc)
			s.clients[p.route] = m
		}
		m[p.tag] = p
		if p.flags&subprocess.FlagWriteCredit != 0 {
			r.Respond(subprocess.AddCreditResponse{Type: subprocess.TypeAddCredit,
				Channels: map[string]int{"stdin": p.stdinSize}})
		}
	}
	s.spawn.do(p.launch)
}

// launched runs on the Serve goroutine once p runs: it becomes known by
// pid before "started" is answered (so a kill or list the client sends
// on seeing it finds it), then its goroutines start (so its output
// follows "started"), and it gets any signal asked for meanwhile.
func (s *server) launched(p *proc) {
	s.starting--
	s.seq++
	p.seq = s.seq
	p.running = true
	s.procs[p.pid] = p
	p.exec.Respond(subprocess.StartedResponse{Type: subprocess.TypeStarted, Pid: p.pid})
	p.run()
	if s.stopping {
		p.pendingSig = syscall.SIGKILL
	}
	if p.pendingSig != 0 {
		p.signal(p.pendingSig)
	}
}

// launchFailed forgets a process that could not be started (the error
// was sent already).
func (s *server) launchFailed(p *proc) {
	s.starting--
	s.forget(p)
	s.checkDrained()
}

// validate checks an exec request beyond its JSON shape.
func (s *server) validate(r *flux.Request, req *subprocess.ExecRequest) error {
	c := &req.Cmd
	background := !r.Msg.IsStreaming()
	switch {
	case len(c.Cmdline) == 0 || c.Cmdline[0] == "":
		return flux.NewError(syscall.EPROTO, "command line is empty")
	case len(c.Channels) > 0:
		return flux.NewError(syscall.EINVAL, "auxiliary channels are not supported")
	case !background && req.Flags&subprocess.FlagWaitable != 0:
		return flux.NewError(syscall.EINVAL, "waitable flag only supported in background mode")
	case background && req.Flags&subprocess.FlagWriteCredit != 0:
		return flux.NewError(syscall.EINVAL, "write-credit flag is not allowed in background mode")
	case background && req.LocalFlags&subprocess.LocalStdioFallthrough != 0:
		return flux.NewError(syscall.EINVAL, "stdio-fallthrough flag is not allowed in background mode")
	}
	if c.Label != "" {
		if _, dup := s.labels[c.Label]; dup {
			return flux.NewError(syscall.EEXIST, fmt.Sprintf("command label %q is not unique", c.Label))
		}
	}
	if v, ok := c.Opts[subprocess.OptStdinBufsize]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxStdinBufsize {
			return flux.NewError(syscall.EINVAL, fmt.Sprintf("option %s=%q: want 1..%d bytes", subprocess.OptStdinBufsize, v, maxStdinBufsize))
		}
	}
	return nil
}

// handleWrite queues stdin data. Write requests get no response (RFC
// 42): unknown targets and malformed requests are dropped.
func (s *server) handleWrite(r *flux.Request) {
	var req subprocess.WriteRequest
	if err := r.Msg.UnmarshalPayload(&req); err != nil || !r.IsOwner() {
		return
	}
	p := s.clients[r.Msg.RouteString()][req.Matchtag]
	if p == nil || p.stdin == nil || req.IO.Stream != "stdin" {
		return
	}
	data, err := req.IO.Bytes()
	if err != nil {
		s.logf(sevErr, "write to %s[%d]: %v", p.name, p.pid, err)
		return
	}
	if err := p.stdin.write(data, req.IO.EOF); err != nil {
		s.logf(sevErr, "%s: %v: killing it", p.name, err)
		p.signal(syscall.SIGKILL)
	}
}

func (s *server) handleKill(r *flux.Request) {
	var req subprocess.KillRequest
	if r.Decode(&req) != nil || !s.allowed(r) {
		return
	}
	p, err := s.find(req.Pid, req.Label)
	if err != nil {
		r.RespondError(err)
		return
	}
	if err := p.signal(syscall.Signal(req.Signum)); err != nil {
		// flux-core answers with the errno alone ("No such process")
		en, _ := err.(syscall.Errno)
		if en == 0 {
			en = syscall.EINVAL
		}
		r.Errorf(en, "%s", strerror(en))
		return
	}
	r.Respond(nil)
}

func (s *server) handleList(r *flux.Request) {
	if !s.allowed(r) {
		return
	}
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].seq < procs[j].seq })
	resp := subprocess.ListResponse{Rank: s.rank, Procs: make([]subprocess.ProcInfo, 0, len(procs))}
	for _, p := range procs {
		state := "R"
		if p.exited.Load() {
			state = "Z"
		}
		resp.Procs = append(resp.Procs, subprocess.ProcInfo{
			Pid: p.pid, Cmd: p.name, Label: p.label, State: state,
			Bg: p.bg, Waitable: p.waitable, Attached: p.attachRoute != "",
		})
	}
	r.Respond(resp)
}

// handleDisconnect kills the streaming processes of a client that went
// away (RFC 42). Background processes keep running: one the client was
// attached to goes back to the background, and its pending waits are
// dropped.
func (s *server) handleDisconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	for _, p := range s.clients[route] {
		p.signal(syscall.SIGKILL)
	}
	for p := range s.watches[route] {
		if p.attachRoute == route {
			p.detach()
		}
		if p.waiterRoute == route {
			p.waiter, p.waiterRoute = nil, ""
		}
	}
	delete(s.watches, route)
}

// complete runs on the Serve goroutine once a process has been reaped
// and its output drained: it ends the stream of whoever listens, hands
// the status to a waiter, and forgets the process unless it is a
// waitable one nobody has collected yet (a zombie).
func (s *server) complete(p *proc) {
	p.completed = true
	p.mu.Lock()
	l := p.listener
	p.listener = nil
	p.mu.Unlock()
	if l != nil {
		l.EndStream()
		if p.attachRoute != "" {
			p.collected = true
			s.unwatch(p.attachRoute, p)
			p.attachRoute = ""
		}
	}
	p.closeFiles()
	if p.waiter != nil {
		s.respondWait(p)
	}
	if !p.waitable || p.collected || s.stopping {
		s.forget(p)
	}
	s.checkDrained()
}

// forget removes p from the tables.
func (s *server) forget(p *proc) {
	if p.running && s.procs[p.pid] == p {
		delete(s.procs, p.pid)
	}
	if p.label != "" && s.labels[p.label] == p {
		delete(s.labels, p.label)
	}
	if p.waiterRoute != "" {
		s.unwatch(p.waiterRoute, p)
	}
	if p.attachRoute != "" {
		s.unwatch(p.attachRoute, p)
	}
	if p.req != nil {
		if m := s.clients[p.route]; m[p.tag] == p {
			delete(m, p.tag)
			if len(m) == 0 {
				delete(s.clients, p.route)
			}
		}
	}
}

// checkDrained ends shutdown's wait once nothing runs or starts.
func (s *server) checkDrained() {
	if s.stopping && len(s.procs) == 0 && s.starting == 0 && s.drained != nil {
		s.drained()
	}
}

// shutdown SIGKILLs every process group, waits up to KillGrace for the
// processes to end (serving meanwhile, so their streams end properly),
// then abandons what is left.
func (s *server) shutdown() {
	s.stopping = true
	s.halting.Store(true)
	for _, p := range s.procs {
		if p.completed { // a zombie nobody collected
			s.forget(p)
			continue
		}
		p.signal(syscall.SIGKILL)
	}
	if len(s.procs) > 0 || s.starting > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.KillGrace)
		s.drained = cancel
		s.h.Serve(ctx)
		cancel()
	}
	for _, p := range s.procs {
		s.logf(sevErr, "%s[%d] did not end within %v of SIGKILL", p.name, p.pid, s.cfg.KillGrace)
		p.closeFiles()
	}
	s.spawn.stop()
	waitTimeout(&s.wg, time.Second)
	s.devnull.Close()
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Variables a process never inherits from its server.
var dropEnv = map[string]bool{"FLUX_PROXY_REMOTE": true, "NOTIFY_SOCKET": true, "INVOCATION_ID": true}

// environ turns a command's environment into exec form: FLUX_URI points
// at this broker, and a few variables are removed.
func (s *server) environ(env map[string]string) []string {
	out := make([]string, 0, len(env)+1)
	for k, v := range env {
		if dropEnv[k] || k == "FLUX_URI" {
			continue
		}
		out = append(out, k+"="+v)
	}
	return append(out, "FLUX_URI="+s.localURI)
}

func envMap(kvs []string) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
