package broker

import (
	"bufio"
	"net"
	"sync"
	"time"

	"github.com/fluxgo/fluxgo/internal/message"
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
	inline net.Conn // set to allow inline writes
	buf    []byte   // inline encode buffer, used while busy
}

// inlineWriteTimeout bounds how long a routing goroutine may spend in an
// inline write before handing the rest to the writer goroutine.
const inlineWriteTimeout = 2 * time.Millisecond

func newSendQueue() *sendQueue {
	return &sendQueue{notify: make(chan struct{}, 1)}
}

// allowInline lets push write directly to c when the queue is idle (only
// for unix sockets: a timed-out TLS write can't be resumed).
func (q *sendQueue) allowInline(c net.Conn) {
	if _, ok := c.(*net.UnixConn); !ok {
		return
	}
	q.mu.Lock()
	q.inline = c
	q.mu.Unlock()
}

func (q *sendQueue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// push queues m; it reports false once the queue is closed.
func (q *sendQueue) push(m *message.Message) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if q.inline != nil && !q.busy && len(q.msgs) == 0 && len(q.raw) == 0 {
		q.busy = true
		buf := message.AppendFramed(q.buf[:0], m)
		c := q.inline
		q.mu.Unlock()
		c.SetWriteDeadline(time.Now().Add(inlineWriteTimeout))
		n, _ := c.Write(buf)
		q.mu.Lock()
		if n < len(buf) {
			q.raw = append(q.raw, buf[n:]...)
		}
		q.buf = buf
		q.busy = false
		pending := len(q.raw) > 0 || len(q.msgs) > 0 || q.closed
		q.mu.Unlock()
		if pending {
			q.wake()
		}
		return true
	}
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	q.wake()
	return true
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
			if q.inline != nil {
				c.SetWriteDeadline(time.Time{})
			}
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
