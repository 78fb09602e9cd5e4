// Package module defines what a broker module is: a named service that
// runs in the broker process on its own goroutine with its own Flux
// handle. Modules talk to the rest of the instance only through messages,
// so a module package imports pkg/flux and this package, never the broker.
package module

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Module is a broker module. Run serves until ctx is cancelled (module
// removal or broker shutdown) and returns nil, or returns an error when
// it fails; either way the broker unloads it. The broker registers the
// module's name as a service before Run is called, so requests for
// "name.*" reach h.
type Module interface {
	Name() string
	Run(ctx context.Context, h *flux.Handle, args []string) error
}

// Factory makes a new instance of a module.
type Factory func() Module

// Registry maps module names to factories.
type Registry struct {
	m map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: make(map[string]Factory)} }

// Register adds a factory; registering a name twice is an error.
func (r *Registry) Register(name string, f Factory) error {
	if _, dup := r.m[name]; dup {
		return fmt.Errorf("module %q registered twice", name)
	}
	r.m[name] = f
	return nil
}

// Lookup returns the factory for name.
func (r *Registry) Lookup(name string) (Factory, bool) {
	f, ok := r.m[name]
	return f, ok
}

// Names returns the registered names in order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BrokerStopping reports whether the broker of h is shutting down, rather
// than only the module being removed (flux module remove|reload): what a
// module leaves behind at unload may differ. It asks the broker (the
// state attribute changes, so the handle's attribute cache is not used);
// a broker that does not answer is taken to be stopping.
func BrokerStopping(h *flux.Handle) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(ctx, "attr.get", flux.NodeidAny, map[string]string{"name": "broker.state"}, &resp); err != nil {
		return true
	}
	switch resp.Value {
	case "shutdown", "finalize", "exit":
		return true
	}
	return false
}
