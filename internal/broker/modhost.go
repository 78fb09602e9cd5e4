package broker

import (
	"context"
	"fmt"
	"runtime/debug"
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
)

// modulePeer is a module's in-process connection: its flux.Handle sends
// through the router directly, and the router delivers to the handle
// without a socket in between.
type modulePeer struct {
	b       *Broker
	name    string
	route   string // its route id, unique to this load
	service string // the module's own service (module.Module.Name)
	args    []string
	h       *flux.Handle
	loaded  time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	exitErr error // why Run returned (read after done is closed)
	dead    atomic.Bool
	lastMsg atomic.Int64
	rx, tx  atomic.Uint64

	mu       sync.Mutex
	deliverF func(*message.Message)
	closedF  func(error)
	pending  map[inflightID]*message.Message // requests delivered, not yet answered
	// pendingPeak is the most entries pending has held (see forgetLocked).
	pendingPeak int
	// touched are the services the module sent requests to: they are
	// told when it unloads, as for a local client (see disconnect)
	touched map[svcAddr]struct{}
}

// modLoads numbers module loads: each load routes as its own peer, so
// that responses to a module's requests that arrive after it unloaded
// never reach the next module of that name (which may have requests of
// the same matchtags in flight).
var modLoads atomic.Uint64

func newModulePeer(b *Broker, name string) *modulePeer {
	p := &modulePeer{b: b, name: name, loaded: time.Now(), done: make(chan struct{}),
		route:   fmt.Sprintf("%s-%d", name, modLoads.Add(1)),
		pending: make(map[inflightID]*message.Message), touched: make(map[svcAddr]struct{})}
	p.lastMsg.Store(time.Now().UnixNano())
	return p
}

// peer interface
func (p *modulePeer) id() string     { return p.route }
func (p *modulePeer) kind() peerKind { return peerModule }
func (p *modulePeer) creds() (uint32, uint32) {
	return p.b.owner, message.RoleOwner | message.RoleLocal
}

