package flux

import (
	"errors"
	"fmt"
)

// Reconnecting. A program that must outlive its broker (the job shell,
// which keeps a job's tasks running while the broker restarts) keeps one
// Handle for its whole life: KeepServing makes Serve go on running posted
// functions and timers' work after the connection is lost, and Reconnect
// gives the handle a new connection once a broker is back. Everything
// that holds the handle (KVS batches, loggers, registered handlers) goes
// on using it.
//
// What does not carry over: RPCs in flight and subscriptions fail when
// the connection is lost (with its error), services registered with the
// broker and event subscriptions must be made again on the new
// connection, and a request received on the old connection can no longer
// be answered (Respond returns ErrStale without sending anything: the
// requestor, routed through the old broker, is gone).

// ErrStale is returned when answering a request that came on a
// connection the handle has since replaced.
var ErrStale = errors.New("flux handle: the request came on an earlier connection")

// KeepServing makes Serve keep running after the connection is lost
// (until its context ends), so the handle can Reconnect. Call it before
// Serve.
func (h *Handle) KeepServing() {
	h.mu.Lock()
	h.keepServing = true
	h.mu.Unlock()
}

func (h *Handle) keepsServing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keepServing
}

// generation returns the number of the handle's current connection.
func (h *Handle) generation() uint64 { return h.gen.Load() }

// Reconnect replaces a lost connection with c. It fails if the current
// connection is still up. Messages from c are delivered by a reader
// goroutine; Done returns a new channel for c.
func (h *Handle) Reconnect(c Conn) error {
	h.mu.Lock()
	if h.err == nil {
		h.mu.Unlock()
		return fmt.Errorf("flux handle: reconnect: the connection is still up")
	}
	h.conn = c
	h.err = nil
	h.done = make(chan struct{})
	h.gen.Add(1)
	h.attrs = make(map[string]string) // a broker that restarted may differ
	h.mu.Unlock()
	rd := &h.rd
	rd.mu.Lock()
	// the new connection always gets a reader goroutine: nobody may be
	// reading the old one for itself any more (it is lost)
	rd.direct = nil
	rd.async = true
	rd.started = true
	rd.mu.Unlock()
	h.startDelivery()
	return nil
}

// startDelivery starts the current connection's reader goroutine. Its
// end is reported only while it is still the handle's connection.
func (h *Handle) startDelivery() {
	h.mu.Lock()
	c, gen := h.conn, h.gen.Load()
	h.mu.Unlock()
	c.Start(h.deliver, func(err error) {
		if h.generation() == gen {
			h.lost(err)
		}
	})
}

// send sends a response to r unless r came on an earlier connection.
func (r *Request) send(m *Message) error {
	if r.gen != r.h.generation() {
		return ErrStale
	}
	return r.h.Send(m)
}

// InBroker reports whether the handle is a module's link inside the
// broker, where a message's Attached value reaches its recipient; over a
// socket it is lost.
func (h *Handle) InBroker() bool {
	c, ok := h.currentConn().(interface{ InBroker() bool })
	return ok && c.InBroker()
}
