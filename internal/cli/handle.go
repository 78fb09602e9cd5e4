package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// systemSocket is where a system instance (packaging/flux.service)
// listens; a variable so tests can point it elsewhere.
var systemSocket = "/run/flux/local"

// enclosingURI is the instance a command talks to: $FLUX_URI, or, when
// it is unset, the system instance's socket if one is there (as
// flux-core falls back to its configured local URI).
func enclosingURI() (string, error) {
	if uri := os.Getenv("FLUX_URI"); uri != "" {
		return uri, nil
	}
	if fi, err := os.Stat(systemSocket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return "local://" + systemSocket, nil
	}
	return "", fmt.Errorf("FLUX_URI is not set and no system instance listens at %s: run this inside a Flux instance (flux start, flux alloc) or set FLUX_URI", systemSocket)
}

// openHandle connects to the enclosing instance (enclosingURI), with an
// error that says what to do when there is none.
func openHandle() (*flux.Handle, error) {
	uri, err := enclosingURI()
	if err != nil {
		return nil, err
	}
	h, err := flux.Open(uri)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// withHandle connects to the enclosing instance and runs fn with the
// handle and a context that SIGINT/SIGTERM cancel (cmdContext); the
// handle is closed when fn returns.
func withHandle(fn func(ctx context.Context, h *flux.Handle) error) error {
	// the context first: its signalDelay runs from the command's start,
	// so a slow connect is interruptible too
	ctx, cancel := cmdContext()
	defer cancel()
	h, err := openHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(ctx, h)
}

// signalDelay is how long a command runs before cmdContext catches
// SIGINT and SIGTERM. Catching a signal costs a Go program a thread of
// its own and ~3 ms of CPU and 1-3 ms of wall time on a small machine
// (flux getattr: 25 -> 22 ms), which a command that ends sooner need not
// pay; a signal before then has its default effect (the command ends),
// as one arriving before any program has set its handlers.
const signalDelay = 25 * time.Millisecond

// interruptedBy is the signal that canceled a cmdContext (0: none).
var interruptedBy atomic.Int32

// sigintHandled is set while a command handles SIGINT and SIGTERM itself
// (flux job attach and flux run forward them to the job's tasks):
// cmdContext then leaves them alone, so the command ends with the job's
// exit code.
var sigintHandled atomic.Bool

// interruptedStatus is the exit code of a command that a signal caught by
// cmdContext cut short, 128+N as if the signal had ended it (0: none).
// Such a command fails without a message (its error is that of the
// canceled context).
func interruptedStatus() int {
	if sig := interruptedBy.Load(); sig != 0 {
		return 128 + int(sig)
	}
	return 0
}

// cmdContext returns a context cancelled by SIGINT/SIGTERM (once the
// command has run for signalDelay; the second signal has its default
// effect).
func cmdContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	done := false
	timer := time.AfterFunc(signalDelay, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			defer signal.Stop(sigs)
			for {
				select {
				case sig := <-sigs:
					if sigintHandled.Load() {
						continue // the command's own handler has it
					}
					if n, ok := sig.(syscall.Signal); ok {
						interruptedBy.Store(int32(n))
					}
					cancel()
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	})
	return ctx, func() {
		mu.Lock()
		done = true
		mu.Unlock()
		timer.Stop()
		cancel()
	}
}
