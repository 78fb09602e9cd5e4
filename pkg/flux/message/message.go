// Package message implements Flux messages (RFC 3): the one type that
// carries requests, responses, events and control messages between
// clients, brokers and modules, and the codec that turns them into bytes.
//
// The encoding is flux-core's, byte for byte, so flux-core's clients can
// talk to a fluxgo broker: a message is a sequence of frames (optional
// route frames and an empty delimiter, an optional topic, an optional
// payload) followed by a 20-byte header frame. See codec.go.
package message

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Type is the message type (RFC 3).
type Type uint8

// Message types.
const (
	Request  Type = 0x01
	Response Type = 0x02
	Event    Type = 0x04
	Control  Type = 0x08
)

func (t Type) String() string {
	switch t {
	case Request:
		return "request"
	case Response:
		return "response"
	case Event:
		return "event"
	case Control:
		return "control"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flags (RFC 3).
const (
	FlagTopic      uint8 = 0x01
	FlagPayload    uint8 = 0x02
	FlagNoResponse uint8 = 0x04
	FlagRoute      uint8 = 0x08
	FlagUpstream   uint8 = 0x10
	FlagPrivate    uint8 = 0x20
	FlagStreaming  uint8 = 0x40
	FlagUser1      uint8 = 0x80
)

// Special values of credentials and addresses.
const (
	UseridUnknown  uint32 = 0xffffffff
	NodeidAny      uint32 = 0xffffffff
	NodeidUpstream uint32 = 0xfffffffe
	MatchtagNone   uint32 = 0
)

// Roles (RFC 12 rolemask bits, and fluxgo's operator bit).
const (
	RoleNone  uint32 = 0
	RoleOwner uint32 = 1
	RoleUser  uint32 = 2
	RoleLocal uint32 = 4
	// RoleOperator is a user the [access] table names an operator: with
	// RoleUser, it may see and act on every user's jobs, drain nodes and
	// read the broker log, but holds none of the owner's other powers.
	RoleOperator uint32 = 8
	RoleAll      uint32 = 0xffffffff
)

// Message is one Flux message. Which of Nodeid, Matchtag, Errnum, Seq,
// CtlType and CtlStatus are meaningful depends on Type:
//
//	request:  Nodeid, Matchtag
//	response: Errnum, Matchtag
//	event:    Seq
//	control:  CtlType, CtlStatus
//
// Topic and Payload are present when FlagTopic / FlagPayload are set; the
// setters keep the flags in step. Routes is the route stack, oldest hop
// first; it is encoded only when FlagRoute is set.
type Message struct {
	Type      Type
	Flags     uint8
	Userid    uint32
	Rolemask  uint32
	Nodeid    uint32
	Matchtag  uint32
	Errnum    uint32
	Seq       uint32
	CtlType   uint32
	CtlStatus uint32
	Topic     string
	Payload   []byte
	Routes    []string
	// Attached is an in-process companion of the payload, for modules of
	// one broker: the sender may hand over what it already decoded from
	// the payload (job-ingest's parsed jobspecs) so the receiver need
	// not decode it again, and leave that part out of the payload. It is
	// never encoded: a message leaving the process gets the payload it
	// stands for instead (Attachment.Payload), so a receiver over a
	// socket sees what a receiver in the broker does.
	Attached Attachment
	// route0 holds the first hop without an allocation (most requests
	// are routed once, from a module or a local client).
	route0 [1]string
}

// Attachment is the in-process form of a message's payload, or of the
// part of it the sender left out. Each protocol that has one defines one
// attachment type, beside the types of its payload, and so says what the
// attachment stands for on the wire.
type Attachment interface {
	// Payload returns the whole payload of a message whose payload is
	// partial (what the sender wrote beside the attachment; may be
	// empty): what a receiver in another process gets. An attachment
	// that has no wire form says so with an error.
	Payload(partial []byte) ([]byte, error)
}

// New returns a message of type t with topic set and unknown credentials.
func New(t Type, topic string) *Message {
	m := &Message{Type: t, Userid: UseridUnknown}
	if t == Request {
		m.Nodeid = NodeidAny
	}
	m.SetTopic(topic)
	return m
}

// NewRequest returns a request for topic to nodeid with a JSON payload
// (nil payload means none). Route tracking is enabled as flux-core clients
// do, so the broker can push hops onto the stack.
func NewRequest(topic string, nodeid uint32, payload []byte) *Message {
	m := New(Request, topic)
	m.Nodeid = nodeid
	m.Flags |= FlagRoute
	if payload != nil {
		m.SetJSON(payload)
	}
	return m
}

// SetTopic sets the topic and FlagTopic.
func (m *Message) SetTopic(topic string) {
	m.Topic = topic
	m.Flags |= FlagTopic
}

// SetPayload sets a raw payload (no terminating NUL) and FlagPayload; an
// empty payload clears the flag.
func (m *Message) SetPayload(p []byte) {
	m.Payload = p
	if len(p) > 0 {
		m.Flags |= FlagPayload
	} else {
		m.Flags &^= FlagPayload
	}
}

// SetJSON sets a JSON (or other string) payload: flux-core terminates
// string payloads with a NUL byte on the wire.
func (m *Message) SetJSON(p []byte) {
	buf := make([]byte, len(p)+1)
	copy(buf, p)
	m.Payload = buf
	m.Flags |= FlagPayload
}

// SetJSONBuffer sets a JSON payload, taking p over: the terminating NUL
// is appended to p in place (copying only when p has no room), so a
// payload built for one message is not copied again. The caller must
// not use p afterwards.
func (m *Message) SetJSONBuffer(p []byte) {
	m.Payload = append(p, 0)
	m.Flags |= FlagPayload
}

// SetString sets a string payload (NUL-terminated on the wire).
func (m *Message) SetString(s string) {
	buf := make([]byte, len(s)+1)
	copy(buf, s)
	m.Payload = buf
	m.Flags |= FlagPayload
}

// MarshalPayload encodes v as JSON and sets it as the payload.
func (m *Message) MarshalPayload(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s payload: %w", m.Topic, err)
	}
	m.SetJSON(b)
	return nil
}

// String returns the payload as a string without its terminating NUL.
func (m *Message) String() string {
	return string(m.JSON())
}

// JSON returns the payload bytes without a terminating NUL (nil when the
// message has no payload).
func (m *Message) JSON() []byte {
	p := m.Payload
	if n := len(p); n > 0 && p[n-1] == 0 {
		return p[:n-1]
	}
	return p
}

// UnmarshalPayload decodes the JSON payload into v. A missing payload is
// an error naming the topic.
func (m *Message) UnmarshalPayload(v any) error {
	p := m.JSON()
	if len(p) == 0 {
		return fmt.Errorf("%s: %w: message has no payload", m.Topic, ErrProto)
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%s: %w: payload: %v", m.Topic, ErrProto, err)
	}
	return nil
}

// HasRoutes reports whether route tracking is enabled.
func (m *Message) HasRoutes() bool { return m.Flags&FlagRoute != 0 }

// EnableRoutes turns on route tracking with an empty stack.
func (m *Message) EnableRoutes() {
	m.Flags |= FlagRoute
	m.Routes = []string{} // a fresh stack: the old one may be shared by responses
}

// PushRoute pushes hop id onto the route stack (enabling route tracking).
func (m *Message) PushRoute(id string) {
	m.Flags |= FlagRoute
	if m.Routes == nil {
		m.Routes = m.route0[:0]
	}
	m.Routes = append(m.Routes, id)
}

// PopRoute removes and returns the most recent hop. ok is false when the
// stack is empty.
func (m *Message) PopRoute() (id string, ok bool) {
	n := len(m.Routes)
	if n == 0 {
		return "", false
	}
	id = m.Routes[n-1]
	m.Routes = m.Routes[:n-1]
	return id, true
}

// LastRoute returns the most recent hop without removing it.
func (m *Message) LastRoute() (string, bool) {
	if n := len(m.Routes); n > 0 {
		return m.Routes[n-1], true
	}
	return "", false
}

// RouteString renders the route stack as flux does ("a!b!c").
func (m *Message) RouteString() string { return strings.Join(m.Routes, "!") }

// Copy returns a copy of m. The payload bytes are shared (payloads are
// treated as immutable once a message is sent); the route stack is not.
func (m *Message) Copy() *Message {
	c := *m
	if m.Routes != nil {
		c.Routes = append([]string(nil), m.Routes...)
	}
	return &c
}

// IsStreaming reports whether a request asks for (or a response belongs
// to) a streaming RPC (RFC 6).
func (m *Message) IsStreaming() bool { return m.Flags&FlagStreaming != 0 }

// NoResponse reports whether a request expects no response.
func (m *Message) NoResponse() bool { return m.Flags&FlagNoResponse != 0 }

// Service returns the service name a topic belongs to: the part before
// the first period ("kvs.lookup" -> "kvs").
func Service(topic string) string {
	if i := strings.IndexByte(topic, '.'); i >= 0 {
		return topic[:i]
	}
	return topic
}

// ResponseTo builds a response to req with the same topic, matchtag, route
// stack, flags and credentials, and the given JSON payload (nil: none).
func ResponseTo(req *Message, payload []byte) *Message {
	r := &Message{
		Type:     Response,
		Flags:    req.Flags &^ (FlagPayload | FlagNoResponse),
		Userid:   req.Userid,
		Rolemask: req.Rolemask,
		Matchtag: req.Matchtag,
		Topic:    req.Topic,
	}
	if req.Routes != nil {
		// Share the request's stack: routing only pops a response's
		// hops (reslicing), and the capped slice makes any push copy.
		n := len(req.Routes)
		r.Routes = req.Routes[:n:n]
	}
	if payload != nil {
		r.SetJSON(payload)
	}
	return r
}

// ErrorTo builds an error response to req: errnum and, when msg is not
// empty, msg as the payload (flux-core sends the error string this way).
func ErrorTo(req *Message, errnum uint32, msg string) *Message {
	r := ResponseTo(req, nil)
	r.Errnum = errnum
	if msg != "" {
		r.SetString(msg)
	}
	return r
}
