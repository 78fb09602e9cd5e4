package flux

import (
	"context"
	"fmt"
	"sync"
)

// Who reads the connection.
//
// A connection's reader goroutine hands each response to the goroutine
// waiting for it: a wake-up of another goroutine, which in a process
// with more than one thread usually means waking another thread too,
// and on a small machine that costs more than the broker takes to answer
// (bench/broker: about 100 µs per RPC against 38 µs for a client reading
// its own socket, and 29 µs once that read sleeps in read(2) rather than
// in the net poller: see localConn). So a handle on a connection that
// allows it (DirectReader) starts without a reader goroutine, and a
// goroutine waiting for a response reads the connection itself, dispatching
// whatever else arrives meanwhile as the reader goroutine would; other
// waiters wait for it to finish and take over in turn.
//
// A wait whose context can be canceled reads too: it waits for input or
// its context's end between messages (WaitReadable), so the stream's
// framing is kept. Once anything needs messages delivered when nobody
// waits for a response (a subscription, an event or request handler, a
// Then callback, Done), or the caller keeps several RPCs in flight (a
// reader goroutine then receives while the caller sends), the handle
// starts the reader goroutine and keeps it for the rest of its life.

// DirectReader is implemented by connections that let a goroutine read
// the next message itself. A handle calls ReadMessage and WaitReadable
// from one goroutine at a time, and never after Start.
type DirectReader interface {
	ReadMessage() (*Message, error)
	// WaitReadable waits until input is buffered or arrives (nil), or
	// ctx ends (ctx.Err()). It is called between messages.
	WaitReadable(ctx context.Context) error
}

// readState says who reads the connection.
type readState struct {
	mu      sync.Mutex
	direct  DirectReader  // nil: the connection's reader goroutine delivers
	async   bool          // the reader goroutine is wanted
	started bool          // Start was called
	leading bool          // a waiting goroutine is reading
	turn    chan struct{} // closed when the leading goroutine stops
}

// startConn starts the connection's delivery, or defers it to the first
// goroutine that waits for a response when the connection allows.
func (h *Handle) startConn() {
	if d, ok := h.conn.(DirectReader); ok {
		h.rd.direct = d
		return
	}
	h.rd.started = true
	h.startDelivery()
}

// claimStart (rd.mu held) reports whether the caller is to start the
// reader goroutine: it is wanted, not started yet, and nobody reads.
func (rd *readState) claimStart() bool {
	if !rd.async || rd.started || rd.leading {
		return false
	}
	rd.started = true
	return true
}

// needReader makes sure the reader goroutine runs (now, or when the
// goroutine reading for itself stops).
func (h *Handle) needReader() {
	rd := &h.rd
	rd.mu.Lock()
	rd.async = true
	start := rd.claimStart()
	rd.mu.Unlock()
	if start {
		h.startDelivery()
	}
}

// await blocks until f may have a response or an error: it returns
// ctx.Err() if ctx ends first, nil otherwise (the caller looks again).
// ch is f's notification channel.
func (h *Handle) await(ctx context.Context, f *Future, ch chan struct{}) error {
	rd := &h.rd
	for {
		rd.mu.Lock()
		if rd.direct == nil || rd.async {
			rd.mu.Unlock()
			select {
			case <-ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !rd.leading {
			rd.leading = true
			rd.mu.Unlock()
			return h.lead(ctx, f)
		}
		if rd.turn == nil {
			rd.turn = make(chan struct{})
		}
		turn := rd.turn
		rd.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-turn:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lead reads and dispatches messages until f has a response or an error,
// or ctx ends (its error is returned), then lets the next waiter (or the
// reader goroutine) read.
func (h *Handle) lead(ctx context.Context, f *Future) error {
	var stopped error
	for !f.ready() {
		if ctx.Done() != nil {
			if stopped = h.rd.direct.WaitReadable(ctx); stopped != nil {
				break
			}
		}
		m, err := h.rd.direct.ReadMessage()
		if err != nil {
			h.lost(fmt.Errorf("broker connection: %w", err))
			break
		}
		h.deliver(m)
	}
	// Other requests still waiting for responses: the caller pipelines
	// RPCs, and a reader goroutine receiving while it sends serves it
	// better than turns taken by its waits.
	h.mu.Lock()
	pipelined := len(h.rpcs) > 0
	h.mu.Unlock()
	rd := &h.rd
	rd.mu.Lock()
	if pipelined {
		rd.async = true
	}
	rd.leading = false
	start := rd.claimStart()
	if rd.turn != nil {
		close(rd.turn)
		rd.turn = nil
	}
	rd.mu.Unlock()
	if start {
		h.startDelivery()
	}
	return stopped
}

// ready reports whether f holds a response or an error, or hands its
// responses to a Then callback.
func (f *Future) ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs) > 0 || f.err != nil || f.then != nil
}
