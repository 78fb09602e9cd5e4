package bothways

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// side is one way of reaching the instance: from a module in the broker
// (attachments travel as Go values) or over the local socket (the
// broker writes them out as JSON).
type side struct {
	name string
	h    *flux.Handle
}

// probe is a module that hands its in-broker handle to the test.
type probe struct{ hs chan *flux.Handle }

func (*probe) Name() string { return "probe" }

func (p *probe) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	p.hs <- h
	return h.Serve(ctx)
}

// instance starts one broker with the default module set less the names
// in leave, plus the modules in extra (loaded last), and returns it with
// a socket handle.
func instance(t *testing.T, leave []string, extra map[string]module.Factory) (*brokertest.Instance, *flux.Handle) {
	t.Helper()
	reg := modules.Registry()
	var mods []broker.ModuleSpec
	for _, m := range modules.DefaultRC1() {
		if !slices.Contains(leave, m.Name) {
			mods = append(mods, m)
		}
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := reg.Register(name, extra[name]); err != nil {
			t.Fatal(err)
		}
		mods = append(mods, broker.ModuleSpec{Name: name, Ranks: "0"})
	}
	inst := brokertest.Start(t, brokertest.Options{Registry: reg, Modules: mods})
	return inst, inst.Handle(0)
}

// sides starts an instance with a probe module and returns its two
// sides, the socket's first.
func sides(t *testing.T, leave []string) []side {
	t.Helper()
	p := &probe{hs: make(chan *flux.Handle, 1)}
	_, sock := instance(t, leave, map[string]module.Factory{"probe": func() module.Module { return p }})
	select {
	case h := <-p.hs:
		return []side{{"socket", sock}, {"in-broker", h}}
	case <-time.After(20 * time.Second):
		t.Fatal("the probe module did not start")
	}
	return nil
}

// ctx times out in 30 s or when the test ends.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// collector gathers what a callback run on another goroutine produces.
type collector[T any] struct {
	mu    sync.Mutex
	items []T
	more  chan struct{}
}

func newCollector[T any]() *collector[T] { return &collector[T]{more: make(chan struct{}, 1)} }

func (c *collector[T]) add(v T) {
	c.mu.Lock()
	c.items = append(c.items, v)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// wait returns the items once done accepts them, or fails the test when
// ctx ends first.
func (c *collector[T]) wait(t *testing.T, ctx context.Context, what string, done func([]T) bool) []T {
	t.Helper()
	for {
		c.mu.Lock()
		items := slices.Clone(c.items)
		c.mu.Unlock()
		if done(items) {
			return items
		}
		select {
		case <-c.more:
		case <-ctx.Done():
			t.Fatalf("%s: still waiting after %d items: %v", what, len(items), ctx.Err())
		}
	}
}

func owner() uint32 { return uint32(os.Getuid()) }

func diffLines(a, b []string) string {
	var sb strings.Builder
	for i := 0; i < max(len(a), len(b)); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			sb.WriteString("\n  - " + x + "\n  + " + y)
		}
	}
	return sb.String()
}
