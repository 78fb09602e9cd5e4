// Package flux is the Go client API of fluxgo: connect to a broker, make
// RPCs (single and streaming, RFC 6), subscribe to and publish events, and
// provide services. It speaks flux-core's local connector protocol, so it
// works against fluxgo and flux-core brokers alike.
//
// A Handle is safe for concurrent use. Responses are matched to their
// requests by matchtag on the connection's reader goroutine; requests and
// events for services registered on the handle are queued and run by
// Serve on the caller's goroutine, so a service's state needs no locks.
package flux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Message is a Flux message (RFC 3).
type Message = message.Message

// Nodeid values.
const (
	NodeidAny      = message.NodeidAny
	NodeidUpstream = message.NodeidUpstream
)

// Conn is a transport between a Handle and a broker: the local socket
// connector, or an in-process link inside the broker.
type Conn interface {
	// Send transmits m. It must not block indefinitely.
	Send(m *Message) error
	// Start begins delivering received messages, in order, to deliver;
	// when the connection ends, closed is called once with the reason.
	Start(deliver func(*Message), closed func(error))
	// Close ends the connection.
	Close() error
}

// ErrClosed is returned for operations on a closed or lost connection.
var ErrClosed = errors.New("flux handle: connection closed")

// Handle is a connection to a Flux broker.
type Handle struct {
	conn Conn

	serving     chan struct{} // closed when Serve first runs
	servingOnce sync.Once

	mu       sync.Mutex
	tag      uint32
	rpcs     map[uint32]*Future
	rpcPeak  int // most entries rpcs has held (see forgetLocked)
	subs     map[*Subscription]struct{}
	handlers []handler
	inline   map[string]HandlerFunc
	evh      []evHandler
	queue    []work
	signal   chan struct{}
	err      error
	done     chan struct{}
	attrs    map[string]string
	rd       readState
	// reconnect: see reconnect.go. gen counts the connections the
	// handle has had; a request remembers the one it came on.
	keepServing bool
	gen         atomic.Uint64 // read on every response: no lock
	// debug holds the module debug flags (flux module debug; see
	// debug.go)
	debug atomic.Int64
}

// NewHandle wraps a connection and starts receiving on it.
func NewHandle(c Conn) *Handle {
	h := &Handle{
		conn:   c,
		rpcs:   make(map[uint32]*Future),
		subs:   make(map[*Subscription]struct{}),
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
		attrs:  make(map[string]string),
	}
	h.startConn()
	return h
}

// Open connects to the broker at uri ("" means $FLUX_URI).
func Open(uri string) (*Handle, error) {
	if uri == "" {
		uri = os.Getenv("FLUX_URI")
	}
	c, err := DialLocal(uri)
	if err != nil {
		return nil, err
	}
	return NewHandle(c), nil
}

// Close closes the connection. Outstanding RPCs fail with ErrClosed.
func (h *Handle) Close() error {
	err := h.currentConn().Close()
	h.lost(ErrClosed)
	return err
}

// currentConn returns the connection (Reconnect may replace it).
func (h *Handle) currentConn() Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn
}

// Done is closed when the connection has ended.
func (h *Handle) Done() <-chan struct{} {
	h.needReader()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

// Err returns why the connection ended, or nil while it is up.
func (h *Handle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Handle) lost(reason error) {
	if reason == nil {
		reason = ErrClosed
	}
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return
	}
	h.err = reason
	rpcs := h.rpcs
	h.rpcs = make(map[uint32]*Future)
	subs := h.subs
	h.subs = make(map[*Subscription]struct{})
	h.mu.Unlock()
	for _, f := range rpcs {
		f.fail(reason)
	}
	for s := range subs {
		s.fail(reason)
	}
	close(h.done)
	h.wake()
}

// Send transmits a message as is. Most callers want RPC or Publish.
func (h *Handle) Send(m *Message) error {
	h.mu.Lock()
	c, err := h.conn, h.err
	h.mu.Unlock()
	if err != nil {
		return err
	}
	return c.Send(m)
}

