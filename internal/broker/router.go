package broker

import (
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// peerKind tells the router where a peer sits.
type peerKind int

const (
	peerClient peerKind = iota // a local connector client
	peerModule                 // an in-process module or the broker's own services
	peerChild                  // a child broker on the overlay
	peerParent                 // the parent broker on the overlay
)

// peer is anything the router can deliver messages to. deliver must not
// block.
type peer interface {
	id() string
	kind() peerKind
	deliver(m *message.Message)
	creds() (userid, rolemask uint32)
}

// router moves messages between peers (RFC 3 routing): requests by
// service and nodeid, responses by their route stack, events by topic
// subscription after rank 0 has sequenced them.
//
// Lock order: router.mu before subscription state; evmu is taken alone
// (it serializes event sequencing and fan-out so every peer sees events in
// sequence order).
type router struct {
	b *Broker

	mu       sync.RWMutex
	peers    map[string]peer
	services map[string]peer
	owners   map[peer][]string // services registered by each peer
	subs     map[peer][]string // event subscription prefixes per peer

	evmu sync.Mutex
	seq  uint32
}

func newRouter(b *Broker) *router {
	return &router{
		b:        b,
		peers:    make(map[string]peer),
		services: make(map[string]peer),
		owners:   make(map[peer][]string),
		subs:     make(map[peer][]string),
	}
}

func (r *router) addPeer(p peer) {
	r.mu.Lock()
	r.peers[p.id()] = p
	r.mu.Unlock()
}

// removePeer forgets p, its services and subscriptions, and returns the
// services it had registered.
func (r *router) removePeer(p peer) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peers[p.id()] == p {
		delete(r.peers, p.id())
	}
	svcs := r.owners[p]
	for _, s := range svcs {
		if r.services[s] == p {
			delete(r.services, s)
		}
	}
	delete(r.owners, p)
	delete(r.subs, p)
	return svcs
}

func (r *router) peer(id string) peer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.peers[id]
}

// addService routes requests for name to p. A name already served by
// another peer is EEXIST.
func (r *router) addService(name string, p peer) error {
	if name == "" || strings.ContainsAny(name, ".*") {
		return fmt.Errorf("invalid service name %q: %w", name, syscall.EINVAL)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.services[name]; ok {
		if cur == p {
			return nil
		}
		return fmt.Errorf("service %q is already registered: %w", name, syscall.EEXIST)
	}
	r.services[name] = p
	r.owners[p] = append(r.owners[p], name)
	return nil
}

// removeService drops name if p registered it.
func (r *router) removeService(name string, p peer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.services[name] != p {
		return fmt.Errorf("service %q is not registered by this connection: %w", name, syscall.ENOENT)
	}
	delete(r.services, name)
	list := r.owners[p]
	for i, s := range list {
		if s == name {
			r.owners[p] = append(list[:i], list[i+1:]...)
			break
		}
	}
	return nil
}

// serviceList returns the services registered by p.
func (r *router) serviceList(p peer) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.owners[p]...)
}

func (r *router) subscribe(p peer, prefix string) {
	r.mu.Lock()
	r.subs[p] = append(r.subs[p], prefix)
	r.mu.Unlock()
}

func (r *router) unsubscribe(p peer, prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.subs[p]
	for i, s := range list {
		if s == prefix {
			r.subs[p] = append(list[:i], list[i+1:]...)
			return
		}
	}
}

// route sends m, received from peer from, on its way.
func (r *router) route(m *message.Message, from peer) {
	switch m.Type {
	case message.Request:
		m.PushRoute(from.id())
		r.routeRequest(m)
	case message.Response:
		r.routeResponse(m)
	case message.Event:
		if from.kind() == peerParent {
			if m.Topic == resizeTopic {
				r.b.resizeFromParent(m) // resize.go: before anyone below sees it
			}
			r.distribute(m)
			return
		}
		if m.Topic == resizeTopic {
			r.b.log.Warn("dropped an event only the broker publishes", "topic", m.Topic, "userid", m.Userid)
			return
		}
		if m.Rolemask&message.RoleOwner == 0 && r.b.serviceTopic(m.Topic) {
			// as event.pub refuses it (builtins.go): a service's events
			// are its own
			r.b.log.Warn("dropped a guest's event in a service's namespace", "topic", m.Topic, "userid", m.Userid)
			return
		}
		r.publish(m)
	}
}

// respondError answers request m with errnum, unless it wants no response.
func (r *router) respondError(m *message.Message, errnum syscall.Errno, text string) {
	if m.NoResponse() {
		return
	}
	r.routeResponse(message.ErrorTo(m, uint32(errnum), text))
}

