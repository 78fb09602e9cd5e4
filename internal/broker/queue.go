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
type sendQueue struct {
	mu     sync.Mutex
	msgs   []*message.Message
	closed bool
	notify chan struct{}
}

func newSendQueue() *sendQueue {
	return &sendQueue{notify: make(chan struct{}, 1)}
}

// push queues m; it reports false once the queue is closed.
func (q *sendQueue) push(m *message.Message) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return true
}

func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// writeLoop writes queued messages to c until the queue is closed (after
// flushing what was queued) or a write fails.
func (q *sendQueue) writeLoop(c net.Conn) error {
	w := bufio.NewWriterSize(c, 64*1024)
	var batch []*message.Message
	var buf []byte
	for {
		q.mu.Lock()
		batch, q.msgs = q.msgs, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i, m := range batch {
			buf = message.AppendFramed(buf[:0], m)
			if _, err := w.Write(buf); err != nil {
				return err
			}
			batch[i] = nil
		}
		if len(batch) > 0 {
			if err := w.Flush(); err != nil {
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
