package flux

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Request is a request received by a service on this handle.
type Request struct {
	h   *Handle
	Msg *Message
	gen uint64 // the handle's connection it came on (reconnect.go)
	// responded is set once a final response went out.
	responded bool
}

// HandlerFunc serves one request. It runs on the Serve goroutine.
type HandlerFunc func(r *Request)

type handler struct {
	pattern string
	fn      HandlerFunc
}

type evHandler struct {
	prefix string
	fn     func(m *Message)
}

// HandleFuncInline registers fn for requests with exactly this topic and
// runs it on whatever goroutine delivers the request, not on the Serve
// goroutine: a hand-off less per request. fn must be safe for concurrent
// use and quick (read-only lookups such as attribute gets and pings).
func (h *Handle) HandleFuncInline(topic string, fn HandlerFunc) {
	h.needReader()
	h.mu.Lock()
	if h.inline == nil {
		h.inline = make(map[string]HandlerFunc)
	}
	h.inline[topic] = fn
	h.mu.Unlock()
}

// HandleFunc registers fn for requests whose topic matches pattern: an
// exact topic, "prefix.*" for every topic under prefix, or "*". The most
// specific registered pattern wins (exact, then longest prefix).
func (h *Handle) HandleFunc(pattern string, fn HandlerFunc) {
	h.needReader()
	h.mu.Lock()
	h.handlers = append(h.handlers, handler{pattern: pattern, fn: fn})
	h.mu.Unlock()
}

func patternMatch(pattern, topic string) (bool, int) {
	switch {
	case pattern == topic:
		return true, 1 << 20
	case pattern == "*":
		return true, 0
	case strings.HasSuffix(pattern, ".*"):
		p := pattern[:len(pattern)-1]
		if strings.HasPrefix(topic, p) {
			return true, len(p)
		}
	}
	return false, 0
}

func (h *Handle) dispatchRequest(m *Message) {
	h.mu.Lock()
	var best HandlerFunc
	bestScore := -1
	for _, hd := range h.handlers {
		if ok, score := patternMatch(hd.pattern, m.Topic); ok && score > bestScore {
			best, bestScore = hd.fn, score
		}
	}
	h.mu.Unlock()
	r := &Request{h: h, Msg: m, gen: h.generation()}
	if best == nil {
		r.RespondError(NewError(syscall.ENOSYS, fmt.Sprintf("no handler for %s", m.Topic)))
		return
	}
	best(r)
}

func (h *Handle) dispatchEvent(m *Message) {
	h.mu.Lock()
	var fns []func(*Message)
	for _, e := range h.evh {
		if topicHasPrefix(m.Topic, e.prefix) {
			fns = append(fns, e.fn)
		}
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(m)
	}
}

// Topic returns the request topic.
func (r *Request) Topic() string { return r.Msg.Topic }

// Userid returns the requestor's userid.
func (r *Request) Userid() uint32 { return r.Msg.Userid }

// Rolemask returns the requestor's rolemask.
func (r *Request) Rolemask() uint32 { return r.Msg.Rolemask }

// IsOwner reports whether the requestor holds the instance owner role.
func (r *Request) IsOwner() bool { return r.Msg.Rolemask&message.RoleOwner != 0 }

// IsOperator reports whether the requestor may act on every user's jobs
// and nodes as an administrator: the instance owner, or a user the
// [access] table names an operator (RoleOperator). Services check it,
// not IsOwner, exactly where an operator is let through: seeing, cancelling
// and updating others' jobs, draining nodes, reading the broker log and
// everyone's usage. The owner's other powers stay behind IsOwner.
func (r *Request) IsOperator() bool {
	return r.Msg.Rolemask&(message.RoleOwner|message.RoleOperator) != 0
}

// RequireOwner answers EPERM "Request requires owner credentials" (the
// text flux-core's message handlers answer with) unless the request is
// the instance owner's, and reports whether it is.
func (r *Request) RequireOwner() bool {
	if r.IsOwner() {
		return true
	}
	r.Errorf(syscall.EPERM, "Request requires owner credentials")
	return false
}

