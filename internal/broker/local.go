package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// localConnector listens on the broker's unix socket and speaks
// flux-core's local connector protocol: on accept the broker learns the
// peer's uid with SO_PEERCRED and writes one byte (0 = accepted, else an
// errno), then stream-framed messages flow both ways.
type localConnector struct {
	b    *Broker
	ln   *net.UnixListener
	path string

	mu      sync.Mutex
	clients map[*client]struct{}
	perUID  map[uint32]int // guests' connections (accepted, not yet gone)
	// refusedAt: when a guest's connection was last refused and logged
	refusedAt map[uint32]time.Time
	pending   pendingBytes // guests' messages still arriving
	wg        sync.WaitGroup
}

// defaultMaxUserConns is access.max-user-connections' default: a guest's
// connections at once (their commands, and a job shell per job per node
// of theirs running here). The instance owner has no such bound.
const defaultMaxUserConns = 1024

func listenLocal(b *Broker, path string) (*localConnector, error) {
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("local connector: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	// Guests may connect when the instance allows them; the
	// authentication byte refuses them otherwise.
	if err := os.Chmod(path, 0o777); err != nil {
		ln.Close()
		return nil, fmt.Errorf("local connector: %w", err)
	}
	return &localConnector{b: b, ln: ln, path: path, clients: make(map[*client]struct{}), perUID: make(map[uint32]int),
		pending: pendingBytes{b: b}}, nil
}

func (lc *localConnector) serve() {
	var delay time.Duration // backoff while accept fails for want of descriptors
	var logged time.Time
	for {
		c, err := lc.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors (a client holding thousands of
			// connections), or a connection gone before it was taken:
			// the listener is fine, and stopping would wedge the
			// instance for good. Back off and go on.
			if time.Since(logged) > 10*time.Second {
				lc.b.log.Error("local connector accept (retrying)", "err", err)
				logged = time.Now()
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		lc.wg.Add(1)
		go func() {
			defer lc.wg.Done()
			lc.handle(c)
		}()
	}
}

// clientFlushTimeout bounds how long a broker that is exiting waits for
// a client to take what is queued for it.
const clientFlushTimeout = 2 * time.Second

// close stops accepting and disconnects every client, after sending each
// what is queued for it (the answer to flux shutdown, the log lines of
// the modules unloading that it follows), for at most clientFlushTimeout.
func (lc *localConnector) close() {
	lc.ln.Close()
	lc.mu.Lock()
	clients := make([]*client, 0, len(lc.clients))
	for c := range lc.clients {
		clients = append(clients, c)
	}
	lc.mu.Unlock()
	for _, c := range clients {
		setWriteDeadline(c.conn, clientFlushTimeout)
		c.q.close()
	}
	deadline := time.After(clientFlushTimeout)
	for _, c := range clients {
		select {
		case <-c.flushed:
		case <-deadline:
		}
	}
	for _, c := range clients {
		c.conn.Close()
	}
	lc.wg.Wait()
}

func peerCred(c *net.UnixConn) (uid uint32, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return cred.Uid, int(cred.Pid), nil
}

// isChild reports whether pid is a child of this broker: a job shell the
// job-shell module started, which connects as the job's user but is not
// one of the user's connections (the module bounds how many run), so
// access.max-user-connections does not count it. A user cannot make a
// process whose parent is the broker.
func isChild(pid int) bool {
	if pid <= 0 {
		return false
	}
	ppid, err := procfs.Parent(pid)
	return err == nil && ppid == os.Getpid()
}

func (lc *localConnector) handle(c *net.UnixConn) {
	b := lc.b
	uid, pid, err := peerCred(c)
	if err != nil {
		b.log.Error("local connector: SO_PEERCRED", "err", err)
		c.Write([]byte{byte(syscall.EPROTO)})
		c.Close()
		return
	}
	role := message.RoleUser | message.RoleLocal
	ac := b.accessConf()
	if uid == b.owner || uid == 0 && ac.allowRootOwner {
		role = message.RoleOwner | message.RoleLocal
	} else if !b.allowGuests() {
		b.log.Info("local connector: refusing guest", "uid", uid)
		c.Write([]byte{byte(syscall.EPERM)})
		c.Close()
		return
	} else if ac.isOperator(uid) {
		// an operator is a guest with one more role: the owner's checks
		// (shutdown, modules, config, the KVS) still refuse it
		role |= message.RoleOperator
	}
	if role&message.RoleOwner == 0 && !isChild(pid) {
		if !lc.admit(uid) {
			c.Write([]byte{byte(syscall.EUSERS)})
			c.Close()
			return
		}
		defer lc.release(uid)
	}
	if _, err := c.Write([]byte{0}); err != nil {
		c.Close()
		return
	}
	cl := &client{
		b:       b,
		conn:    c,
		uid:     uid,
		role:    role,
		ident:   newClientID(),
		q:       newSendQueue(b.refuseDetached),
		touched: make(map[svcAddr]struct{}),
		flushed: make(chan struct{}),
	}
	if role&message.RoleOwner == 0 {
		cl.budget = userBudget{p: &lc.pending, uid: uid}
	}
	cl.q.allowInline(c)
	lc.mu.Lock()
	lc.clients[cl] = struct{}{}
	lc.mu.Unlock()
	b.router.addPeer(cl)

	go func() {
		cl.q.writeLoop(c)
		c.Close()
		close(cl.flushed)
	}()
	cl.readLoop()
	cl.q.close()
	<-cl.flushed
	lc.mu.Lock()
	delete(lc.clients, cl)
	lc.mu.Unlock()
	cl.disconnect()
}

// admit counts a guest's new connection, or refuses it (logged at most
// once per 10 s per user) when the user holds access.max-user-connections.
func (lc *localConnector) admit(uid uint32) bool {
	limit := lc.b.maxUserConns.Load()
	if limit <= 0 {
		limit = defaultMaxUserConns
	}
	lc.mu.Lock()
	n := lc.perUID[uid]
	ok := int64(n) < limit
	if ok {
		lc.perUID[uid] = n + 1
	}
	warn := !ok && time.Since(lc.refusedAt[uid]) > 10*time.Second
	if warn {
		if lc.refusedAt == nil {
			lc.refusedAt = make(map[uint32]time.Time)
		}
		lc.refusedAt[uid] = time.Now()
	}
	lc.mu.Unlock()
	if warn {
		lc.b.log.Warn(fmt.Sprintf("local connector: refusing a connection of uid %d: it holds %d, the most a user may (access.max-user-connections)", uid, n))
	}
	return ok
}

// release uncounts a guest's connection.
func (lc *localConnector) release(uid uint32) {
	lc.mu.Lock()
	if lc.perUID[uid]--; lc.perUID[uid] <= 0 {
		delete(lc.perUID, uid)
	}
	lc.mu.Unlock()
}

// svcAddr is where a client's requests went: a service at a nodeid.
type svcAddr struct {
	service  string
	nodeid   uint32
	upstream uint8
}

// client is one local connector connection.
type client struct {
	b     *Broker
	conn  *net.UnixConn
	uid   uint32
	role  uint32
	ident string
	q     *sendQueue
	// budget is a guest's share of access.max-user-pending (nil: the owner)
	budget message.Budget
	// flushed is closed once the writer has sent what was queued and
	// closed the connection
	flushed chan struct{}

	mu      sync.Mutex
	touched map[svcAddr]struct{} // services this client sent requests to
	// asked holds the requests routed to the client (a service it
	// registered) still owed an answer: the only responses a guest may
	// send (see mayRespond), and the ones answered with an error for it
	// if it disconnects first.
	asked map[askedKey]*message.Message
}

// askedKey names a request by what its response carries back: the
// route stack and the matchtag.
type askedKey struct {
	routes   string
	matchtag uint32
}

func newClientID() string {
	var b [4]byte
	for {
		rand.Read(b[:])
		s := hex.EncodeToString(b[:])
		for _, ch := range s {
			if ch >= 'a' {
				return s // never all digits: ranks use those ids
			}
		}
	}
}

func (c *client) id() string              { return c.ident }
func (c *client) kind() peerKind          { return peerClient }
func (c *client) creds() (uint32, uint32) { return c.uid, c.role }
func (c *client) deliver(m *message.Message) {
	if m.Type == message.Request && !m.NoResponse() {
		req := &message.Message{Type: message.Request, Topic: m.Topic, Matchtag: m.Matchtag, Flags: m.Flags &^ message.FlagPayload,
			Routes: append([]string(nil), m.Routes...)}
		c.mu.Lock()
		if c.asked == nil {
			c.asked = make(map[askedKey]*message.Message)
		}
		c.asked[askedKey{m.RouteString(), m.Matchtag}] = req
		c.mu.Unlock()
	}
	// A request routed to a service this client provided while it was
	// disconnecting gets an answer, not silence.
	if !c.q.push(m) && m.Type == message.Request && !m.NoResponse() {
		c.b.router.respondError(m, syscall.ENOSYS,
			fmt.Sprintf("the client providing %s disconnected", message.Service(m.Topic)))
	}
}

// localStall is how long a local client may leave a large message half
// sent before the broker drops the connection: its buffer grows only with
// what arrives, and a stalled one is not kept.
const localStall = 60 * time.Second

func (c *client) readLoop() {
	r := message.NewReader(c.conn)
	r.Stall = localStall
	r.Budget = c.budget
	corked := false
	defer func() {
		if corked {
			c.q.uncork()
		}
	}()
	for {
		m, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) {
				c.b.log.Debug("local client read", "client", c.ident, "err", err)
			}
			return
		}
		c.stampCreds(m)
		if m.Type == message.Response && !c.mayRespond(m) {
			c.b.log.Warn("dropping a response from a guest client that answers no request routed to it",
				"client", c.ident, "userid", c.uid, "topic", m.Topic)
			continue
		}
		if m.Type == message.Request {
			c.mu.Lock()
			c.touched[svcAddr{message.Service(m.Topic), m.Nodeid, m.Flags & message.FlagUpstream}] = struct{}{}
			c.mu.Unlock()
		}
		// Hold our own replies while another whole request is buffered:
		// the answers to a burst then leave in one write. (Not while only
		// part of one is: its sender may be waiting for these answers.)
		if !corked && r.Complete() {
			c.q.cork()
			corked = true
		}
		c.b.router.route(m, c)
		if corked && !r.Complete() {
			c.q.uncork()
			corked = false
		}
	}
}

// mayRespond tells whether the client may send response m. The
// instance owner may send any (as in flux-core, the owner is trusted
// with the broker's routing). A guest may only answer a request the
// broker routed to it (a service it registered): a response is routed
// by the route stack its sender writes, so without this check a guest
// could forge answers to the RPCs of modules and other users (a fake
// sched.alloc denial, say). A streaming request stays answerable until
// an error response ends its stream.
func (c *client) mayRespond(m *message.Message) bool {
	k := askedKey{m.RouteString(), m.Matchtag}
	c.mu.Lock()
	defer c.mu.Unlock()
	req, ok := c.asked[k]
	if ok && (!req.IsStreaming() || m.Errnum != 0) {
		delete(c.asked, k)
	}
	return ok || c.role&message.RoleOwner != 0
}

// stampCreds fills in the connection's credentials. The instance owner
// may send messages with other credentials (as flux-core allows for
// testing); anyone else always gets their own.
func (c *client) stampCreds(m *message.Message) {
	if m.Userid == message.UseridUnknown || c.role&message.RoleOwner == 0 {
		m.Userid = c.uid
		m.Rolemask = c.role
		return
	}
	if m.Rolemask == message.RoleNone {
		m.Rolemask = c.role
	}
}

// disconnect tells every service the client used that it is gone (a
// "<service>.disconnect" request carrying the client's route), so they
// can drop its watches and streams, then forgets the client.
func (c *client) disconnect() {
	c.b.router.removePeer(c)
	c.mu.Lock()
	svcs := make([]svcAddr, 0, len(c.touched))
	for s := range c.touched {
		svcs = append(svcs, s)
	}
	owed := c.asked
	c.asked = nil
	c.mu.Unlock()
	// requests it had been given and not answered (it read them, or
	// they were still queued) get an answer, not silence
	for _, req := range owed {
		c.b.router.respondError(req, syscall.ENOSYS,
			fmt.Sprintf("the client providing %s disconnected", message.Service(req.Topic)))
	}
	for _, s := range svcs {
		m := message.NewRequest(s.service+".disconnect", s.nodeid, nil)
		m.Flags |= message.FlagNoResponse | s.upstream
		m.Userid, m.Rolemask = c.uid, c.role
		c.b.router.route(m, c)
	}
}
