package rexec

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// stdinPipe feeds a process's stdin without ever blocking the Serve
// goroutine: data is written at once when the pipe has room, and
// otherwise queued (up to size bytes) for a writer goroutine that lives
// only while there is a backlog. Written bytes are returned to the client
// as add-credit responses.
type stdinPipe struct {
	p    *proc
	f    *os.File
	size int

	mu      sync.Mutex
	queue   [][]byte
	queued  int
	eof     bool // the client sent EOF: close once the queue is written
	closed  bool // f is closed (EOF written, write error, or process gone)
	running bool // a drain goroutine owns the queue head
}

func newStdinPipe(p *proc, f *os.File, size int) *stdinPipe {
	return &stdinPipe{p: p, f: f, size: size}
}

// errOverflow means a client wrote more than the buffer holds, ignoring
// its write credit.
var errOverflow = syscall.ENOSPC

// write queues data (and EOF). It runs on the Serve goroutine and never
// blocks. Data for a pipe already closed is dropped and its credit
// returned, so a client that tracks credit never stalls.
func (w *stdinPipe) write(data []byte, eof bool) error {
	w.mu.Lock()
	if w.closed || w.eof {
		w.mu.Unlock()
		w.p.credit(len(data))
		return nil
	}
	if w.queued+len(data) > w.size {
		w.mu.Unlock()
		return fmt.Errorf("stdin buffer overflow: %d bytes queued, %d more, buffer is %d: %w",
			w.queued, len(data), w.size, errOverflow)
	}
	if eof {
		w.eof = true
	}
	if !w.running && len(w.queue) == 0 {
		// Fast path: try the pipe directly.
		n, err := w.tryWrite(data)
		if err != nil {
			w.closed = true
			w.mu.Unlock()
			w.f.Close()
			w.p.credit(len(data))
			return nil
		}
		data = data[n:]
		if n > 0 {
			defer w.p.credit(n)
		}
		if len(data) == 0 && w.eof {
			w.closed = true
			w.mu.Unlock()
			w.f.Close()
			return nil
		}
	}
	if len(data) > 0 {
		w.queue = append(w.queue, data)
		w.queued += len(data)
	}
	start := !w.running && (len(w.queue) > 0 || w.eof)
	if start {
		w.running = true
		w.p.s.wg.Add(1)
	}
	w.mu.Unlock()
	if start {
		go w.drain()
	}
	return nil
}

// tryWrite writes what the pipe takes now, without waiting.
func (w *stdinPipe) tryWrite(data []byte) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for n < len(data) {
			k, e := syscall.Write(int(fd), data[n:])
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				break
			}
			if e != nil {
				werr = e
				break
			}
			n += k
		}
		return true // never wait here
	})
	if err != nil {
		return n, err
	}
	return n, werr
}

// drain writes the queue, blocking (parked in the netpoller) while the
// process does not read.
func (w *stdinPipe) drain() {
	defer w.p.s.wg.Done()
	for {
		w.mu.Lock()
		if w.closed {
			dropped := w.queued
			w.queue, w.queued, w.running = nil, 0, false
			w.mu.Unlock()
			w.p.credit(dropped)
			return
		}
		if len(w.queue) == 0 {
			w.running = false
			closeNow := w.eof
			if closeNow {
				w.closed = true
			}
			w.mu.Unlock()
			if closeNow {
				w.f.Close()
			}
			return
		}
		chunk := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()

		_, err := w.f.Write(chunk)

		w.mu.Lock()
		w.queued -= len(chunk)
		if err != nil {
			w.closed = true
		}
		w.mu.Unlock()
		w.p.credit(len(chunk))
		if err != nil {
			w.f.Close()
		}
	}
}

// close drops whatever is queued and closes the pipe (the process is
// gone or the module is stopping).
func (w *stdinPipe) close() {
	w.mu.Lock()
	w.closed = true
	w.queue, w.queued = nil, 0
	w.mu.Unlock()
	w.f.Close()
}
