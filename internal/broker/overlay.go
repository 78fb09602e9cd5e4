package broker

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Overlay control message types (CtlType of message.Control), private to
// broker-to-broker links.
const (
	ctlHello     = 1 // child -> parent: join as rank CtlStatus; parent -> child: answer (CtlStatus = errno)
	ctlKeepalive = 2 // both ways, whenever a link has been idle
	ctlShutdown  = 3 // parent -> child: shut down your subtree
	ctlGoodbye   = 4 // child -> parent: leaving cleanly
	ctlReady     = 5 // child -> parent: my whole subtree has joined and started its modules
	ctlGrown     = 6 // child -> parent: a broker joined below, beyond the size or with a new hostname (resize.go)
)

// Child broker states as flux overlay status reports them.
const (
	stateOnline  = "full"
	stateLost    = "lost"
	stateOffline = "offline"
)

// link is one overlay connection, to the parent or to a child.
type link struct {
	o        *overlay
	conn     net.Conn
	q        *sendQueue
	rank     uint32
	pk       peerKind
	ident    string
	lastRecv atomic.Int64
	torpid   atomic.Bool // a child silent for tbon.torpid_max (overlay_torpid.go)
	silent   atomic.Bool // dropped for silence: nothing heard for tbon.timeout

	mu       sync.Mutex
	inflight map[inflightID]*message.Message // requests sent over this link awaiting responses
	closed   bool
	dropWhy  string // why this broker closed the link (drop), "" if it did not
}

// drop closes the link on purpose, recording why for flux overlay
// errors; the first reason given wins.
func (l *link) drop(why string) {
	l.mu.Lock()
	if l.dropWhy == "" {
		l.dropWhy = why
	}
	l.mu.Unlock()
	l.conn.Close()
}

// lostWhy is the error recorded for a child whose link ended without a
// goodbye: the reason it was dropped, or a lost connection.
func (l *link) lostWhy() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropWhy != "" {
		return l.dropWhy
	}
	return "lost connection"
}

func (l *link) id() string                 { return l.ident }
func (l *link) kind() peerKind             { return l.pk }
func (l *link) creds() (uint32, uint32)    { return l.o.b.owner, message.RoleOwner }
func (l *link) deliver(m *message.Message) { l.send(m) }

// inflightID identifies a request in flight: its matchtag and the route
// stack it carries (which its response carries back).
type inflightID struct {
	tag   uint32
	last  string // the most recent hop
	rest  string // the older hops joined with "!" (most requests have none)
	depth int
}

func inflightKey(m *message.Message) inflightID {
	k := inflightID{tag: m.Matchtag, depth: len(m.Routes)}
	switch n := len(m.Routes); {
	case n == 1:
		k.last = m.Routes[0]
	case n > 1:
		k.last = m.Routes[n-1]
		k.rest = strings.Join(m.Routes[:n-1], "!")
	}
	return k
}

// send queues m on the link, remembering requests that expect responses
// so they can be failed if the link is lost.
func (l *link) send(m *message.Message) bool {
	if m.Type == message.Request && !m.NoResponse() {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return false
		}
		l.inflight[inflightKey(m)] = m.Copy()
		l.mu.Unlock()
	}
	return l.push(m)
}

// push queues m on the link, for flux overlay trace to see.
func (l *link) push(m *message.Message) bool {
	l.o.b.tracer.trace("tx", l.rank, m)
	return l.q.push(m)
}

// responseArrived forgets the request a response from this link answers.
func (l *link) responseArrived(m *message.Message) {
	if m.IsStreaming() && m.Errnum == 0 {
		return
	}
	l.mu.Lock()
	delete(l.inflight, inflightKey(m))
	l.mu.Unlock()
}

// failInflight answers every request still waiting on the link with
// EHOSTUNREACH, so nothing hangs on a lost broker.
func (l *link) failInflight(r *router, why string) {
	l.mu.Lock()
	l.closed = true
	pending := l.inflight
	l.inflight = nil
	l.mu.Unlock()
	for _, req := range pending {
		r.respondError(req, syscall.EHOSTUNREACH, why)
	}
}

type childState struct {
	rank   uint32
	state  string
	ready  bool   // the child's whole subtree has joined
	torpid bool   // in childStates' snapshots: its link is torpid
	err    string // why it was lost (flux overlay errors); "" unless lost
	link   *link
	since  time.Time
}

