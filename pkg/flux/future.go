package flux

import (
	"context"
	"io"
	"sync"
	"syscall"
)

// Future is the pending result of an RPC: one response, or for a
// streaming RPC a sequence of responses ended by an error (ENODATA means a
// normal end, returned as io.EOF by Next).
type Future struct {
	h         *Handle
	tag       uint32
	topic     string
	streaming bool

	mu     sync.Mutex
	msgs   []*Message
	first  *Message
	err    error
	notify chan struct{}
	then   func(*Message, error)
}

func newFuture(h *Handle, topic string, streaming bool) *Future {
	return &Future{h: h, topic: topic, streaming: streaming}
}

// signal wakes a waiter in Next; the channel exists once someone waits.
func signal(ch chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Matchtag returns the request's matchtag (needed to cancel a stream).
func (f *Future) Matchtag() uint32 { return f.tag }

func (f *Future) put(m *Message) {
	f.mu.Lock()
	if fn := f.then; fn != nil {
		f.mu.Unlock()
		f.h.enqueue(work{kind: workThen, then: fn, m: m, err: responseErr(m)})
		return
	}
	f.msgs = append(f.msgs, m)
	ch := f.notify
	f.mu.Unlock()
	signal(ch)
}

func (f *Future) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	fn := f.then
	ch := f.notify
	f.mu.Unlock()
	if fn != nil {
		f.h.enqueue(work{kind: workThen, then: fn, err: err})
		return
	}
	signal(ch)
}

// responseErr converts an error response into an *Error.
func responseErr(m *Message) error {
	if m == nil || m.Errnum == 0 {
		return nil
	}
	return &Error{Errno: syscall.Errno(m.Errnum), Msg: m.String()}
}

// Then arranges for fn to run on the handle's Serve goroutine with each
// response (once for a plain RPC; per response for a stream, the last one
// carrying an error). Use it in services instead of blocking.
func (f *Future) Then(fn func(m *Message, err error)) {
	f.h.needReader()
	f.mu.Lock()
	pending := f.msgs
	f.msgs = nil
	err := f.err
	f.then = fn
	f.mu.Unlock()
	for _, m := range pending {
		f.h.enqueue(work{kind: workThen, then: fn, m: m, err: responseErr(m)})
	}
	if err != nil && len(pending) == 0 {
		f.h.enqueue(work{kind: workThen, then: fn, err: err})
	}
}

// Next waits for the next response. A response carrying an error is
// returned as that error; ENODATA (the end of a stream) as io.EOF.
func (f *Future) Next(ctx context.Context) (*Message, error) {
	for {
		f.mu.Lock()
		if len(f.msgs) > 0 {
			m := f.msgs[0]
			f.msgs[0] = nil
			f.msgs = f.msgs[1:]
			f.mu.Unlock()
			if m.Errnum == errnoENODATA && f.streaming {
				return nil, io.EOF
			}
			if err := responseErr(m); err != nil {
				return m, err
			}
			return m, nil
		}
		err := f.err
		if f.notify == nil {
			f.notify = make(chan struct{}, 1)
		}
		ch := f.notify
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if err := f.h.await(ctx, f, ch); err != nil {
			if !f.streaming {
				f.h.unregister(f.tag)
			}
			return nil, err
		}
	}
}

// Get waits for the response of a non-streaming RPC. Calling it again
// returns the same response.
func (f *Future) Get(ctx context.Context) (*Message, error) {
	f.mu.Lock()
	if f.first != nil {
		m := f.first
		f.mu.Unlock()
		return m, responseErr(m)
	}
	f.mu.Unlock()
	m, err := f.Next(ctx)
	if m != nil {
		f.mu.Lock()
		f.first = m
		f.mu.Unlock()
	}
	if err == io.EOF {
		err = &Error{Errno: syscall.ENODATA}
	}
	return m, err
}

// Decode waits for the response and decodes its JSON payload into v (nil:
// discard).
func (f *Future) Decode(ctx context.Context, v any) error {
	m, err := f.Get(ctx)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	return m.UnmarshalPayload(v)
}

// Close abandons the future locally: later responses are dropped. To
// stop a stream on the service side, send the service's cancel request.
func (f *Future) Close() {
	if f.tag != 0 {
		f.h.unregister(f.tag)
	}
}

// Stream sends a streaming request (RFC 6) and calls fn with each
// response until the stream ends (nil) or fails (the error), or fn
// returns an error (that one; the rest of the stream is dropped).
func (h *Handle) Stream(ctx context.Context, topic string, nodeid uint32, payload any, fn func(*Message) error) error {
	f, err := h.RPC(topic, nodeid, payload, Streaming)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		m, err := f.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
