// Package brokertest runs whole instances of brokers inside the test
// process (unix-socket overlay, real local connectors), so modules and
// routing can be tested quickly and under the race detector.
package brokertest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Instance is a set of in-process brokers.
type Instance struct {
	t       testing.TB
	o       Options
	Brokers []*broker.Broker
	done    []chan int
	dir     string
}

// Options configure an in-process instance.
type Options struct {
	Size     int
	Fanout   uint32
	Registry *module.Registry
	Modules  []broker.ModuleSpec
	Attrs    map[string]string
	Statedir string
}

// Start runs the brokers and waits for them all to join. They shut down
// when the test ends.
func Start(t testing.TB, o Options) *Instance {
	t.Helper()
	if o.Size == 0 {
		o.Size = 1
	}
	if o.Fanout == 0 {
		o.Fanout = 2
	}
	dir, err := os.MkdirTemp("", "fb")
	if err != nil {
		t.Fatal(err)
	}
	inst := &Instance{t: t, o: o, dir: dir}
	for r := 0; r < o.Size; r++ {
		inst.run(r, o.Size)
	}
	for i, b := range inst.Brokers {
		select {
		case <-b.Running():
		case <-time.After(20 * time.Second):
			t.Fatalf("broker %d did not reach run state in 20s", i)
		}
	}
	t.Cleanup(inst.Stop)
	return inst
}

// config is the Config of rank's broker in an instance of size.
func (inst *Instance) config(rank, size int) broker.Config {
	o := inst.o
	cfg := broker.Config{
		Rank:           uint32(rank),
		Size:           uint32(size),
		Fanout:         o.Fanout,
		Rundir:         filepath.Join(inst.dir, strconv.Itoa(rank)),
		Registry:       o.Registry,
		Modules:        o.Modules,
		Attrs:          o.Attrs,
		TBONTimeout:    3 * time.Second,
		ConnectTimeout: 10 * time.Second,
		LogStderrLevel: logLevel(),
	}
	if rank == 0 {
		cfg.Statedir = o.Statedir
	}
	if rank > 0 {
		p := (uint32(rank) - 1) / o.Fanout
		cfg.ParentURI = "ipc://" + filepath.Join(inst.dir, strconv.Itoa(int(p)), "tbon")
	}
	return cfg
}

// run starts rank's broker.
func (inst *Instance) run(rank, size int) *broker.Broker {
	b, err := broker.New(inst.config(rank, size))
	if err != nil {
		inst.t.Fatal(err)
	}
	inst.Brokers = append(inst.Brokers, b)
	done := make(chan int, 1)
	inst.done = append(inst.done, done)
	go func() {
		code, err := b.Run()
		if err != nil {
			inst.t.Errorf("broker %d: %v", b.Rank(), err)
		}
		done <- code
	}()
	return b
}

// Join starts a broker of rank joining the running instance, which it
// grows to size (rank < size; its parent is rank (rank-1)/fanout), and
// waits until it runs. It is appended to Brokers; Exited reports its
// exit.
func (inst *Instance) Join(rank, size int) *broker.Broker {
	inst.t.Helper()
	b := inst.run(rank, size)
	done := inst.done[len(inst.done)-1]
	select {
	case <-b.Running():
	case code := <-done:
		done <- code
		inst.t.Fatalf("joining broker %d exited (%d) instead of running", rank, code)
	case <-time.After(30 * time.Second):
		inst.t.Fatalf("joining broker %d did not reach run state in 30s", rank)
	}
	return b
}

// Exited waits (up to 30 s) for Brokers[i] to exit, as overlay.shrink
// has it do, and returns its exit code.
func (inst *Instance) Exited(i int) (int, bool) {
	select {
	case code := <-inst.done[i]:
		inst.done[i] <- code // for Stop
		return code, true
	case <-time.After(30 * time.Second):
		return 0, false
	}
}

// Stop shuts the instance down and waits for every broker.
func (inst *Instance) Stop() {
	inst.Brokers[0].Shutdown(0)
	for i, d := range inst.done {
		select {
		case <-d:
		case <-time.After(30 * time.Second):
			inst.t.Errorf("broker %d did not exit", i)
		}
	}
	os.RemoveAll(inst.dir)
}

// Handle connects a client to rank's broker, closed when the test ends.
func (inst *Instance) Handle(rank int) *flux.Handle {
	inst.t.Helper()
	h, err := flux.Open(inst.Brokers[rank].LocalURI())
	if err != nil {
		inst.t.Fatal(err)
	}
	inst.t.Cleanup(func() { h.Close() })
	return h
}

// Ctx returns a context that times out in 20 s or when the test ends.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// logLevel is the broker log level copied to stderr: none, unless
// FLUX_TEST_LOG is set to a syslog severity (3 = errors, 7 = debug).
func logLevel() int {
	if v := os.Getenv("FLUX_TEST_LOG"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}
