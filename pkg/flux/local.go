package flux

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// localConn is the client side of a broker's local socket (flux-core's
// local connector protocol).
//
// The socket starts as a plain blocking descriptor, outside Go's network
// poller: a goroutine waiting for its own response (ReadMessage) sleeps in
// read(2), and the thread the kernel wakes when the answer arrives is the
// one that wanted it, as in a C client. Through the poller, the poller's
// thread wakes first and then wakes the waiter's; on a small machine that
// hand-off costs about as much as the broker takes to answer
// (bench/broker). When the handle starts its reader goroutine (Start), the
// socket moves to the poller for good, so that a long-lived handle does
// not tie up a thread.
type localConn struct {
	f *os.File // the blocking socket, until Start

	c atomic.Pointer[net.UnixConn] // after Start: the poller's copy of the socket

	r   *message.Reader // used by ReadMessage, then by Start's goroutine
	wmu sync.Mutex      // one Send at a time; Start waits for it
	buf []byte

	wakeOnce sync.Once
	wake     *os.File // eventfd written when a waiter's context ends
	wakeErr  error

	// testing credentials (FLUX_HANDLE_USERID, FLUX_HANDLE_ROLEMASK):
	// stamped on what is sent; the broker honours them from the
	// instance owner only (flux-core's test hook for guest access)
	testUserid, testRole uint32
	testCreds            bool
}

// sockReader is the message reader's byte source.
type sockReader struct{ l *localConn }

func (s sockReader) Read(p []byte) (int, error) {
	if c := s.l.c.Load(); c != nil {
		return c.Read(p)
	}
	return s.l.f.Read(p)
}

// DialLocal connects to the local socket named by uri and completes the
// connector's one-byte authentication handshake.
func DialLocal(uri string) (Conn, error) {
	path, err := SocketPath(uri)
	if err != nil {
		return nil, err
	}
	var f *os.File
	delay := 8 * time.Millisecond
	for try := 0; ; try++ {
		f, err = dialUnix(path)
		if err == nil || try >= 5 {
			break
		}
		time.Sleep(delay)
		delay *= 2
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", path, err)
	}
	l := &localConn{f: f}
	if err := l.testingCreds(); err != nil {
		f.Close()
		return nil, err
	}
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		l.Close()
		return nil, fmt.Errorf("connect to %s: reading auth byte: %w", path, err)
	}
	if b[0] != 0 {
		l.Close()
		errno := syscall.Errno(b[0])
		why := ""
		switch errno {
		case syscall.EUSERS:
			why = " (this user holds the most connections the instance allows: access.max-user-connections)"
		case syscall.EPERM:
			why = " (the instance does not admit other users: access.allow-guest-user)"
		}
		return nil, fmt.Errorf("connect to %s: broker refused connection%s: %w", path, why, errno)
	}
	l.r = message.NewReader(sockReader{l})
	return l, nil
}

