package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// confModule keeps the configurations it is offered; it refuses those
// with a key named "bad" when picky. Modules that set no config-reload
// handler (plain) are left out of reloads.
type confModule struct {
	name  string
	picky bool
	plain bool
	mu    *sync.Mutex
	seen  *[]string
	// hold, if set, delays a picky module's refusal until it is closed
	hold chan struct{}
	// readAtStart records config.get at start, as modules that read
	// their configuration do
	readAtStart bool
}

func (m confModule) Name() string { return m.name }
func (m confModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	h.HandleFunc(m.name+".ok", func(r *flux.Request) { r.Respond(nil) })
	if m.readAtStart {
		var c json.RawMessage
		if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &c); err != nil {
			return err
		}
		m.mu.Lock()
		*m.seen = append(*m.seen, string(c))
		m.mu.Unlock()
	}
	if !m.plain {
		h.HandleFunc(m.name+".config-reload", func(r *flux.Request) {
			var c map[string]any
			if r.Decode(&c) != nil {
				return
			}
			if _, bad := c["bad"]; bad && m.picky {
				if m.hold != nil {
					<-m.hold
				}
				r.Errorf(syscall.EINVAL, "bad is not allowed")
				return
			}
			m.mu.Lock()
			*m.seen = append(*m.seen, string(r.Msg.JSON()))
			m.mu.Unlock()
			r.Respond(nil)
		})
	}
	return h.Serve(ctx)
}

// TestConfigLoad: config.load offers the new configuration to every
// module; when one refuses, the others get the old one back and
// config.get still answers the old one.
func TestConfigLoad(t *testing.T) {
	var mu sync.Mutex
	var taken []string
	reg := module.NewRegistry()
	reg.Register("taker", func() module.Module { return confModule{name: "taker", mu: &mu, seen: &taken} })
	reg.Register("picky", func() module.Module { return confModule{name: "picky", picky: true, mu: &mu, seen: new([]string)} })
	reg.Register("plain", func() module.Module { return confModule{name: "plain", plain: true} })
	ti := startInProcess(t, 1, 2, reg, []ModuleSpec{{Name: "taker"}, {Name: "picky"}, {Name: "plain"}})
	h := ti.handle(0)
	for _, m := range []string{"taker", "picky", "plain"} {
		deadline := time.Now().Add(10 * time.Second)
		for h.Call(ctx(t), m+".ok", flux.NodeidAny, nil, nil) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("module %s did not load", m)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	get := func() string {
		t.Helper()
		var c json.RawMessage
		if err := h.Call(ctx(t), "config.get", flux.NodeidAny, nil, &c); err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	if err := h.Call(ctx(t), "config.load", flux.NodeidAny, map[string]any{"x": 1}, nil); err != nil {
		t.Fatalf("config.load: %v", err)
	}
	if got := get(); got != `{"x":1}` {
		t.Fatalf("config.get after load: %s", got)
	}
	err := h.Call(ctx(t), "config.load", flux.NodeidAny, map[string]any{"bad": true}, nil)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "picky: bad is not allowed") {
		t.Fatalf("config.load refused by a module: %v", err)
	}
	if got := get(); got != `{"x":1}` {
		t.Fatalf("config.get after a refused load: %s", got)
	}
	mu.Lock()
	got := strings.Join(taken, " ")
	mu.Unlock()
	if got != `{"x":1} {"bad":true} {"x":1}` {
		t.Fatalf("taker was offered %s, want the new configuration, the refused one, then the old one back", got)
	}
	// no configuration path: a reload empties the configuration
	if err := h.Call(ctx(t), "config.reload", flux.NodeidAny, nil, nil); err != nil {
		t.Fatalf("config.reload: %v", err)
	}
	if got := get(); got != `{}` {
		t.Fatalf("config.get after reload without a path: %s", got)
	}
	err = h.Call(ctx(t), "config.load", flux.NodeidAny, []int{1}, nil)
	if !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("config.load of an array: %v", err)
	}
}