// deliver dispatches one received message. It never blocks.
func (h *Handle) deliver(m *Message) {
	switch m.Type {
	case message.Response:
		h.mu.Lock()
		f := h.rpcs[m.Matchtag]
		if f != nil && (!f.streaming || m.Errnum != 0) {
			h.forgetLocked(m.Matchtag)
		}
		h.mu.Unlock()
		if f != nil {
			f.put(m)
		}
	case message.Request:
		h.mu.Lock()
		fn := h.inline[m.Topic]
		h.mu.Unlock()
		if fn != nil {
			fn(&Request{h: h, Msg: m, gen: h.generation()})
			return
		}
		h.enqueue(work{kind: workRequest, m: m})
	case message.Event:
		h.mu.Lock()
		var hit []*Subscription
		for s := range h.subs {
			if s.matches(m.Topic) {
				hit = append(hit, s)
			}
		}
		wantServe := false
		for _, e := range h.evh {
			if topicHasPrefix(m.Topic, e.prefix) {
				wantServe = true
				break
			}
		}
		h.mu.Unlock()
		for _, s := range hit {
			s.put(m)
		}
		if wantServe {
			h.enqueue(work{kind: workEvent, m: m})
		}
	}
}

// work is one item for the Serve goroutine: a function, a request or
// event to dispatch, or a response for a Then callback. Keeping the
// common kinds as data spares a closure per message.
type work struct {
	kind workKind
	fn   func()
	then func(*Message, error)
	m    *Message
	err  error
}

type workKind uint8

const (
	workFunc workKind = iota
	workRequest
	workEvent
	workThen
)

func (w *work) run(h *Handle) {
	switch w.kind {
	case workFunc:
		w.fn()
	case workRequest:
		h.dispatchRequest(w.m)
	case workEvent:
		h.dispatchEvent(w.m)
	case workThen:
		w.then(w.m, w.err)
	}
}

// enqueue queues w for the goroutine that calls Serve.
func (h *Handle) enqueue(w work) {
	h.mu.Lock()
	h.queue = append(h.queue, w)
	h.mu.Unlock()
	h.wake()
}

// post queues fn to run on the goroutine that calls Serve.
func (h *Handle) post(fn func()) { h.enqueue(work{kind: workFunc, fn: fn}) }

// Post queues fn to run on the Serve goroutine. Use it to hand results of
// other goroutines (timers, I/O) to a service without locks.
func (h *Handle) Post(fn func()) { h.post(fn) }

func (h *Handle) wake() {
	select {
	case h.signal <- struct{}{}:
	default:
	}
}

// Serving returns a channel closed once Serve has started: a module is
// running (its start-up is done) when its handle serves.
func (h *Handle) Serving() <-chan struct{} { return h.servingChan() }

func (h *Handle) servingChan() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.serving == nil {
		h.serving = make(chan struct{})
	}
	return h.serving
}

// Serve runs request handlers, event handlers and posted functions on the
// calling goroutine until ctx is done or the connection ends.
func (h *Handle) Serve(ctx context.Context) error {
	h.servingOnce.Do(func() { close(h.servingChan()) })
	h.needReader()
	var batch []work
	for {
		h.mu.Lock()
		batch, h.queue = h.queue, batch[:0]
		if len(batch) == 0 && cap(h.queue) > 4*shrinkAbove {
			h.queue = nil // going idle: let the room of a burst's batch go
		}
		err := h.err
		h.mu.Unlock()
		for i := range batch {
			batch[i].run(h)
			batch[i] = work{}
		}
		if cap(batch) > 4*shrinkAbove && len(batch) < cap(batch)/16 {
			batch = nil // a burst is over: let its room go
		}
		if len(batch) > 0 {
			continue
		}
		if err != nil && !h.keepsServing() {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.signal:
		}
	}
}

// nextTag allocates a matchtag not in use by an outstanding RPC.
func (h *Handle) register(f *Future) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	for {
		h.tag++
		if h.tag == 0 {
			h.tag = 1
		}
		if _, busy := h.rpcs[h.tag]; !busy {
			break
		}
	}
	f.tag = h.tag
	h.rpcs[h.tag] = f
	h.rpcPeak = max(h.rpcPeak, len(h.rpcs))
	return nil
}

func (h *Handle) unregister(tag uint32) {
	h.mu.Lock()
	h.forgetLocked(tag)
	h.mu.Unlock()
}

// shrinkAbove is the size past which the RPC table is replaced when it
// empties again: Go maps keep the room of their largest size.
const shrinkAbove = 1024

