package flux_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// open connects to uri for the rest of the test.
func open(t *testing.T, uri string) *flux.Handle {
	t.Helper()
	h, err := flux.Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// sink registers a service on its own handle that never answers, and
// returns a channel of the requests it got.
func sink(t *testing.T, uri, name string) <-chan *flux.Request {
	t.Helper()
	h := open(t, uri)
	got := make(chan *flux.Request, 16)
	h.HandleFunc(name+".*", func(r *flux.Request) { got <- r })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.Serve(ctx)
	if err := h.RegisterService(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return got
}

func getRank(h *flux.Handle, ctx context.Context) (string, error) {
	var resp struct {
		Value string `json:"value"`
	}
	err := h.Call(ctx, "attr.get", flux.NodeidAny, map[string]string{"name": "rank"}, &resp)
	return resp.Value, err
}

// Goroutines waiting on one handle take turns reading the connection:
// every response reaches its caller, whoever read it.
func TestDirectReadTurns(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	h := open(t, inst.URI)

	calls := inParallel(8, func(int) error {
		for i := 0; i < 300; i++ {
			if v, err := getRank(h, context.Background()); err != nil || v != "0" {
				return fmt.Errorf("call %d: %q, %v", i, v, err)
			}
		}
		return nil
	})
	// A stream read with Next alongside the calls.
	f, err := h.RPC("broker.ping", flux.NodeidAny, map[string]int{"seq": 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	calls.check(t)
}

// A subscription made while other goroutines read for themselves gets
// every event, and the calls go on.
func TestDirectReadThenSubscribe(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	h := open(t, inst.URI)
	ctx := context.Background()

	stop := make(chan struct{})
	callErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				callErr <- nil
				return
			default:
			}
			if _, err := getRank(h, ctx); err != nil {
				callErr <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	sub, err := h.Subscribe(ctx, "readtest.")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := h.PublishSync(ctx, fmt.Sprintf("readtest.%d", i), nil, false); err != nil {
			t.Fatal(err)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		m, err := sub.Next(tctx)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := fmt.Sprintf("readtest.%d", i); m.Topic != want {
			t.Fatalf("event %d is %s, want %s", i, m.Topic, want)
		}
	}
	close(stop)
	if err := <-callErr; err != nil {
		t.Fatalf("calls during the switch: %v", err)
	}
}

// A wait that times out while reading the connection itself (it sleeps
// in poll(2) on the socket and its context's wake-up) ends with the
// deadline; the handle keeps working afterwards.
func TestDirectReadTimeout(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	reqs := sink(t, inst.URI, "readsink")
	h := open(t, inst.URI)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := h.Call(ctx, "readsink.hang", flux.NodeidAny, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call to a service that never answers: %v, want a deadline error", err)
	}
	<-reqs
	if v, err := getRank(h, context.Background()); err != nil || v != "0" {
		t.Fatalf("after the timeout: %q, %v", v, err)
	}
}

// A reading wait canceled while others wait their turn: it ends with its
// context's error, the others get their answers (read by whoever leads
// next), and the connection's framing is intact for later calls.
func TestDirectReadCancelHandsOver(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	reqs := sink(t, inst.URI, "readsink")
	h := open(t, inst.URI)
	ctx, cancel := context.WithCancel(context.Background())
	hung := make(chan error, 1)
	go func() { hung <- h.Call(ctx, "readsink.hang", flux.NodeidAny, nil, nil) }()
	<-reqs
	others := inParallel(4, func(int) error {
		for i := 0; i < 50; i++ {
			if v, err := getRank(h, context.Background()); err != nil || v != "0" {
				return fmt.Errorf("call %d: %q, %v", i, v, err)
			}
		}
		return nil
	})
	cancel()
	select {
	case err := <-hung:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled call: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceling a call that reads the connection did not end it")
	}
	others.check(t)
	for i := 0; i < 20; i++ {
		tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err := getRank(h, tctx)
		tcancel()
		if err != nil || v != "0" {
			t.Fatalf("call %d after the cancel: %q, %v", i, v, err)
		}
	}
}

// Closing the handle ends a wait that is reading the connection itself.
func TestDirectReadClose(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	reqs := sink(t, inst.URI, "readsink")
	h, err := flux.Open(inst.URI)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Call(context.Background(), "readsink.hang", flux.NodeidAny, nil, nil) }()
	<-reqs
	h.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("call on a closed handle succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call blocked reading the connection did not end when the handle closed")
	}
}

// Goroutines mixing plain calls, calls that can time out and finite
// streams on one handle: every call gets its answer and no stream loses
// its end, whoever reads the connection at the time.
func TestDirectReadMixed(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	h := open(t, inst.URI)
	inParallel(6, func(g int) error {
		for i := 0; i < 60; i++ {
			switch (g + i) % 3 {
			case 0:
				if v, err := getRank(h, context.Background()); err != nil || v != "0" {
					return fmt.Errorf("call: %q, %v", v, err)
				}
			case 1:
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				v, err := getRank(h, ctx)
				cancel()
				if err != nil || v != "0" {
					return fmt.Errorf("call with a deadline: %q, %v", v, err)
				}
			case 2:
				// the log's backlog, then the end of the stream
				f, err := h.RPC("log.dmesg", flux.NodeidAny, map[string]bool{"follow": false}, flux.Streaming)
				if err != nil {
					return err
				}
				for {
					_, err := f.Next(context.Background())
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						return fmt.Errorf("log.dmesg stream: %v", err)
					}
				}
			}
		}
		return nil
	}).check(t)
}

// parallel is goroutines running a test's calls (inParallel).
type parallel struct {
	done chan struct{}
	errs chan error
}

// inParallel runs fn(0) ... fn(n-1) on goroutines of their own.
func inParallel(n int, fn func(g int) error) *parallel {
	p := &parallel{done: make(chan struct{}), errs: make(chan error, n)}
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(g); err != nil {
				p.errs <- err
			}
		}()
	}
	go func() { wg.Wait(); close(p.done) }()
	return p
}

// check waits (up to 60 s) for the goroutines and reports their errors.
func (p *parallel) check(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("calls on one handle did not finish in 60 s")
	}
	close(p.errs)
	for err := range p.errs {
		t.Error(err)
	}
}