// overlay owns this broker's tree-based overlay network (TBON) links: one
// to the parent (ranks > 0) and one per child.
type overlay struct {
	b        *Broker
	ln       net.Listener
	children map[uint32]*childState

	mu       sync.Mutex
	parent   *link
	joined   chan struct{} // closed when every child has joined once (quorum)
	changed  chan struct{} // signalled when a child's state changes
	gen      chan struct{} // closed and replaced when a child's state changes (any number of waiters)
	shutdown chan int      // receives an exit code when the parent says shut down
	timeout  time.Duration
	interval time.Duration
	lostHook func(rank uint32)
	// unsent: join reports (resize.go) made while this broker had no
	// parent link, by rank, sent when it joins (under mu)
	unsent map[uint32]grownReport
	wg     sync.WaitGroup
}

// holdReport keeps a join report for the parent until there is one.
func (o *overlay) holdReport(rep grownReport) {
	o.mu.Lock()
	p := o.parent
	if p == nil {
		if o.unsent == nil {
			o.unsent = make(map[uint32]grownReport)
		}
		o.unsent[rep.Rank] = rep
	}
	o.mu.Unlock()
	if p != nil {
		// a parent link that would not take it: it is going away, and
		// the broker with it
		o.b.log.Warn("overlay: could not report a join to the parent", "rank", rep.Rank, "size", rep.Size)
	}
}

func newOverlay(b *Broker) *overlay {
	o := &overlay{
		b:        b,
		children: make(map[uint32]*childState),
		joined:   make(chan struct{}),
		changed:  make(chan struct{}, 1),
		gen:      make(chan struct{}),
		shutdown: make(chan int, 1),
		timeout:  b.cfg.TBONTimeout,
		interval: keepaliveInterval(b.cfg.TBONTimeout, b.cfg.TorpidMin, b.cfg.TorpidMax),
	}
	for _, c := range b.topo().children(b.rank) {
		o.children[c] = &childState{rank: c, state: stateOffline, since: time.Now()}
	}
	if len(o.children) == 0 {
		close(o.joined)
	}
	return o
}

func (o *overlay) hasParent() bool { return o.b.rank != 0 }

func (o *overlay) sendParent(m *message.Message) bool {
	o.mu.Lock()
	p := o.parent
	o.mu.Unlock()
	if p == nil {
		return false
	}
	return p.send(m)
}

func (o *overlay) sendChild(rank uint32, m *message.Message) bool {
	o.mu.Lock()
	cs := o.children[rank]
	var l *link
	if cs != nil {
		l = cs.link
	}
	o.mu.Unlock()
	if l == nil {
		return false
	}
	return l.send(m)
}

func (o *overlay) sendChildren(m *message.Message) {
	o.mu.Lock()
	for _, cs := range o.children {
		if cs.link != nil {
			cs.link.push(m)
		}
	}
	o.mu.Unlock()
}

// listen starts accepting child connections on uri.
func (o *overlay) listen(uri string, inherited *os.File) error {
	var ln net.Listener
	var err error
	if inherited != nil {
		ln, err = net.FileListener(inherited)
		inherited.Close()
		if ul, ok := ln.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(true)
		}
	} else {
		ln, err = listenURI(uri, o.b)
	}
	if err != nil {
		return fmt.Errorf("overlay: listen on %s: %w", uri, err)
	}
	o.ln = ln
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					o.b.log.Error("overlay accept", "err", err)
				}
				return
			}
			o.wg.Add(1)
			go func() {
				defer o.wg.Done()
				o.acceptChild(c)
			}()
		}
	}()
	return nil
}

type helloPayload struct {
	Rank    uint32 `json:"rank"`
	Size    uint32 `json:"size"` // the instance size the child believes in
	Version string `json:"version"`
	// Hostname is the child's host, for the hostlist attribute of an
	// instance it grows (empty from an older broker).
	Hostname string `json:"hostname,omitempty"`
}

// helloRefusal is the payload of a refused hello's answer: why.
type helloRefusal struct {
	Error string `json:"error"`
}

// admitChild decides whether this broker takes rank as a child: the
// k-ary tree (which does not depend on the size) must make this broker
// its parent, and rank must be inside the size the child believes in
// (or, when its hello gives none, the size here). A child beyond this
// broker's size grows the instance (resize.go). Called with b.sizeMu
// held.
func (o *overlay) admitChild(rank, helloSize uint32) (syscall.Errno, string) {
	b := o.b
	topo := b.topo()
	if p, ok := topo.parent(rank); !ok || p != b.rank {
		return syscall.EINVAL, fmt.Sprintf("rank %d is not a child of rank %d (fanout %d)", rank, b.rank, topo.fanout)
	}
	size := helloSize
	if size == 0 {
		size = topo.size
	}
	if rank >= size {
		return syscall.EINVAL, fmt.Sprintf("rank %d is not less than the size %d its hello gives", rank, size)
	}
	if size > maxInstanceSize {
		return syscall.EINVAL, fmt.Sprintf("size %d is larger than an instance may be (%d)", size, maxInstanceSize)
	}
	return 0, ""
}

