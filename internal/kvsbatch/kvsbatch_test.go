package kvsbatch

import (
	"context"
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

func TestBatchMergesWrites(t *testing.T) {
	fk := modtest.NewKVS()
	w := &writer{do: make(chan func(*Batch))}
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("writer", func() module.Module { return w })
	brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "writer"}}})
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
