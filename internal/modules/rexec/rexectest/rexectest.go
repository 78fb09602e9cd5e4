// Package rexectest runs in-process fluxgo instances with the rexec
// module loaded, for tests of the module and of its clients under the
// race detector.
package rexectest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/rexec"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Instance is size brokers in the test process, each with rexec loaded.
type Instance struct {
	t       testing.TB
	brokers []*broker.Broker
	done    []chan int
}

// Start starts an instance of size brokers whose rexec modules get args;
// it is shut down when the test ends.
func Start(t testing.TB, size int, args ...string) *Instance {
	t.Helper()
	dir, err := os.MkdirTemp("", "rexec")
	if err != nil {
		t.Fatal(err)
	}
	reg := module.NewRegistry()
	if err := reg.Register("rexec", rexec.New); err != nil {
		t.Fatal(err)
	}
	mods := []broker.ModuleSpec{{Name: "rexec", Ranks: "all", Args: args}}
	inst := &Instance{t: t}
	for r := 0; r < size; r++ {
		cfg := broker.Config{
			Rank:           uint32(r),
			Size:           uint32(size),
			Fanout:         2,
			Rundir:         filepath.Join(dir, strconv.Itoa(r)),
			Registry:       reg,
			Modules:        mods,
			TBONTimeout:    5 * time.Second,
			ConnectTimeout: 10 * time.Second,
			LogStderrLevel: -1,
		}
		if r > 0 {
			cfg.ParentURI = "ipc://" + filepath.Join(dir, strconv.Itoa((r-1)/2), "tbon")
		}
		b, err := broker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		inst.brokers = append(inst.brokers, b)
		inst.done = append(inst.done, done)
		go func() {
			code, err := b.Run()
			if err != nil {
				t.Errorf("broker %d: %v", b.Rank(), err)
			}
			done <- code
		}()
	}
	select {
	case <-inst.brokers[0].Joined():
	case <-time.After(20 * time.Second):
		t.Fatal("brokers did not join in 20s")
	}
	t.Cleanup(func() {
		inst.brokers[0].Shutdown(0)
		for i, d := range inst.done {
			select {
			case <-d:
			case <-time.After(30 * time.Second):
				t.Errorf("broker %d did not exit", i)
			}
		}
		os.RemoveAll(dir)
	})
	// Joining does not wait for rc1: wait until every rank serves rexec.
	h := inst.Handle(0)
	ctx := Context(t)
	for r := 0; r < size; r++ {
		for {
			err := h.Call(ctx, "rexec.list", uint32(r), nil, nil)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("rexec on rank %d: %v", r, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return inst
}

// URI is rank's local connector URI.
func (inst *Instance) URI(rank int) string { return inst.brokers[rank].LocalURI() }

// Handle connects a client to rank's broker; closed when the test ends.
func (inst *Instance) Handle(rank int) *flux.Handle {
	inst.t.Helper()
	h, err := flux.Open(inst.brokers[rank].LocalURI())
	if err != nil {
		inst.t.Fatal(err)
	}
	inst.t.Cleanup(func() { h.Close() })
	return h
}

// Context is a context that ends with the test (or after 30s).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
