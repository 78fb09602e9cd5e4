package flux

import (
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/message"
)

// localConn is the client side of a broker's local socket (flux-core's
// local connector protocol).
type localConn struct {
	c       *net.UnixConn
	r       *message.Reader // used by ReadMessage, then by Start's goroutine
	wmu     sync.Mutex
	buf     []byte
	closeMu sync.Once
}

// DialLocal connects to the local socket named by uri and completes the
// connector's one-byte authentication handshake.
func DialLocal(uri string) (Conn, error) {
	path, err := SocketPath(uri)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	delay := 8 * time.Millisecond
	for try := 0; ; try++ {
		c, err = net.Dial("unix", path)
		if err == nil || try >= 5 {
			break
		}
		time.Sleep(delay)
		delay *= 2
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", path, err)
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to %s: reading auth byte: %w", path, err)
	}
	if b[0] != 0 {
		c.Close()
		return nil, fmt.Errorf("connect to %s: broker refused connection: %w", path, syscall.Errno(b[0]))
	}
	uc := c.(*net.UnixConn)
	return &localConn{c: uc, r: message.NewReader(uc)}, nil
}

func (l *localConn) Send(m *Message) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.buf = message.AppendFramed(l.buf[:0], m)
	if _, err := l.c.Write(l.buf); err != nil {
		return fmt.Errorf("send %s: %w", m.Topic, err)
	}
	return nil
}

func (l *localConn) Start(deliver func(*Message), closed func(error)) {
	go func() {
		for {
			m, err := l.r.Read()
			if err != nil {
				closed(fmt.Errorf("broker connection: %w", err))
				return
			}
			deliver(m)
		}
	}()
}

// ReadMessage reads the next message (DirectReader).
func (l *localConn) ReadMessage() (*Message, error) { return l.r.Read() }

func (l *localConn) Close() error {
	var err error
	l.closeMu.Do(func() { err = l.c.Close() })
	return err
}
