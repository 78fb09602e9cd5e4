package subprocess_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/modules/rexec/rexectest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

func TestRun(t *testing.T) {
	inst := rexectest.Start(t, 2)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	tests := []struct {
		name       string
		args       []string
		out, err   string
		code       int
		signal     syscall.Signal
		exitStatus int
	}{
		{"echo", []string{"echo", "hello"}, "hello\n", "", 0, 0, 0},
		{"stderr", []string{"sh", "-c", "echo oops >&2"}, "", "oops\n", 0, 0, 0},
		{"exit", []string{"sh", "-c", "exit 3"}, "", "", 3, 0, 3},
		{"signal", []string{"sh", "-c", "kill -KILL $$"}, "", "", 137, syscall.SIGKILL, 0},
		{"flux uri", []string{"sh", "-c", `test -n "$FLUX_URI" && echo ok`}, "ok\n", "", 0, 0, 0},
	}
	for _, tc := range tests {
		for _, rank := range []uint32{0, 1} {
			t.Run(fmt.Sprintf("%s/rank%d", tc.name, rank), func(t *testing.T) {
				var out, errb bytes.Buffer
				st, err := subprocess.Run(ctx, h, rank, subprocess.Command{Args: tc.args, Stdout: &out, Stderr: &errb})
				if err != nil {
					t.Fatal(err)
				}
				if out.String() != tc.out || errb.String() != tc.err {
					t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
				}
				if st.Code() != tc.code || (tc.signal != 0 && st.Signal() != tc.signal) {
					t.Fatalf("status %v (code %d), want code %d", st, st.Code(), tc.code)
				}
			})
		}
	}
}

func TestExecEnvDir(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	dir := t.TempDir()
	var out bytes.Buffer
	st, err := subprocess.Run(ctx, h, 0, subprocess.Command{
		Args:   []string{"sh", "-c", `echo "$GREETING $(pwd)"`},
		Env:    map[string]string{"GREETING": "hi", "PATH": "/bin:/usr/bin"},
		Dir:    dir,
		Stdout: &out,
	})
	if err != nil || st != 0 {
		t.Fatal(st, err)
	}
	if out.String() != "hi "+dir+"\n" {
		t.Fatalf("got %q", out.String())
	}
}

func TestExecErrors(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	_, err := subprocess.Exec(ctx, h, 0, subprocess.Command{Args: []string{"fluxgo-no-such-cmd"}})
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing command: %v", err)
	}
	if _, err := subprocess.Exec(ctx, h, 0, subprocess.Command{}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("empty command: %v", err)
	}
	if _, err := subprocess.Exec(ctx, h, 7, subprocess.Command{Args: []string{"true"}}); err == nil {
		t.Fatal("rank 7 of 1 did not fail")
	}
}