// Handle returns the handle the request arrived on.
func (r *Request) Handle() *Handle { return r.h }

// Decode decodes the JSON payload into v; on failure it answers the
// request with EPROTO and returns the error.
func (r *Request) Decode(v any) error {
	if err := r.Msg.UnmarshalPayload(v); err != nil {
		r.RespondError(NewError(syscall.EPROTO, err.Error()))
		return err
	}
	return nil
}

// Respond sends a response with payload v (nil: no payload). For a
// streaming request it may be called many times; end the stream with
// RespondError(ENODATA) or EndStream.
func (r *Request) Respond(v any) error {
	if r.Msg.NoResponse() {
		return nil
	}
	b, owned, err := encodePayload(v)
	if err != nil {
		return r.RespondError(fmt.Errorf("encode response: %w", err))
	}
	if !r.Msg.IsStreaming() {
		r.responded = true
	}
	resp := message.ResponseTo(r.Msg, nil)
	setPayload(resp, b, owned)
	return r.send(resp)
}

// RespondRaw sends a response whose payload is raw bytes.
func (r *Request) RespondRaw(p []byte) error { return r.RespondAttached(p, nil) }

// RespondAttached sends a response with raw payload p (may be nil) and
// an in-process companion att (message.Attached; nil: none), for a
// requestor in this broker that asked for it: one over a socket gets
// the payload att stands for.
func (r *Request) RespondAttached(p []byte, att message.Attachment) error {
	if r.Msg.NoResponse() {
		return nil
	}
	resp := message.ResponseTo(r.Msg, nil)
	resp.SetPayload(p)
	resp.Attached = att
	if !r.Msg.IsStreaming() {
		r.responded = true
	}
	return r.send(resp)
}

// Relay answers r with the response f gets, or with err (the error of
// sending the request f stands for, if any): for a service that passes
// a request on and returns what comes back.
func (r *Request) Relay(f *Future, err error) {
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(m *Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(json.RawMessage(m.JSON()))
	})
}

// streamEnder is implemented by connections that keep track of the
// requests a service has yet to answer (the broker's module links).
type streamEnder interface {
	StreamEnded(req *Message)
}

// Finish marks a streaming request as answered for good, without
// sending anything: for protocols whose streams end with an ordinary
// response rather than ENODATA (RFC 27 sched.alloc ends with its
// success, deny or cancel response). Without it the broker would keep
// the request as unanswered.
func (r *Request) Finish() {
	r.responded = true
	if se, ok := r.h.currentConn().(streamEnder); ok {
		se.StreamEnded(r.Msg)
	}
}

// RespondError sends an error response: the errno from err's chain (see
// ErrnoOf) and err's text.
func (r *Request) RespondError(err error) error {
	if r.Msg.NoResponse() {
		return nil
	}
	r.responded = true
	return r.send(message.ErrorTo(r.Msg, uint32(ErrnoOf(err)), ErrorText(err)))
}

// Errorf answers with errno and a formatted message.
func (r *Request) Errorf(errno syscall.Errno, format string, args ...any) error {
	return r.RespondError(NewError(errno, fmt.Sprintf(format, args...)))
}

// EndStream ends a streaming response (ENODATA).
func (r *Request) EndStream() error {
	return r.RespondError(NewError(syscall.ENODATA, ""))
}

// RegisterService asks the broker to route requests for service name
// (topics "name.*") to this handle. The broker removes the service when
// the handle disconnects.
func (h *Handle) RegisterService(ctx context.Context, name string) error {
	h.needReader()
	return h.Call(ctx, "service.add", NodeidAny, map[string]string{"service": name}, nil)
}

// UnregisterService removes a service registered with RegisterService.
func (h *Handle) UnregisterService(ctx context.Context, name string) error {
	return h.Call(ctx, "service.remove", NodeidAny, map[string]string{"service": name}, nil)
}