// forgetLocked drops an RPC from the table (h.mu held).
func (h *Handle) forgetLocked(tag uint32) {
	delete(h.rpcs, tag)
	if len(h.rpcs) == 0 && h.rpcPeak > shrinkAbove {
		h.rpcs = make(map[uint32]*Future)
		h.rpcPeak = 0
	}
}

// JSONBuffer is a JSON payload handed over to RPC or Respond: the
// message takes the buffer as is (appending the NUL terminator in place
// when there is room) instead of copying it. Build it for one message
// and do not touch it afterwards.
type JSONBuffer []byte

// encodePayload turns an RPC payload argument into JSON bytes: nil means
// no payload, []byte and json.RawMessage are taken as JSON text, anything
// else is marshaled. owned reports that the bytes may be kept (no copy
// needed).
func encodePayload(v any) (b []byte, owned bool, err error) {
	switch p := v.(type) {
	case nil:
		return nil, false, nil
	case JSONBuffer:
		return p, true, nil
	case []byte:
		return p, false, nil
	case json.RawMessage:
		return p, false, nil
	default:
		b, err := json.Marshal(v)
		return b, true, err
	}
}

// setPayload sets an encoded JSON payload on m.
func setPayload(m *Message, b []byte, owned bool) {
	switch {
	case b == nil:
	case owned:
		m.SetJSONBuffer(b)
	default:
		m.SetJSON(b)
	}
}

// RPC flags.
const (
	// Streaming asks for a stream of responses ended by ENODATA (RFC 6).
	Streaming = message.FlagStreaming
	// NoResponse sends a request that gets no response.
	NoResponse = message.FlagNoResponse
	// Upstream routes a request to the sender's parent broker or above.
	Upstream = message.FlagUpstream
)

// RPC sends a request with a JSON payload and returns its Future.
func (h *Handle) RPC(topic string, nodeid uint32, payload any, flags uint8) (*Future, error) {
	b, owned, err := encodePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("%s: encode payload: %w", topic, err)
	}
	m := message.NewRequest(topic, nodeid, nil)
	setPayload(m, b, owned)
	return h.SendRequest(m, flags)
}

// RPCRaw sends a request whose payload is raw bytes (no NUL terminator).
func (h *Handle) RPCRaw(topic string, nodeid uint32, payload []byte, flags uint8) (*Future, error) {
	m := message.NewRequest(topic, nodeid, nil)
	m.SetPayload(payload)
	return h.SendRequest(m, flags)
}

// SendRequest sends a prepared request message, assigning its matchtag.
func (h *Handle) SendRequest(m *Message, flags uint8) (*Future, error) {
	m.Flags |= flags
	f := newFuture(h, m.Topic, flags&message.FlagStreaming != 0)
	if flags&message.FlagNoResponse != 0 {
		m.Matchtag = 0
		f.put(message.ResponseTo(m, nil))
		return f, h.Send(m)
	}
	if err := h.register(f); err != nil {
		return nil, err
	}
	m.Matchtag = f.tag
	if err := h.currentConn().Send(m); err != nil {
		h.unregister(f.tag)
		return nil, err
	}
	return f, nil
}

// Call makes an RPC to nodeid and decodes the response payload into resp
// (nil: ignore it).
func (h *Handle) Call(ctx context.Context, topic string, nodeid uint32, payload, resp any) error {
	f, err := h.RPC(topic, nodeid, payload, 0)
	if err != nil {
		return err
	}
	return f.Decode(ctx, resp)
}

// Attr returns a broker attribute of the local broker (cached once read:
// attributes a client asks for are fixed for the life of the instance).
func (h *Handle) Attr(ctx context.Context, name string) (string, error) {
	h.mu.Lock()
	v, ok := h.attrs[name]
	h.mu.Unlock()
	if ok {
		return v, nil
	}
	var resp struct {
		Value string `json:"value"`
		Flags int    `json:"flags"`
	}
	if err := h.Call(ctx, "attr.get", NodeidAny, map[string]string{"name": name}, &resp); err != nil {
		return "", fmt.Errorf("getattr %s: %w", name, err)
	}
	if resp.Flags&1 != 0 { // immutable
		h.mu.Lock()
		h.attrs[name] = resp.Value
		h.mu.Unlock()
	}
	return resp.Value, nil
}

// errnoENODATA ends a stream.
const errnoENODATA = uint32(syscall.ENODATA)
