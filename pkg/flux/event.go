package flux

import (
	"context"
	"strings"
	"sync"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// topicHasPrefix is Flux's subscription match: a subscription of length N
// matches an event whose first N characters equal it.
func topicHasPrefix(topic, prefix string) bool { return strings.HasPrefix(topic, prefix) }

// Subscription receives events whose topic starts with its prefix.
type Subscription struct {
	h      *Handle
	prefix string

	mu     sync.Mutex
	msgs   []*Message
	err    error
	notify chan struct{}
}

func (s *Subscription) matches(topic string) bool { return topicHasPrefix(topic, s.prefix) }

func (s *Subscription) put(m *Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Subscription) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Subscribe asks the broker for events whose topic starts with prefix
// ("" for all) and returns a Subscription to read them from.
func (h *Handle) Subscribe(ctx context.Context, prefix string) (*Subscription, error) {
	h.needReader()
	s := &Subscription{h: h, prefix: prefix, notify: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	if err := h.Call(ctx, "local.sub", NodeidAny, map[string]string{"topic": prefix}, nil); err != nil {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
		return nil, err
	}
	return s, nil
}

// Next waits for the next event.
func (s *Subscription) Next(ctx context.Context) (*Message, error) {
	for {
		s.mu.Lock()
		if len(s.msgs) > 0 {
			m := s.msgs[0]
			s.msgs[0] = nil
			s.msgs = s.msgs[1:]
			s.mu.Unlock()
			return m, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Unsubscribe stops the subscription.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	s.h.mu.Lock()
	delete(s.h.subs, s)
	s.h.mu.Unlock()
	return s.h.Call(ctx, "local.unsub", NodeidAny, map[string]string{"topic": s.prefix}, nil)
}

// OnEvent subscribes to events with topic prefix and runs fn for each on
// the Serve goroutine.
func (h *Handle) OnEvent(ctx context.Context, prefix string, fn func(m *Message)) error {
	h.needReader()
	h.mu.Lock()
	h.evh = append(h.evh, evHandler{prefix: prefix, fn: fn})
	h.mu.Unlock()
	return h.Call(ctx, "local.sub", NodeidAny, map[string]string{"topic": prefix}, nil)
}

// OnOwnerEvent is OnEvent for events only the instance owner may send
// (RFC 12): an event a guest published under the prefix is ignored, as
// flux-core's message handlers do by default. Services use it for every
// event that makes them act.
func (h *Handle) OnOwnerEvent(ctx context.Context, prefix string, fn func(m *Message)) error {
	return h.OnEvent(ctx, prefix, func(m *Message) {
		if m.Rolemask&message.RoleOwner != 0 {
			fn(m)
		}
	})
}

// Publish sends an event with a JSON payload (nil: none). The broker
// sequences it at rank 0 and delivers it to every subscriber. Private
// events reach only the instance owner and the sender's userid.
func (h *Handle) Publish(topic string, payload any, private bool) error {
	b, owned, err := encodePayload(payload)
	if err != nil {
		return err
	}
	m := message.New(message.Event, topic)
	m.Flags |= message.FlagRoute
	setPayload(m, b, owned)
	if private {
		m.Flags |= message.FlagPrivate
	}
	return h.Send(m)
}

// PublishSync publishes an event through the broker's event.pub service
// and returns the sequence number assigned to it.
func (h *Handle) PublishSync(ctx context.Context, topic string, payload any, private bool) (uint32, error) {
	b, _, err := encodePayload(payload)
	if err != nil {
		return 0, err
	}
	req := map[string]any{"topic": topic, "flags": 0}
	if private {
		req["flags"] = int(message.FlagPrivate)
	}
	if b != nil {
		req["payload"] = string(b)
	}
	var resp struct {
		Seq uint32 `json:"seq"`
	}
	if err := h.Call(ctx, "event.pub", NodeidAny, req, &resp); err != nil {
		return 0, err
	}
	return resp.Seq, nil
}