// TestStdin pushes a megabyte of binary data through cat, checking
// flow control keeps it intact and in order.
func TestStdin(t *testing.T) {
	inst := rexectest.Start(t, 2)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	data := make([]byte, 1<<20)
	rand.Read(data)
	var out bytes.Buffer
	p, err := subprocess.Exec(ctx, h, 1, subprocess.Command{Args: []string{"cat"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	for b := data; len(b) > 0; {
		n := min(len(b), 10000)
		if _, err := p.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	p.CloseStdin()
	if _, err := p.Write([]byte("x")); !errors.Is(err, subprocess.ErrStdinClosed) {
		t.Fatalf("write after close: %v", err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st != 0 {
		t.Fatal(st, err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("cat returned %d bytes, want %d identical", out.Len(), len(data))
	}
}

// TestWriteToExited checks a writer blocked on credit is released when
// the process ends without reading.
func TestWriteToExited(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	p, err := subprocess.Exec(ctx, h, 0, subprocess.Command{Args: []string{"sleep", "0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, err = p.Write(make([]byte, 32*1024))
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, subprocess.ErrFinished) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer still blocked after the process ended")
	}
}

// lockedBuffer is a bytes.Buffer a test may read while a subprocess's
// output is written to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestKill(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	var out lockedBuffer
	p, err := subprocess.Exec(ctx, h, 0, subprocess.Command{
		Args:   []string{"sh", "-c", "trap 'echo got INT; exit 5' INT; echo ready; while :; do sleep 0.05; done"},
		Stdout: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := subprocess.List(ctx, h, 0)
	if pid, _ := p.Pid(); err != nil || len(ls.Procs) != 1 || ls.Procs[0].Pid != pid {
		t.Fatalf("list %+v %v", ls, err)
	}
	// the trap is set once "ready" is out
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "ready"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line in 10 s: %q", out.String())
		}
	}
	if err := p.Kill(ctx, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code() != 5 {
		t.Fatalf("status %v err %v output %q", st, err, out.String())
	}
	if err := p.Kill(ctx, syscall.SIGINT); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill after exit: %v", err)
	}
}

// TestExecCancelled checks a process whose Exec was abandoned is killed.
func TestExecCancelled(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := subprocess.Exec(ctx, h, 0, subprocess.Command{Args: []string{"sleep", "60"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err := subprocess.List(rexectest.Context(t), h, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandoned process still running: %+v", ls)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrentExec runs many processes from many goroutines on one
// handle.
func TestConcurrentExec(t *testing.T) {
	inst := rexectest.Start(t, 2)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			st, err := subprocess.Run(ctx, h, uint32(i%2), subprocess.Command{Args: []string{"echo", fmt.Sprint(i)}, Stdout: &out})
			if err == nil && (st != 0 || out.String() != fmt.Sprintln(i)) {
				err = fmt.Errorf("proc %d: status %v output %q", i, st, out.String())
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStartOnServe drives processes with Start from a handle's Serve
// goroutine, the way a broker module would: no locks, callbacks in
// order, Write never blocking.
func TestStartOnServe(t *testing.T) {
	inst := rexectest.Start(t, 2)
	h := inst.Handle(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveDone := make(chan struct{})
	go func() {
		h.Serve(ctx)
		close(serveDone)
	}()
	defer func() { cancel(); <-serveDone }()

	const n = 50
	type result struct {
		started bool
		out     bytes.Buffer
		status  subprocess.Status
		err     error
	}
	results := make([]*result, n) // touched only on the Serve goroutine
	finished := make(chan struct{})
	remaining := n
	h.Post(func() {
		for i := range n {
			r := &result{}
			results[i] = r
			p, err := subprocess.Start(h, uint32(i%2), subprocess.Command{Args: []string{"cat"}, Stdout: &r.out}, subprocess.Events{
				Started: func(*subprocess.Process) { r.started = true },
				Done: func(_ *subprocess.Process, st subprocess.Status, err error) {
					r.status, r.err = st, err
					if remaining--; remaining == 0 {
						close(finished)
					}
				},
			})
			if err != nil {
				t.Error(err)
				return
			}
			fmt.Fprintf(p, "line %d\n", i)
			p.CloseStdin()
		}
	})
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("not every process finished")
	}
	done := make(chan struct{})
	h.Post(func() {
		defer close(done)
		for i, r := range results {
			if !r.started || r.err != nil || r.status != 0 || r.out.String() != fmt.Sprintf("line %d\n", i) {
				t.Errorf("proc %d: started %v status %v err %v out %q", i, r.started, r.status, r.err, r.out.String())
			}
		}
	})
	<-done
}

func TestStartExecError(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Serve(ctx)
	got := make(chan error, 1)
	h.Post(func() {
		_, err := subprocess.Start(h, 0, subprocess.Command{Args: []string{"fluxgo-no-such-cmd"}}, subprocess.Events{
			Started: func(*subprocess.Process) { t.Error("Started ran for a failed exec") },
			Done:    func(_ *subprocess.Process, _ subprocess.Status, err error) { got <- err },
		})
		if err != nil {
			got <- err
		}
	})
	if err := <-got; !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("got %v", err)
	}
}

// TestHandleClosed checks the stream of a closed handle ends with an
// error rather than hanging.
func TestHandleClosed(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h, err := flux.Open(inst.URI(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := rexectest.Context(t)
	p, err := subprocess.Exec(ctx, h, 0, subprocess.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if _, err := p.Wait(ctx); err == nil {
		t.Fatal("Wait succeeded on a closed handle")
	}
}

// BenchmarkRunTrue measures how many short processes a client gets
// through one broker's subprocess server.
func BenchmarkRunTrue(b *testing.B) {
	inst := rexectest.Start(b, 1)
	h := inst.Handle(0)
	ctx := context.Background()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st, err := subprocess.Run(ctx, h, 0, subprocess.Command{Args: []string{"/bin/true"}})
			if err != nil || st != 0 {
				b.Error(st, err)
				return
			}
		}
	})
}