// dialUnix opens a blocking, close-on-exec stream socket connected to
// path. A blocking descriptor is not put in the poller by os.NewFile.
func dialUnix(path string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (l *localConn) Send(m *Message) error {
	if l.testCreds && m.Userid == message.UseridUnknown {
		d := *m
		d.Userid, d.Rolemask = l.testUserid, l.testRole
		m = &d
	}
	if m.Attached != nil {
		// leaving the process: the payload the attachment stands for
		p, err := m.Attached.Payload(m.Payload)
		if err != nil {
			return fmt.Errorf("send %s: %w", m.Topic, err)
		}
		d := *m
		d.Attached = nil
		d.SetPayload(p)
		m = &d
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.buf = message.AppendFramed(l.buf[:0], m)
	var err error
	if c := l.c.Load(); c != nil {
		_, err = c.Write(l.buf)
	} else {
		_, err = l.f.Write(l.buf)
	}
	if err != nil {
		return fmt.Errorf("send %s: %w", m.Topic, err)
	}
	return nil
}

func (l *localConn) Start(deliver func(*Message), closed func(error)) {
	if err := l.toPoller(); err != nil {
		go closed(fmt.Errorf("broker connection: %w", err))
		return
	}
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

// toPoller moves the socket to Go's network poller. Nobody reads while
// Start runs (DirectReader's contract); wmu waits out a Send in progress.
func (l *localConn) toPoller() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	c, err := net.FileConn(l.f) // a non-blocking duplicate, in the poller
	if err != nil {
		return err
	}
	l.c.Store(c.(*net.UnixConn))
	l.f.Close()
	return nil
}

// ReadMessage reads the next message (DirectReader).
func (l *localConn) ReadMessage() (*Message, error) { return l.r.Read() }

// WaitReadable waits until input is buffered or arrives, or ctx ends
// (DirectReader). It sleeps in poll(2) on the socket and an
// eventfd that ctx's end writes to. It is only called between messages
// by the goroutine that reads, before Start.
func (l *localConn) WaitReadable(ctx context.Context) error {
	if l.r.Buffered() > 0 {
		return nil
	}
	l.wakeOnce.Do(func() {
		// Blocking, so that os.NewFile leaves it out of the net poller
		// (it is read only when poll says it is readable).
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			l.wakeErr = os.NewSyscallError("eventfd", err)
			return
		}
		l.wake = os.NewFile(uintptr(fd), "flux-local-wake")
	})
	if l.wakeErr != nil {
		return l.wakeErr
	}
	if l.wake == nil {
		return net.ErrClosed // Close ran first
	}
	stop := context.AfterFunc(ctx, func() {
		var one [8]byte
		one[0] = 1 // any non-zero count makes the eventfd readable
		l.wake.Write(one[:])
	})
	defer stop()
	sock, err := l.f.SyscallConn()
	if err != nil {
		return err
	}
	wake, err := l.wake.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var perr error
		var fds [2]unix.PollFd
		sock.Control(func(sfd uintptr) {
			wake.Control(func(wfd uintptr) {
				fds = [2]unix.PollFd{
					{Fd: int32(sfd), Events: unix.POLLIN},
					{Fd: int32(wfd), Events: unix.POLLIN},
				}
				_, perr = unix.Poll(fds[:], -1)
			})
		})
		switch {
		case perr == unix.EINTR:
			continue
		case perr != nil:
			return os.NewSyscallError("poll", perr)
		case fds[0].Revents != 0:
			return nil // input, or an end or error that the read reports
		}
		// The eventfd: drain it. A count left by an earlier wait's
		// context is stale: wait again.
		var cnt [8]byte
		l.wake.Read(cnt[:])
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Close ends the connection. A goroutine sleeping in read(2) is not woken
// by closing the descriptor, so the socket is shut down first: the read
// ends with end of file and the descriptor is closed when it returns.
func (l *localConn) Close() error {
	if c := l.c.Load(); c != nil {
		return c.Close()
	}
	if rc, err := l.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	}
	err := l.f.Close()
	l.wakeOnce.Do(func() {}) // WaitReadable is not to make one now
	if l.wake != nil {
		l.wake.Close()
	}
	if c := l.c.Load(); c != nil { // Start ran meanwhile
		return c.Close()
	}
	return err
}

// testingCreds reads FLUX_HANDLE_USERID (decimal) and
// FLUX_HANDLE_ROLEMASK (decimal, 0x hex or 0 octal), as flux-core's
// flux_open does.
func (l *localConn) testingCreds() error {
	u, haveU := os.LookupEnv("FLUX_HANDLE_USERID")
	r, haveR := os.LookupEnv("FLUX_HANDLE_ROLEMASK")
	if !haveU && !haveR {
		return nil
	}
	l.testCreds = true
	l.testUserid, l.testRole = message.UseridUnknown, message.RoleNone
	if haveU {
		n, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			return fmt.Errorf("FLUX_HANDLE_USERID=%q: not a userid", u)
		}
		l.testUserid = uint32(n)
	}
	if haveR {
		n, err := strconv.ParseUint(r, 0, 32)
		if err != nil {
			return fmt.Errorf("FLUX_HANDLE_ROLEMASK=%q: not a role mask", r)
		}
		l.testRole = uint32(n)
	}
	if l.testUserid == message.UseridUnknown {
		// a role mask alone: the broker needs a userid to take it
		l.testUserid = uint32(os.Getuid())
	}
	return nil
}
