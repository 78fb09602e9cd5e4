package kvsbatch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// writer is a module that writes through a Batch what the test asks.
type writer struct{ do chan func(*Batch) }

func (w *writer) Name() string { return "writer" }

func (w *writer) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	b := New(h, "")
	go func() {
		for {
			select {
			case fn := <-w.do:
				h.Post(func() { fn(b) })
			case <-ctx.Done():
				return
			}
		}
	}()
	return h.Serve(ctx)
}

// startWriter starts a broker with a stand-in KVS and the writer module.
func startWriter(t *testing.T) (*modtest.KVS, *writer) {
	t.Helper()
	fk := modtest.NewKVS()
	w := &writer{do: make(chan func(*Batch))}
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("writer", func() module.Module { return w })
	brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "writer"}}})
	return fk, w
}

func TestBatchMergesWrites(t *testing.T) {
	fk, w := startWriter(t)
	done := make(chan [2]int, 1)
	w.do <- func(b *Batch) {
		b.Append("a.log", []byte("1\n"))
		b.Put("b", []byte("x"))
		b.Append("a.log", []byte("2\n"))
		b.Append("b", []byte("y")) // joins the put: b = "xy"
		b.Unlink("c")
		b.Append("a.log", []byte("3\n")) // not across the unlink
		if b.Len() != 4 {
			t.Errorf("pending ops %d, want 4", b.Len())
		}
		b.AfterCommit(func(err error) {
			if err != nil {
				t.Error(err)
			}
			done <- [2]int{b.Commits, b.Ops}
		})
	}
	select {
	case got := <-done:
		if got != [2]int{1, 4} {
			t.Fatalf("commits, ops = %v, want [1 4]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no commit")
	}
	if v := string(fk.Value("a.log")); v != "1\n2\n3\n" {
		t.Fatalf("a.log = %q", v)
	}
	if v := string(fk.Value("b")); v != "xy" {
		t.Fatalf("b = %q", v)
	}
}

// TestBatchSharedAndOnCommit checks that data handed over without a copy
// is never written to (even where it has room to grow), and that
// OnCommit's function runs when its commit is done, before the waiters,
// and for a flush with nothing to write.
func TestBatchSharedAndOnCommit(t *testing.T) {
	fk, w := startWriter(t)
	shared := append(make([]byte, 0, 64), "1\n"...)
	sharedPut := []byte("x")
	var events []string // on the module's goroutine
	done := make(chan []string, 1)
	w.do <- func(b *Batch) {
		starts := 0
		b.OnCommit = func() func(error) {
			starts++
			n := starts
			return func(err error) { events = append(events, fmt.Sprintf("committed %d %v", n, err)) }
		}
		b.AppendShared("a.log", shared)
		b.Append("a.log", []byte("2\n"))
		b.PutShared("b", sharedPut)
		b.Append("b", []byte("y"))
		b.AfterCommit(func(err error) {
			events = append(events, "waiter 1")
			b.AfterCommit(func(error) { // nothing queued: an empty flush
				done <- append(slices.Clone(events), "waiter 2")
			})
			b.Flush()
		})
	}
	var order []string
	select {
	case order = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit")
	}
	want := []string{"committed 1 <nil>", "waiter 1", "committed 2 <nil>", "waiter 2"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	if got := string(shared[:cap(shared)][:4]); got != "1\n\x00\x00" || string(sharedPut) != "x" {
		t.Fatalf("shared buffers written to: %q, %q", got, sharedPut)
	}
	if v := string(fk.Value("a.log")); v != "1\n2\n" {
		t.Fatalf("a.log = %q", v)
	}
	if v := string(fk.Value("b")); v != "xy" {
		t.Fatalf("b = %q", v)
	}
}