func (p *modulePeer) deliver(m *message.Message) {
	p.rx.Add(1)
	p.lastMsg.Store(p.b.coarse.Now())
	if m.Type == message.Request {
		if p.dead.Load() {
			p.b.router.respondError(m, syscall.ENOSYS, fmt.Sprintf("module %s is not loaded", p.name))
			return
		}
		if !m.NoResponse() {
			p.mu.Lock()
			p.pending[inflightKey(m)] = m
			p.pendingPeak = max(p.pendingPeak, len(p.pending))
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	f := p.deliverF
	p.mu.Unlock()
	if f != nil {
		f(m)
	}
}

// flux.Conn interface

func (p *modulePeer) Send(m *message.Message) error {
	p.tx.Add(1)
	p.lastMsg.Store(p.b.coarse.Now())
	if m.Userid == message.UseridUnknown {
		m.Userid, m.Rolemask = p.creds()
	}
	switch {
	case m.Type == message.Response && (!m.IsStreaming() || m.Errnum != 0):
		// the route stack still ends with the requestor's hop here
		p.mu.Lock()
		p.forgetLocked(inflightKey(m))
		p.mu.Unlock()
	case m.Type == message.Request:
		a := svcAddr{message.Service(m.Topic), m.Nodeid, m.Flags & message.FlagUpstream}
		p.mu.Lock()
		if _, ok := p.touched[a]; !ok && p.touched != nil { // nil once unloaded
			p.touched[a] = struct{}{}
		}
		p.mu.Unlock()
	}
	p.b.router.route(m, p)
	return nil
}

// disconnect tells every service the unloaded module used that it is
// gone ("<service>.disconnect" with the module's route), so they drop its
// streams and watches: a scheduler's resource.acquire, for one, which
// would otherwise keep the resources busy.
func (p *modulePeer) disconnect() {
	p.mu.Lock()
	svcs := make([]svcAddr, 0, len(p.touched))
	for s := range p.touched {
		svcs = append(svcs, s)
	}
	p.touched = nil
	p.mu.Unlock()
	for _, s := range svcs {
		if s.service == p.service {
			continue
		}
		m := message.NewRequest(s.service+".disconnect", s.nodeid, nil)
		m.Flags |= message.FlagNoResponse | s.upstream
		m.Userid, m.Rolemask = p.creds()
		p.b.router.route(m, p)
	}
}

// InBroker says the module's messages stay in this process, so their
// Attached values reach the other modules (flux.Handle.InBroker).
func (p *modulePeer) InBroker() bool { return true }

// StreamEnded forgets a streaming request the module answered for the
// last time with an ordinary response (see flux.Request.Finish).
func (p *modulePeer) StreamEnded(req *message.Message) {
	p.mu.Lock()
	p.forgetLocked(inflightKey(req))
	p.mu.Unlock()
}

// shrinkAbove is the size past which a map that empties again is
// replaced: Go maps keep the room of their largest size, and a burst of
// jobs leaves some very large.
const shrinkAbove = 1024

// forgetLocked drops an answered request (p.mu held).
func (p *modulePeer) forgetLocked(k inflightID) {
	delete(p.pending, k)
	if len(p.pending) == 0 && p.pendingPeak > shrinkAbove {
		p.pending = make(map[inflightID]*message.Message)
		p.pendingPeak = 0
	}
}

func (p *modulePeer) Start(deliver func(*message.Message), closed func(error)) {
	p.mu.Lock()
	p.deliverF, p.closedF = deliver, closed
	p.mu.Unlock()
}

func (p *modulePeer) Close() error {
	p.mu.Lock()
	closed := p.closedF
	p.closedF = nil
	p.mu.Unlock()
	if closed != nil {
		closed(flux.ErrClosed)
	}
	return nil
}

// failPending answers requests the module never answered.
func (p *modulePeer) failPending(why string) {
	p.mu.Lock()
	pending := p.pending
	p.pending = make(map[inflightID]*message.Message)
	p.mu.Unlock()
	for _, req := range pending {
		p.b.router.respondError(req, syscall.ENOSYS, why)
	}
}

// moduleHost loads, runs and unloads modules.
type moduleHost struct {
	b   *Broker
	reg *module.Registry

	mu    sync.Mutex
	mods  map[string]*modulePeer
	order []string // load order, for reverse-order unload
	// failed holds why each module that ended on its own last ended
	// (cleared when it is loaded again), for waitStarted
	failed map[string]error
}

func newModuleHost(b *Broker, reg *module.Registry) *moduleHost {
	if reg == nil {
		reg = module.NewRegistry()
	}
	return &moduleHost{b: b, reg: reg, mods: make(map[string]*modulePeer), failed: make(map[string]error)}
}

// load starts module name with args. It returns once the module's
// goroutine is running and its service is registered.
func (mh *moduleHost) load(name string, args []string) error {
	factory, ok := mh.reg.Lookup(name)
	if !ok {
		if strings.HasPrefix(name, "sched.") {
			// seed 004's "flux module load sched.io-aware": flux-sched
			// 0.x's plugins, which no scheduler takes today
			return fmt.Errorf("no module named %q: %s is a flux-sched 0.x (2018) scheduler plugin; fluxgo's scheduler is sched-simple, whose policy is set with queue-policy=fcfs|easy|hybrid|conservative (flux module reload sched-simple queue-policy=easy): %w", name, name, syscall.ENOENT)
		}
		return fmt.Errorf("no module named %q (see flux module list --all): %w", name, syscall.ENOENT)
	}
	mh.mu.Lock()
	if _, dup := mh.mods[name]; dup {
		mh.mu.Unlock()
		return fmt.Errorf("module %q is already loaded: %w", name, syscall.EEXIST)
	}
	mod := factory()
	p := newModulePeer(mh.b, name)
	p.args = args
	p.service = mod.Name()
	mh.mods[name] = p
	mh.order = append(mh.order, name)
	delete(mh.failed, name)
	mh.mu.Unlock()

	b := mh.b
	b.router.addPeer(p)
	if err := b.router.addService(mod.Name(), p); err != nil {
		mh.forget(p)
		b.router.removePeer(p)
		return err
	}
	p.h = flux.NewHandle(p)
	// every module answers NAME.ping, as flux-core's do
	rank := mh.b.rank
	p.h.HandleFunc(mod.Name()+".ping", func(r *flux.Request) { respondPing(r, mod.Name(), rank) })
	// and NAME.debug, the flags flux module debug sets (flux.Handle.DebugTest)
	p.h.HandleFunc(mod.Name()+".debug", p.h.RespondDebug)
	ctx, cancel := context.WithCancel(b.ctx)
	p.cancel = cancel
	log := b.log.With("module", name)
	go func() {
		defer close(p.done)
		err := runModule(ctx, mod, p.h, args)
		if ctx.Err() == nil {
			p.exitErr = err
			mh.mu.Lock()
			mh.failed[name] = err
			mh.mu.Unlock()
		}
		p.dead.Store(true)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error(fmt.Sprintf("module %s failed and was unloaded: %v", name, err))
		default:
			log.Debug("module unloaded")
		}
		b.router.removePeer(p)
		p.failPending(fmt.Sprintf("module %s was unloaded", name))
		p.disconnect()
		p.Close()
		mh.forget(p)
	}()
	log.Debug("module loaded")
	return nil
}

// started waits until module p is running (its handle serves) and
// returns nil, or returns why it ended before that (nil for a module that
// ended cleanly), or ctx's error.
func (p *modulePeer) started(ctx context.Context) error {
	select {
	case <-p.h.Serving():
		return nil
	case <-p.done:
		if p.exitErr != nil {
			return fmt.Errorf("module %s failed: %w", p.name, p.exitErr)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitStarted waits for module name (as loaded now) to be running; see
// modulePeer.started.
func (mh *moduleHost) waitStarted(ctx context.Context, name string) error {
	mh.mu.Lock()
	p := mh.mods[name]
	err, ended := mh.failed[name]
	mh.mu.Unlock()
	if p == nil {
		if ended && err != nil {
			return fmt.Errorf("module %s failed: %w", name, err)
		}
		return nil // removed, or ended cleanly
	}
	return p.started(ctx)
}

// runModule runs a module, turning a panic into an error.
func runModule(ctx context.Context, mod module.Module, h *flux.Handle, args []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return mod.Run(ctx, h, args)
}

// isLoaded reports whether module name is loaded.
func (mh *moduleHost) isLoaded(name string) bool {
	mh.mu.Lock()
	defer mh.mu.Unlock()
	_, ok := mh.mods[name]
	return ok
}

func (mh *moduleHost) forget(p *modulePeer) {
	mh.mu.Lock()
	defer mh.mu.Unlock()
	if mh.mods[p.name] != p {
		return
	}
	delete(mh.mods, p.name)
	for i, n := range mh.order {
		if n == p.name {
			mh.order = append(mh.order[:i], mh.order[i+1:]...)
			break
		}
	}
}

// remove stops module name and waits for it to finish.
func (mh *moduleHost) remove(name string, timeout time.Duration) error {
	mh.mu.Lock()
	p := mh.mods[name]
	mh.mu.Unlock()
	if p == nil {
		return fmt.Errorf("module %q is not loaded: %w", name, syscall.ENOENT)
	}
	p.cancel()
	// timeout counts from the module's last message: one that is still
	// at work (the content store writing what it holds to its backing
	// store, one blob at a time on a loaded machine) is waited for
	tick := time.NewTicker(timeout / 10)
	defer tick.Stop()
	last, idle := p.rx.Load()+p.tx.Load(), time.Now()
	for {
		select {
		case <-p.done:
			return nil
		case <-tick.C:
			if n := p.rx.Load() + p.tx.Load(); n != last {
				last, idle = n, time.Now()
			} else if time.Since(idle) >= timeout {
				return fmt.Errorf("module %q did not stop within %v of its last message: %w", name, timeout, syscall.ETIMEDOUT)
			}
		}
	}
}

// removeAll unloads every module in reverse load order (rc3).
func (mh *moduleHost) removeAll(timeout time.Duration) { mh.removeAllBut(timeout, nil) }

// removeAllBut removes the modules in reverse load order, except those
// keep says to keep.
func (mh *moduleHost) removeAllBut(timeout time.Duration, keep func(name string) bool) {
	mh.mu.Lock()
	names := append([]string(nil), mh.order...)
	mh.mu.Unlock()
	for i := len(names) - 1; i >= 0; i-- {
		if keep != nil && keep(names[i]) {
			continue
		}
		if err := mh.remove(names[i], timeout); err != nil {
			mh.b.log.Warn("rc3: " + err.Error())
		}
	}
}

// services returns the own service of every loaded module, in load
// order.
func (mh *moduleHost) services() []string {
	mh.mu.Lock()
	defer mh.mu.Unlock()
	out := make([]string, 0, len(mh.order))
	for _, name := range mh.order {
		if p := mh.mods[name]; p != nil && p.service != "" {
			out = append(out, p.service)
		}
	}
	return out
}

// Module status values (flux-core's module states).
const modStatusRunning = 2

func (mh *moduleHost) list() []flux.ModuleInfo {
	mh.mu.Lock()
	defer mh.mu.Unlock()
	out := make([]flux.ModuleInfo, 0, len(mh.mods))
	now := time.Now().UnixNano()
	for _, p := range mh.mods {
		out = append(out, flux.ModuleInfo{
			Name:     p.name,
			Path:     "builtin:" + p.name,
			Idle:     int((now - p.lastMsg.Load()) / int64(time.Second)),
			Status:   modStatusRunning,
			Services: mh.b.router.serviceList(p),
			Args:     p.args,
			Loaded:   float64(p.loaded.UnixNano()) / 1e9,
			Rx:       p.rx.Load(),
			Tx:       p.tx.Load(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (mh *moduleHost) stats(name string) (map[string]any, error) {
	mh.mu.Lock()
	p := mh.mods[name]
	mh.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("module %q is not loaded: %w", name, syscall.ENOENT)
	}
	p.mu.Lock()
	pending := len(p.pending)
	p.mu.Unlock()
	return map[string]any{
		"name":     p.name,
		"rx":       p.rx.Load(),
		"tx":       p.tx.Load(),
		"pending":  pending,
		"uptime":   time.Since(p.loaded).Seconds(),
		"idle":     strconv.FormatInt((time.Now().UnixNano()-p.lastMsg.Load())/int64(time.Second), 10),
		"services": mh.b.router.serviceList(p),
	}, nil
}