func (r *router) routeRequest(m *message.Message) {
	b := r.b
	rank := b.rank
	if m.Nodeid == message.NodeidUpstream {
		m.Nodeid = rank
		m.Flags |= message.FlagUpstream
	}
	upstream := m.Flags&message.FlagUpstream != 0
	switch {
	case upstream && m.Nodeid == rank:
		// skip this broker: the nearest service above us answers
		r.toParent(m)
	case m.Nodeid == message.NodeidAny || upstream:
		if p := r.lookupService(m.Topic); p != nil {
			p.deliver(m)
			return
		}
		if b.overlay.hasParent() {
			r.toParent(m)
			return
		}
		r.respondError(m, syscall.ENOSYS, fmt.Sprintf("No service matching %s is registered", m.Topic))
	case m.Nodeid == rank:
		if p := r.lookupService(m.Topic); p != nil {
			p.deliver(m)
			return
		}
		r.respondError(m, syscall.ENOSYS, fmt.Sprintf("No service matching %s is registered", m.Topic))
	default:
		r.toRank(m)
	}
}

// serviceTopic reports whether an event topic is in a service's
// namespace: SERVICE.name where SERVICE is registered here or is one of
// the modules this broker can load (it may run on another rank only).
func (b *Broker) serviceTopic(topic string) bool {
	svc := message.Service(topic)
	if svc == topic {
		return false
	}
	if b.router.lookupService(topic) != nil {
		return true
	}
	_, ok := b.modules.reg.Lookup(svc)
	return ok
}

func (r *router) lookupService(topic string) peer {
	name := message.Service(topic)
	r.mu.RLock()
	p := r.services[name]
	r.mu.RUnlock()
	return p
}

func (r *router) toParent(m *message.Message) {
	if !r.b.overlay.sendParent(m) {
		r.respondError(m, syscall.EHOSTUNREACH, "parent broker is not reachable")
	}
}

// toRank forwards a request addressed to another rank down the tree when
// the rank is below us, otherwise up.
func (r *router) toRank(m *message.Message) {
	b := r.b
	topo := b.topo()
	if m.Nodeid >= topo.size {
		r.respondError(m, syscall.EHOSTUNREACH, fmt.Sprintf("rank %d is not in this instance (size %d)", m.Nodeid, topo.size))
		return
	}
	if child, ok := topo.childToward(b.rank, m.Nodeid); ok {
		if !b.overlay.sendChild(child, m) {
			r.respondError(m, syscall.EHOSTUNREACH, fmt.Sprintf("rank %d is unreachable (broker %d is offline)", m.Nodeid, child))
		}
		return
	}
	r.toParent(m)
}

func (r *router) routeResponse(m *message.Message) {
	id, ok := m.PopRoute()
	if !ok {
		r.b.log.Debug("dropping response with empty route stack", "topic", m.Topic)
		return
	}
	p := r.peer(id)
	if p == nil {
		// the requestor went away; nothing to do
		return
	}
	p.deliver(m)
}

// publish sequences an event at rank 0 and distributes it, or sends it
// toward rank 0.
func (r *router) publish(m *message.Message) {
	if r.b.rank != 0 {
		if !r.b.overlay.sendParent(m) {
			r.b.log.Warn("dropping event: parent unreachable", "topic", m.Topic)
		}
		return
	}
	r.evmu.Lock()
	r.seq++
	m.Seq = r.seq
	m.Flags &^= message.FlagRoute
	m.Routes = nil
	r.distributeLocked(m)
	r.evmu.Unlock()
}

// publishSeq publishes like publish and returns the assigned sequence.
func (r *router) publishSeq(m *message.Message) uint32 {
	r.evmu.Lock()
	defer r.evmu.Unlock()
	r.seq++
	m.Seq = r.seq
	m.Flags &^= message.FlagRoute
	m.Routes = nil
	r.distributeLocked(m)
	return m.Seq
}

// distribute delivers a sequenced event from the parent here and below.
func (r *router) distribute(m *message.Message) {
	r.evmu.Lock()
	r.distributeLocked(m)
	r.evmu.Unlock()
}

func (r *router) distributeLocked(m *message.Message) {
	r.b.overlay.sendChildren(m)
	private := m.Flags&message.FlagPrivate != 0
	r.mu.RLock()
	for p, prefixes := range r.subs {
		for _, pre := range prefixes {
			if strings.HasPrefix(m.Topic, pre) {
				if private {
					uid, role := p.creds()
					if role&message.RoleOwner == 0 && uid != m.Userid {
						break
					}
				}
				p.deliver(m)
				break
			}
		}
	}
	r.mu.RUnlock()
}
