package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// builtins are the services every broker provides itself: attributes,
// ping, service registration, event subscription and publishing, logging,
// module management and overlay status.
type builtins struct {
	b      *Broker
	conf   configState // config.go
	p      *modulePeer
	h      *flux.Handle
	cancel context.CancelFunc
	done   chan struct{}
	// dmesg followers by requestor route; only the Serve goroutine
	// touches this map.
	followers map[string]*dmesgFollower
	// followEnd is closed by stop: followers send what is logged until
	// then (the broker's last lines, modules unloading), then end their
	// streams; stop waits for them (followWG).
	followEnd chan struct{}
	followWG  sync.WaitGroup
	followMu  sync.Mutex // orders followWG.Add before stop's Wait
	// cpu is the CPU profile in progress (broker.profile "cpu").
	cpu *cpuProfile
}

var builtinServices = []string{"broker", "attr", "service", "local", "event", "log", "module", "overlay", "config", "runat"}

func newBuiltins(b *Broker) *builtins {
	s := &builtins{b: b, done: make(chan struct{}), followers: make(map[string]*dmesgFollower), followEnd: make(chan struct{})}
	s.conf.table = b.cfg.TOML
	s.conf.synced = make(chan struct{})
	if b.rank == 0 {
		close(s.conf.synced)
	}
	return s
}

func (s *builtins) start() error {
	b := s.b
	s.noteConfig(b.cfg.TOML)
	s.p = newModulePeer(b, "broker")
	b.router.addPeer(s.p)
	for _, name := range builtinServices {
		if err := b.router.addService(name, s.p); err != nil {
			return err
		}
	}
	s.h = flux.NewHandle(s.p)
	h := s.h
	h.HandleFuncInline("attr.get", s.attrGet)
	h.HandleFunc("attr.set", s.attrSet)
	h.HandleFunc("attr.rm", s.attrRm)
	h.HandleFunc("attr.list", s.attrList)
	h.HandleFuncInline("broker.ping", s.ping)
	h.HandleFunc("broker.rusage", s.rusage)
	h.HandleFunc("broker.shutdown", s.shutdown)
	h.HandleFunc("config.get", s.configGet)
	h.HandleFunc("config.reload", s.configReload)
	h.HandleFunc("config.load", s.configLoad)
	h.HandleFunc("broker.profile", s.profile)
	h.HandleFunc("broker.disconnect", func(*flux.Request) {})
	h.HandleFunc("service.add", s.serviceAdd)
	h.HandleFunc("service.remove", s.serviceRemove)
	h.HandleFunc("local.sub", s.sub)
	h.HandleFunc("local.unsub", s.unsub)
	h.HandleFunc("event.pub", s.eventPub)
	h.HandleFunc("log.append", s.logAppend)
	h.HandleFunc("runat.push", s.runatPush)
	h.HandleFunc("log.dmesg", s.dmesg)
	h.HandleFunc("log.clear", s.logClear)
	h.HandleFunc("log.disconnect", s.logDisconnect)
	h.HandleFunc("module.list", s.moduleList)
	h.HandleFunc("module.load", s.moduleLoad)
	h.HandleFunc("module.remove", s.moduleRemove)
	h.HandleFunc("module.stats", s.moduleStats)
	h.HandleFunc("overlay.status", s.overlayStatus)
	h.HandleFunc("overlay.disconnect-subtree", s.overlayDisconnectSubtree)
	h.HandleFunc("overlay.shrink", s.overlayShrink)                  // resize.go
	h.HandleFunc("overlay.shrink-children", s.overlayShrinkChildren) // resize.go
	h.HandleFunc("overlay.trace", s.overlayTrace)                    // overlay_trace.go
	h.HandleFunc("overlay.disconnect", s.overlayDisconnect)          // ends its traces
	for _, name := range []string{"attr", "service", "local", "event", "module"} {
		h.HandleFunc(name+".disconnect", func(*flux.Request) {})
	}
	ctx, cancel := context.WithCancel(b.ctx)
	s.cancel = cancel
	go func() {
		defer close(s.done)
		h.Serve(ctx)
	}()
	if b.rank > 0 {
		go s.followConfig(ctx) // config.go
	}
	return nil
}

func (s *builtins) stop() {
	s.followMu.Lock()
	close(s.followEnd)
	s.followMu.Unlock()
	s.followWG.Wait()
	s.cancel()
	<-s.done
	s.b.router.removePeer(s.p)
}

