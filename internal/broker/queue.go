package broker

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// sendQueue is an unbounded outbound message queue drained by one writer
// goroutine. Routing never blocks on a slow peer: messages queue up and
// the writer sends everything queued in one write.
//
// On unix sockets an idle queue writes a message straight from the
// routing goroutine instead (with a short write deadline), which saves a
// goroutine hand-off per message at low load; whatever such a write
// could not finish goes to the writer goroutine.
type sendQueue struct {
	mu     sync.Mutex
	msgs   []*message.Message
	raw    []byte // the unsent tail of an inline write, sent first
	closed bool
	busy   bool // someone (inline or the writer) is writing
	notify chan struct{}
	inline syscall.RawConn // set to allow inline writes
	buf    []byte          // inline encode buffer, used while busy
	corked bool            // hold messages: a burst is being routed
	// refuse answers a request whose attachment has no wire form, which
	// the queue does not send (see detach)
	refuse func(req *message.Message, err error)
}

func newSendQueue(refuse func(req *message.Message, err error)) *sendQueue {
	return &sendQueue{notify: make(chan struct{}, 1), refuse: refuse}
}

// allowInline lets push write directly to c when the queue is idle (only
// for unix sockets: a partial TLS record can't be resumed).
func (q *sendQueue) allowInline(c net.Conn) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return
	}
	q.mu.Lock()
	q.inline = rc
	q.mu.Unlock()
}

// tryWrite makes one non-blocking write of b to rc and returns how many
// bytes went out (0 when the socket buffer is full or the write failed:
// the writer goroutine then retries and sees any error). No deadline is
// set, so the runtime's timers are not touched per message.
func tryWrite(rc syscall.RawConn, b []byte) int {
	n := 0
	rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			k, err := syscall.Write(int(fd), b[n:])
			if err == syscall.EINTR {
				continue
			}
			if err != nil || k <= 0 {
				break
			}
			n += k
		}
		return true
	})
	return n
}

func (q *sendQueue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// push queues m; it reports false once the queue is closed.
func (q *sendQueue) push(m *message.Message) bool {
	if m.Attached != nil {
		d, err := detach(m)
		if err != nil && m.Type == message.Request {
			if q.refuse != nil {
				go q.refuse(m, err) // not under the caller's routing
			}
			return true
		}
		m = d
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if q.corked {
		q.msgs = append(q.msgs, m)
		q.mu.Unlock()
		return true
	}
	if q.inline != nil && !q.busy && len(q.msgs) == 0 && len(q.raw) == 0 {
		q.busy = true
		q.writeInline(message.AppendFramed(q.buf[:0], m))
		return true
	}
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	q.wake()
	return true
}

// detach returns the message a peer in another process gets for m,
// which carries an in-process attachment (message.Attached): a copy with
// the payload the attachment stands for, and no attachment. A response
// whose attachment has no wire form becomes an EPROTO error saying so;
// for a request the error is returned.
func detach(m *message.Message) (*message.Message, error) {
	e := *m
	e.Attached = nil
	p, err := m.Attached.Payload(m.Payload)
	if err != nil {
		if m.Type == message.Request {
			return nil, err
		}
		e.Errnum = uint32(syscall.EPROTO)
		e.SetString(fmt.Sprintf("%s: this response has no wire form: %v", m.Topic, err))
		return &e, nil
	}
	e.SetPayload(p)
	return &e, nil
}

// cork holds pushed messages in the queue until uncork, so the replies
// to a burst of requests read from one connection leave in one write
// instead of one each. The connection's reader corks its own queue while
// it routes what one read returned.
func (q *sendQueue) cork() {
	q.mu.Lock()
	q.corked = true
	q.mu.Unlock()
}

// uncork sends what was held: inline, in one write, when the queue is
// idle, otherwise through the writer goroutine.
func (q *sendQueue) uncork() {
	q.mu.Lock()
	q.corked = false
	if len(q.msgs) == 0 {
		q.mu.Unlock()
		return
	}
	if q.inline == nil || q.busy || len(q.raw) > 0 || q.closed {
		q.mu.Unlock()
		q.wake()
		return
	}
	q.busy = true
	// sized first: a burst (a journal batch to a client) is often larger
	// than the buffer kept, and growing it as it fills copied it over
	// and over
	size := 0
	for _, m := range q.msgs {
		size += 8 + m.EncodedSize()
	}
	buf := slices.Grow(q.buf[:0], size)
	for i, m := range q.msgs {
		buf = message.AppendFramed(buf, m)
		q.msgs[i] = nil
	}
	q.msgs = q.msgs[:0]
	q.writeInline(buf)
}

// writeInline writes buf from the calling goroutine, which set busy and
// holds q.mu; it returns with q.mu released. What the socket does not
// take at once is left for the writer goroutine, woken if anything is
// waiting.
func (q *sendQueue) writeInline(buf []byte) {
	rc := q.inline
	q.mu.Unlock()
	n := tryWrite(rc, buf)
	q.mu.Lock()
	if n < len(buf) {
		q.raw = append(q.raw, buf[n:]...)
	}
	if cap(buf) <= 64*1024 { // keep a modest encode buffer for next time
		q.buf = buf
	}
	q.busy = false
	pending := len(q.raw) > 0 || len(q.msgs) > 0 || q.closed
	q.mu.Unlock()
	if pending {
		q.wake()
	}
}

func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

// writeLoop writes queued messages to c until the queue is closed (after
// flushing what was queued) or a write fails.
func (q *sendQueue) writeLoop(c net.Conn) error {
	w := bufio.NewWriterSize(c, 64*1024)
	var batch []*message.Message
	var raw, buf []byte
	for {
		q.mu.Lock()
		if q.busy {
			// an inline write is in progress; it wakes us when done
			q.mu.Unlock()
			<-q.notify
			continue
		}
		batch, q.msgs = q.msgs, batch[:0]
		raw, q.raw = q.raw, raw[:0]
		closed := q.closed
		work := len(batch) > 0 || len(raw) > 0
		if work {
			q.busy = true
		}
		q.mu.Unlock()
		if work {
			err := func() error {
				if len(raw) > 0 {
					if _, err := w.Write(raw); err != nil {
						return err
					}
				}
				for i, m := range batch {
					buf = message.AppendFramed(buf[:0], m)
					if _, err := w.Write(buf); err != nil {
						return err
					}
					batch[i] = nil
				}
				return w.Flush()
			}()
			q.mu.Lock()
			q.busy = false
			q.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		if closed {
			return w.Flush()
		}
		<-q.notify
	}
}

// setWriteDeadline bounds how long a final flush may take on shutdown.
func setWriteDeadline(c net.Conn, d time.Duration) {
	_ = c.SetWriteDeadline(time.Now().Add(d))
}

// refuseDetached answers a request that could not leave the broker
// because its attachment has no wire form.
func (b *Broker) refuseDetached(req *message.Message, err error) {
	b.router.respondError(req, syscall.EPROTO, fmt.Sprintf("%s: %v", req.Topic, err))
}