func (o *overlay) acceptChild(c net.Conn) {
	b := o.b
	if err := authenticatePeer(c, b); err != nil {
		b.log.Warn("overlay: refusing connection", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := message.NewReader(c)
	m, err := r.Read()
	if err != nil || m.Type != message.Control || m.CtlType != ctlHello {
		b.log.Warn("overlay: bad hello", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var hello helloPayload
	_ = json.Unmarshal(m.JSON(), &hello)
	rank := m.CtlStatus
	reply := &message.Message{Type: message.Control, CtlType: ctlHello}
	b.sizeMu.Lock()
	errnum, why := o.admitChild(rank, hello.Size)
	o.mu.Lock()
	cs := o.children[rank]
	switch {
	case errnum != 0 || cs == nil || cs.link == nil:
	case cs.state == stateOffline:
		// it said goodbye and its link is being torn down: a broker
		// coming straight back tries again (joinParent)
		errnum, why = syscall.EAGAIN, fmt.Sprintf("rank %d is still leaving", rank)
	default:
		errnum, why = syscall.EEXIST, fmt.Sprintf("rank %d is already connected", rank)
	}
	if errnum != 0 {
		o.mu.Unlock()
		b.sizeMu.Unlock()
		b.log.Warn("overlay: refusing child", "rank", rank, "size", hello.Size, "err", errnum, "why", why)
		reply.CtlStatus = uint32(errnum)
		reply.MarshalPayload(helloRefusal{Error: why})
		reply.WriteTo(c)
		c.Close()
		return
	}
	if cs == nil { // a rank beyond this broker's size
		cs = &childState{rank: rank, state: stateOffline, since: time.Now()}
		o.children[rank] = cs
	}
	o.mu.Unlock()
	// The size and hostlist, grown by this child if it believes in a
	// larger one, go back with the answer: a child that believes in a
	// smaller size (one restarted as it was booted) learns this one.
	// Holding sizeMu since the admission keeps a second hello for this
	// rank out.
	grown := b.childJoinedLocked(rank, hello.Size, hello.Hostname) // resize.go
	reply.MarshalPayload(resizeEvent{Size: b.Size(), Hostlist: compressHosts(b.hosts)})
	o.mu.Lock()
	l := &link{o: o, conn: c, q: newSendQueue(b.refuseDetached), rank: rank, pk: peerChild,
		ident: strconv.FormatUint(uint64(rank), 10), inflight: make(map[inflightID]*message.Message)}
	l.lastRecv.Store(time.Now().UnixNano())
	l.q.allowInline(c)
	// The answer goes first: once cs.link is set, events fanned out to
	// the children may be queued on this link too.
	l.push(reply)
	cs.link = l
	cs.ready = false
	wasLost := cs.state == stateLost
	cs.state = stateOnline
	cs.err = ""
	cs.since = time.Now()
	o.mu.Unlock()
	b.router.addPeer(l)
	b.sizeMu.Unlock()
	if grown != nil {
		b.reportGrown(grown)
	}
	if wasLost {
		b.log.Info("overlay: child rejoined", "rank", rank)
	} else {
		b.log.Debug("overlay: child joined", "rank", rank)
	}
	o.notifyChanged()

	writeDone := make(chan struct{})
	go func() {
		l.q.writeLoop(c)
		close(writeDone)
	}()
	err = readBuffered(l, r)
	l.q.close()
	c.Close()
	<-writeDone

	o.mu.Lock()
	graceful := cs.state == stateOffline // set by goodbye
	cs.link = nil
	cs.ready = false
	if !graceful {
		if cs.state != stateLost { // a disconnect-subtree set it already
			cs.since = time.Now()
		}
		cs.state = stateLost
		cs.err = l.lostWhy()
	} else {
		cs.since = time.Now()
	}
	o.mu.Unlock()
	b.router.removePeer(l)
	o.linkEnded(l) // overlay_torpid.go
	why = fmt.Sprintf("broker rank %d is offline", rank)
	if !graceful {
		why = fmt.Sprintf("broker rank %d was lost", rank)
		b.log.Error("overlay: child lost", "rank", rank, "err", err)
	}
	l.failInflight(b.router, why)
	o.notifyChanged()
	if !graceful && o.lostHook != nil {
		o.lostHook(rank)
	}
}

func (o *overlay) notifyChanged() {
	o.mu.Lock()
	all := true
	for _, cs := range o.children {
		if cs.state != stateOnline || !cs.ready {
			all = false
		}
	}
	if all {
		select {
		case <-o.joined:
		default:
			close(o.joined)
		}
	}
	close(o.gen)
	o.gen = make(chan struct{})
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// connectParent joins the parent at uri and starts routing its messages.
func (o *overlay) connectParent(uri string) error {
	b := o.b
	c, err := dialURI(uri, b)
	if err != nil {
		return fmt.Errorf("overlay: connect to parent %s: %w", uri, err)
	}
	hello := &message.Message{Type: message.Control, CtlType: ctlHello, CtlStatus: b.rank}
	hello.MarshalPayload(helloPayload{Rank: b.rank, Size: b.Size(), Version: versionString(), Hostname: b.hostname()})
	if _, err := hello.WriteTo(c); err != nil {
		c.Close()
		return fmt.Errorf("overlay: hello to parent: %w", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := message.NewReader(c)
	m, err := r.Read()
	if err != nil {
		c.Close()
		return fmt.Errorf("overlay: parent %s did not answer hello: %w", uri, err)
	}
	if m.Type != message.Control || m.CtlType != ctlHello {
		c.Close()
		return fmt.Errorf("overlay: parent %s answered hello with %v", uri, m.Type)
	}
	if m.CtlStatus == 0 {
		var ev resizeEvent
		if json.Unmarshal(m.JSON(), &ev) == nil && ev.Size != 0 {
			b.resize(ev) // the parent's size, if larger (resize.go)
		}
	} else {
		c.Close()
		var why helloRefusal
		if json.Unmarshal(m.JSON(), &why) == nil && why.Error != "" {
			return fmt.Errorf("overlay: parent %s refused rank %d: %s: %w", uri, b.rank, why.Error, syscall.Errno(m.CtlStatus))
		}
		return fmt.Errorf("overlay: parent %s refused rank %d: %w", uri, b.rank, syscall.Errno(m.CtlStatus))
	}
	_ = c.SetReadDeadline(time.Time{})
	prank, _ := b.topo().parent(b.rank)
	// Route ids on the overlay are ranks: a request from the parent
	// carries its rank, as one from a child carries the child's.
	l := &link{o: o, conn: c, q: newSendQueue(b.refuseDetached), rank: prank, pk: peerParent, ident: strconv.FormatUint(uint64(prank), 10),
		inflight: make(map[inflightID]*message.Message)}
	l.lastRecv.Store(time.Now().UnixNano())
	l.q.allowInline(c)
	o.mu.Lock()
	o.parent = l
	unsent := o.unsent
	o.unsent = nil
	o.mu.Unlock()
	b.router.addPeer(l)
	for _, rep := range unsent {
		b.reportGrown(&rep)
	}
	go func() {
		// tell the parent once our subtree is complete and our own
		// modules have started (quorum: as in flux-core, rank 0 runs the
		// initial program only once every broker is past rc1)
		for _, c := range []<-chan struct{}{o.joined, b.rc1Done} {
			select {
			case <-c:
			case <-b.ctx.Done():
				return
			}
		}
		l.push(&message.Message{Type: message.Control, CtlType: ctlReady})
	}()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		writeDone := make(chan struct{})
		go func() {
			l.q.writeLoop(c)
			// queue closed (goodbye) or write failed: end the link
			c.Close()
			close(writeDone)
		}()
		err := readBuffered(l, r)
		l.q.close()
		c.Close()
		<-writeDone
		o.mu.Lock()
		o.parent = nil
		o.mu.Unlock()
		b.router.removePeer(l)
		l.failInflight(b.router, "parent broker was lost")
		if l.silent.Load() && !b.stopping.Load() {
			// cut off: the instance ends this node's jobs
			b.fence("nothing heard from the parent for " + o.timeout.String()) // overlay_fence.go
		}
		select {
		case o.shutdown <- -1:
			if !b.stopping.Load() {
				b.log.Error("overlay: lost parent, shutting down", "err", err)
			}
		default:
		}
	}()
	return nil
}

// readBuffered continues reading on r (which may hold buffered bytes
// from the handshake).
func readBuffered(l *link, r *message.Reader) error {
	b := l.o.b
	for {
		m, err := r.Read()
		if err != nil {
			return err
		}
		l.lastRecv.Store(time.Now().UnixNano())
		l.o.heard(l) // overlay_torpid.go
		// a message from another broker is not local to this one, as
		// the sender's credentials may say it was where it started
		m.Rolemask &^= message.RoleLocal
		b.tracer.trace("rx", l.rank, m)
		switch m.Type {
		case message.Control:
			l.o.control(l, m)
		case message.Response:
			l.responseArrived(m)
			b.router.route(m, l)
		default:
			b.router.route(m, l)
		}
	}
}

// control handles an overlay control message from link l.
func (o *overlay) control(l *link, m *message.Message) {
	switch m.CtlType {
	case ctlKeepalive:
	case ctlShutdown:
		if l.pk == peerParent {
			select {
			case o.shutdown <- int(m.CtlStatus):
			default:
			}
		}
	case ctlReady:
		if l.pk == peerChild {
			o.mu.Lock()
			if cs := o.children[l.rank]; cs != nil && cs.link == l {
				cs.ready = true
			}
			o.mu.Unlock()
			o.notifyChanged()
		}
	case ctlGrown:
		if l.pk == peerChild {
			o.b.grownBelow(m) // resize.go
		}
	case ctlGoodbye:
		if l.pk == peerChild {
			o.mu.Lock()
			if cs := o.children[l.rank]; cs != nil {
				cs.state = stateOffline
			}
			o.mu.Unlock()
		}
	}
}

// keepalive sends keepalives on every link and drops links that have been
// silent longer than the timeout (a hung or unreachable broker).
func (o *overlay) keepalive(stop <-chan struct{}) {
	if o.interval <= 0 {
		return
	}
	t := time.NewTicker(o.interval)
	defer t.Stop()
	ka := &message.Message{Type: message.Control, CtlType: ctlKeepalive}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		var links []*link
		o.mu.Lock()
		if o.parent != nil {
			links = append(links, o.parent)
		}
		for _, cs := range o.children {
			if cs.link != nil {
				links = append(links, cs.link)
			}
		}
		o.mu.Unlock()
		for _, l := range links {
			l.push(ka)
			silent := time.Duration(now - l.lastRecv.Load())
			o.checkTorpid(l, silent) // overlay_torpid.go
			if silent > o.timeout {
				l.silent.Store(true)
				o.b.log.Error("overlay: peer stopped responding", "rank", l.rank, "timeout", o.timeout)
				l.drop("no keepalive within " + o.timeout.String())
			}
		}
	}
}

// shutdownChildren tells every child to shut down and waits (up to
// timeout) until they have all disconnected.
func (o *overlay) shutdownChildren(code int, timeout time.Duration) {
	msg := &message.Message{Type: message.Control, CtlType: ctlShutdown, CtlStatus: uint32(code)}
	o.sendChildren(msg)
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		busy := 0
		for _, cs := range o.children {
			if cs.link != nil {
				busy++
			}
		}
		o.mu.Unlock()
		if busy == 0 {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			o.b.log.Warn("overlay: children did not disconnect in time", "count", busy)
			return
		}
	}
}

// goodbye tells the parent we are leaving cleanly and closes the link.
func (o *overlay) goodbye() {
	o.mu.Lock()
	p := o.parent
	o.mu.Unlock()
	if p == nil {
		return
	}
	p.push(&message.Message{Type: message.Control, CtlType: ctlGoodbye})
	p.q.close()
	setWriteDeadline(p.conn, 2*time.Second)
}

// close stops listening and closes all links.
func (o *overlay) close() {
	if o.ln != nil {
		o.ln.Close()
	}
	o.mu.Lock()
	if o.parent != nil {
		o.parent.q.close()
	}
	for _, cs := range o.children {
		if cs.link != nil {
			cs.link.conn.Close()
		}
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// childStates returns a snapshot of direct children's states.
func (o *overlay) childStates() []childState {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]childState, 0, len(o.children))
	for _, cs := range o.children {
		st := childState{rank: cs.rank, state: cs.state, err: cs.err, since: cs.since}
		st.torpid = cs.link != nil && cs.link.torpid.Load()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b childState) int { return cmp.Compare(a.rank, b.rank) })
	return out
}

// splitURI separates "scheme://rest".
func splitURI(uri string) (scheme, rest string, err error) {
	i := strings.Index(uri, "://")
	if i < 0 {
		return "", "", fmt.Errorf("overlay URI %q: missing scheme (ipc:// or tcp://)", uri)
	}
	return uri[:i], uri[i+3:], nil
}