// sender returns the local peer a request came from (the last hop pushed
// by this broker), or nil for requests that crossed the overlay.
func (s *builtins) sender(r *flux.Request) peer {
	id, ok := r.Msg.LastRoute()
	if !ok {
		return nil
	}
	p := s.b.router.peer(id)
	if p == nil || p.kind() == peerChild || p.kind() == peerParent {
		return nil
	}
	return p
}

func requireOwner(r *flux.Request) bool {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "%s: only the instance owner may do this", r.Topic())
		return false
	}
	return true
}

// requireOperator is requireOwner for what operators may also do.
func requireOperator(r *flux.Request) bool {
	if !r.IsOperator() {
		r.Errorf(syscall.EPERM, "%s: only the instance owner or an operator may do this", r.Topic())
		return false
	}
	return true
}

func (s *builtins) attrGet(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil {
		return
	}
	v, flags, err := s.b.attrs.get(req.Name)
	if err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(map[string]any{"value": v, "flags": flags})
}

func (s *builtins) attrSet(r *flux.Request) {
	var req struct {
		Name  string  `json:"name"`
		Value *string `json:"value"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	var err error
	if req.Value == nil {
		err = s.b.attrs.userRemove(req.Name)
	} else {
		err = s.b.attrs.userSet(req.Name, *req.Value)
	}
	if err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

func (s *builtins) attrRm(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	if err := s.b.attrs.userRemove(req.Name); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

func (s *builtins) attrList(r *flux.Request) {
	r.Respond(map[string]any{"names": s.b.attrs.names()})
}

func (s *builtins) ping(r *flux.Request) {
	respondPing(r, strconv.FormatUint(uint64(s.b.rank), 10), s.b.rank)
}

// respondPing answers a ping (broker.ping, NAME.ping): the request's
// members come back with route, userid, rolemask and rank added
// (replacing any the request had), spliced as raw JSON: a decode to a
// map and an encode back would cost more than the rest of the round
// trip. A payload that is not a JSON object is ignored. The route is the
// one taken, then self, the responder, as flux-core's responders add
// their own identity.
func respondPing(r *flux.Request, self string, rank uint32) {
	payload := r.Msg.JSON()
	out := append(make([]byte, 0, len(payload)+128), '{')
	n := 0
	if len(payload) > 0 {
		err := jsonwire.Object(payload, func(k, v []byte) error {
			switch string(k) {
			case "route", "userid", "rolemask", "rank":
				return nil
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = jsonwire.AppendString(out, string(k))
			out = append(out, ':')
			out = append(out, v...)
			n++
			return nil
		})
		if err != nil {
			out, n = out[:1], 0
		}
	}
	if n > 0 {
		out = append(out, ',')
	}
	out = append(out, `"route":`...)
	out = jsonwire.AppendString(out, r.Msg.RouteString()+"!"+self)
	out = append(out, `,"userid":`...)
	out = jsonwire.AppendUint(out, uint64(r.Userid()))
	out = append(out, `,"rolemask":`...)
	out = jsonwire.AppendUint(out, uint64(r.Rolemask()))
	out = append(out, `,"rank":`...)
	out = jsonwire.AppendUint(out, uint64(rank))
	out = append(out, '}')
	r.Respond(flux.JSONBuffer(out))
}

func (s *builtins) rusage(r *flux.Request) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		r.RespondError(err)
		return
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	r.Respond(map[string]any{
		"utime":   tv(ru.Utime),
		"stime":   tv(ru.Stime),
		"maxrss":  ru.Maxrss,
		"minflt":  ru.Minflt,
		"majflt":  ru.Majflt,
		"nvcsw":   ru.Nvcsw,
		"nivcsw":  ru.Nivcsw,
		"inblock": ru.Inblock,
		"oublock": ru.Oublock,
	})
}

func (s *builtins) shutdown(r *flux.Request) {
	var req struct {
		Exitcode int `json:"exitcode"`
		// CancelJobs: end running jobs even when the instance could
		// take them back at its next start (flux shutdown --cancel-jobs)
		CancelJobs bool `json:"cancel_jobs"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	if s.b.rank != 0 {
		r.Errorf(syscall.EINVAL, "shutdown must be requested of rank 0")
		return
	}
	r.Respond(nil)
	s.b.keepJobs.Store(s.b.cfg.Statedir != "" && !req.CancelJobs)
	s.b.Shutdown(req.Exitcode)
}

func (s *builtins) serviceAdd(r *flux.Request) {
	var req struct {
		Service string `json:"service"`
	}
	if r.Decode(&req) != nil {
		return
	}
	// a guest may only add services named for itself ("<userid>-...")
	if !r.IsOwner() && !strings.HasPrefix(req.Service, strconv.FormatUint(uint64(r.Userid()), 10)+"-") {
		r.Errorf(syscall.EPERM, "service.add: guests may only add services named %d-*", r.Userid())
		return
	}
	p := s.sender(r)
	if p == nil {
		r.Errorf(syscall.EINVAL, "service.add: must be sent to the local broker")
		return
	}
	if err := s.b.router.addService(req.Service, p); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

func (s *builtins) serviceRemove(r *flux.Request) {
	var req struct {
		Service string `json:"service"`
	}
	if r.Decode(&req) != nil {
		return
	}
	p := s.sender(r)
	if p == nil {
		r.Errorf(syscall.EINVAL, "service.remove: must be sent to the local broker")
		return
	}
	if err := s.b.router.removeService(req.Service, p); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

func (s *builtins) sub(r *flux.Request) {
	var req struct {
		Topic string `json:"topic"`
	}
	if r.Decode(&req) != nil {
		return
	}
	p := s.sender(r)
	if p == nil {
		r.Errorf(syscall.EINVAL, "local.sub: must be sent to the local broker")
		return
	}
	s.b.router.subscribe(p, req.Topic)
	r.Respond(nil)
}

func (s *builtins) unsub(r *flux.Request) {
	var req struct {
		Topic string `json:"topic"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if p := s.sender(r); p != nil {
		s.b.router.unsubscribe(p, req.Topic)
	}
	r.Respond(nil)
}

func (s *builtins) eventPub(r *flux.Request) {
	var req struct {
		Topic   string  `json:"topic"`
		Flags   int     `json:"flags"`
		Payload *string `json:"payload"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Topic == "" {
		r.Errorf(syscall.EINVAL, "event.pub: topic must not be empty")
		return
	}
	if req.Topic == resizeTopic {
		r.Errorf(syscall.EPERM, "event.pub: %s is published by the broker only (resizing the instance: overlay.shrink, or a broker joining)", req.Topic)
		return
	}
	// A service's events (resource.rehello, job-manager.online ...) are
	// its own: modules ignore a guest's anyway, but tools following them
	// would be misled.
	if !r.IsOwner() && s.b.serviceTopic(req.Topic) {
		svc := message.Service(req.Topic)
		r.Errorf(syscall.EPERM, "event.pub: guests may not publish %s: %s.* events belong to the %s service", req.Topic, svc, svc)
		return
	}
	if s.b.rank != 0 {
		// Sequencing happens at rank 0: forward the request there.
		r.Relay(s.h.RPC("event.pub", 0, r.Msg.JSON(), 0))
		return
	}
	ev := message.New(message.Event, req.Topic)
	ev.Userid, ev.Rolemask = r.Userid(), r.Rolemask()
	if req.Flags&int(message.FlagPrivate) != 0 {
		ev.Flags |= message.FlagPrivate
	}
	if req.Payload != nil {
		ev.SetJSON([]byte(*req.Payload))
	}
	seq := s.b.router.publishSeq(ev)
	r.Respond(map[string]any{"seq": seq})
}

func (s *builtins) logAppend(r *flux.Request) {
	var req struct {
		Severity *int    `json:"severity"`
		Name     string  `json:"name"`
		Message  string  `json:"message"`
		Time     float64 `json:"timestamp"`
	}
	if r.Decode(&req) != nil {
		return
	}
	sev := sevNotice
	if req.Severity != nil {
		if *req.Severity < 0 || *req.Severity > sevDebug {
			r.Errorf(syscall.EINVAL, "log.append: severity %d is not 0-7", *req.Severity)
			return
		}
		sev = *req.Severity
	}
	if req.Name == "" {
		req.Name = "logger"
	}
	ts := req.Time
	if ts == 0 || !r.IsOwner() {
		ts = float64(time.Now().UnixNano()) / 1e9
	}
	if !r.IsOwner() {
		// a guest's line says whose it is, on one line: it cannot pass
		// for a module's or forge lines of its own
		req.Name = fmt.Sprintf("%s[uid %d]", oneLine(req.Name), r.Userid())
		req.Message = oneLine(req.Message)
	}
	s.b.ring.append(flux.LogEntry{Timestamp: ts, Rank: s.b.rank, Severity: sev, Name: req.Name, Message: req.Message})
	r.Respond(nil)
}

// oneLine escapes the control characters of s (newlines, carriage
// returns, terminal escapes) as Go does in a quoted string.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// followers of log.dmesg, by requestor route, so a disconnect can end them
type dmesgFollower struct {
	ch   chan flux.LogEntry
	stop chan struct{}
}

func (s *builtins) dmesg(r *flux.Request) {
	var req struct {
		Follow    bool `json:"follow"`
		NoBacklog bool `json:"nobacklog"`
	}
	// the log may tell of other users' jobs: the owner's and operators'
	if r.Decode(&req) != nil || !requireOperator(r) {
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "log.dmesg: request must be streaming")
		return
	}
	if !req.NoBacklog {
		for _, e := range s.b.ring.snapshot() {
			r.Respond(e)
		}
	}
	if !req.Follow {
		r.EndStream()
		return
	}
	s.followMu.Lock()
	select {
	case <-s.followEnd: // the broker is stopping
		s.followMu.Unlock()
		r.EndStream()
		return
	default:
	}
	s.followWG.Add(1)
	s.followMu.Unlock()
	f := &dmesgFollower{ch: s.b.ring.follow(), stop: make(chan struct{})}
	key := r.Msg.RouteString()
	s.followers[key] = f
	go func() {
		defer s.followWG.Done()
		defer s.b.ring.unfollow(f.ch)
		// end the stream after the entries already logged: a broker
		// shutting down still sends the lines of its last moments
		end := func() {
			for {
				select {
				case e := <-f.ch:
					r.Respond(e)
				default:
					r.EndStream()
					return
				}
			}
		}
		for {
			select {
			case e := <-f.ch:
				r.Respond(e)
			case <-f.stop:
				end()
				return
			case <-s.followEnd:
				end()
				return
			}
		}
	}()
}

func (s *builtins) logDisconnect(r *flux.Request) {
	key := r.Msg.RouteString()
	if f, ok := s.followers[key]; ok {
		close(f.stop)
		delete(s.followers, key)
	}
}

func (s *builtins) logClear(r *flux.Request) {
	if !requireOwner(r) {
		return
	}
	s.b.ring.clear()
	r.Respond(nil)
}

func (s *builtins) moduleList(r *flux.Request) {
	r.Respond(flux.ModuleList{Mods: s.b.modules.list(), Available: s.b.modules.reg.Names()})
}

func (s *builtins) moduleLoad(r *flux.Request) {
	var req struct {
		Name string   `json:"name"`
		Path string   `json:"path"`
		Args []string `json:"args"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	name := req.Name
	if name == "" {
		name = req.Path
	}
	if err := s.b.modules.load(name, req.Args); err != nil {
		r.RespondError(err)
		return
	}
	// answered once the module runs, or with why it failed to start
	// (waited for elsewhere: its start-up may need this service)
	go func() {
		if err := s.b.modules.waitStarted(s.b.ctx, name); err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(nil)
	}()
}

func (s *builtins) moduleRemove(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	// Removal waits for the module; don't stall other builtin services.
	go func() {
		if err := s.b.modules.remove(req.Name, 10*time.Second); err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(nil)
	}()
}

func (s *builtins) moduleStats(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Name == "log" {
		r.Respond(s.b.ring.stats()) // the broker's log ring, as flux-core's log component
		return
	}
	if req.Name == "overlay" {
		// flux-core's overlay is a broker component with module-style
		// stats; fluxgo's is built into the broker too
		kids := s.b.overlay.childStates()
		connected := 0
		for _, cs := range kids {
			if cs.state == "full" || cs.state == "partial" || cs.state == "degraded" {
				connected++
			}
		}
		parents := 0
		if s.b.overlay.hasParent() {
			parents = 1
		}
		r.Respond(map[string]any{"child-count": len(kids), "child-connected": connected, "parent-count": parents})
		return
	}
	st, err := s.b.modules.stats(req.Name)
	if err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(st)
}

func (s *builtins) overlayStatus(r *flux.Request) {
	var kids []flux.OverlayChildStatus
	for _, cs := range s.b.overlay.childStates() {
		kids = append(kids, flux.OverlayChildStatus{Rank: cs.rank, Status: cs.state, Duration: time.Since(cs.since).Seconds(),
			Error: cs.err, Torpid: cs.torpid})
	}
	host, _, _ := s.b.attrs.get("hostname")
	state, _ := s.b.state.Load().(string)
	r.Respond(flux.OverlayStatus{Rank: s.b.rank, Size: s.b.Size(), Hostname: host, State: state,
		Children: kids, Uptime: time.Since(s.b.started).Seconds()})
}
