package broker

import (
	"context"
	"encoding/json"
	"errors"
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
}

func (m confModule) Name() string { return m.name }
func (m confModule) Run(ctx context.Context, h *flux.Handle, args []string) error {
	h.HandleFunc(m.name+".ok", func(r *flux.Request) { r.Respond(nil) })
	if !m.plain {
		h.HandleFunc(m.name+".config-reload", func(r *flux.Request) {
			var c map[string]any
			if r.Decode(&c) != nil {
				return
			}
			if _, bad := c["bad"]; bad && m.picky {
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