// TestConfigLoadRollbackReachesNewModules: a module loaded while a
// reload is under way reads the new configuration; when the reload is
// refused, it gets the old one back like the modules that took it.
func TestConfigLoadRollbackReachesNewModules(t *testing.T) {
	var mu sync.Mutex
	var lateSeen []string
	hold := make(chan struct{})
	reg := module.NewRegistry()
	reg.Register("picky", func() module.Module {
		return confModule{name: "picky", picky: true, hold: hold, mu: &mu, seen: new([]string)}
	})
	reg.Register("late", func() module.Module {
		return confModule{name: "late", readAtStart: true, mu: &mu, seen: &lateSeen}
	})
	ti := startInProcess(t, 1, 2, reg, []ModuleSpec{{Name: "picky"}})
	h := ti.handle(0)
	deadline := time.Now().Add(10 * time.Second)
	for h.Call(ctx(t), "picky.ok", flux.NodeidAny, nil, nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("module picky did not load")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Call(ctx(t), "config.load", flux.NodeidAny, map[string]any{"x": 1}, nil); err != nil {
		t.Fatalf("config.load: %v", err)
	}
	f, err := h.RPC("config.load", flux.NodeidAny, map[string]any{"bad": true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// the refused configuration is stored while picky thinks it over
	for {
		var c json.RawMessage
		if err := h.Call(ctx(t), "config.get", flux.NodeidAny, nil, &c); err != nil {
			t.Fatal(err)
		}
		if string(c) == `{"bad":true}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("config.get during the reload: %s", c)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.Call(ctx(t), "module.load", flux.NodeidAny, map[string]any{"name": "late"}, nil); err != nil {
		t.Fatalf("module.load late: %v", err)
	}
	for h.Call(ctx(t), "late.ok", flux.NodeidAny, nil, nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("module late did not load")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(hold)
	if _, err := f.Get(ctx(t)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("config.load refused by picky: %v", err)
	}
	mu.Lock()
	got := strings.Join(lateSeen, " ")
	mu.Unlock()
	if got != `{"bad":true} {"x":1}` {
		t.Fatalf("late saw %s, want the refused configuration at start, then the old one back", got)
	}
}

// TestConfigFollowsRankZero: a follower starts with its parent's
// configuration rather than its own, refuses load and reload, and takes
// each configuration rank 0 loads, offering it to its modules.
func TestConfigFollowsRankZero(t *testing.T) {
	var mu sync.Mutex
	var taken []string
	reg := module.NewRegistry()
	reg.Register("taker", func() module.Module { return confModule{name: "taker", mu: &mu, seen: &taken} })
	ti := startInProcessWith(t, 4, 2, reg, nil, func(c *Config) {
		c.TOML = map[string]any{"who": fmt.Sprintf("rank %d", c.Rank)}
	})
	get := func(rank int) string {
		t.Helper()
		var c json.RawMessage
		if err := ti.handle(rank).Call(ctx(t), "config.get", flux.NodeidAny, nil, &c); err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	if got := get(3); got != `{"who":"rank 0"}` {
		t.Fatalf("rank 3 started with %s, want rank 0's configuration", got)
	}
	h3 := ti.handle(3)
	if err := h3.Call(ctx(t), "module.load", flux.NodeidAny, map[string]any{"name": "taker"}, nil); err != nil {
		t.Fatalf("loading taker on rank 3: %v", err)
	}
	for start := time.Now(); h3.Call(ctx(t), "taker.ok", flux.NodeidAny, nil, nil) != nil; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("taker did not load on rank 3")
		}
	}
	for _, method := range []string{"config.load", "config.reload"} {
		err := ti.handle(1).Call(ctx(t), method, flux.NodeidAny, map[string]any{"x": 1}, nil)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "only be changed on rank 0") {
			t.Errorf("%s on rank 1: %v, want EINVAL", method, err)
		}
	}
	if err := ti.handle(0).Call(ctx(t), "config.load", flux.NodeidAny, map[string]any{"x": 2}, nil); err != nil {
		t.Fatalf("config.load on rank 0: %v", err)
	}
	// the event reaches rank 3 through rank 1; this handle's request
	// does not follow it, so wait for it
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(taken, " ")
		mu.Unlock()
		if got == `{"x":2}` && get(3) == `{"x":2}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 3: config %s, taker offered %q; want {\"x\":2}", get(3), got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
