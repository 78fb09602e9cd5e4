package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// The instance configuration at run time (flux-config(1)).
//
//	config.get     the configuration object (anyone)
//	config.reload  read the configuration path again (owner)
//	config.load    replace the configuration with the payload (owner)
//
// A new configuration is checked (Config.CheckTOML, or the checks
// Config.ReloadTOML makes), stored, and then offered to every module
// loaded on this broker as a NAME.config-reload request whose payload is
// the whole object, as flux-core's broker does. A module that keeps no
// configuration does not answer it (ENOSYS) and is left alone. When a
// module refuses the new configuration, the modules that took it get
// the old one back, the broker keeps the old one, and the requestor gets
// the module's error: a reload changes everything or nothing.
//
// The configuration changes on rank 0 only, as in flux-core: the other
// brokers refuse reload and load, take their parent's configuration when
// they join (syncConfig, before their modules load), and follow rank 0's
// changes through the config.updated event, which rank 0 publishes
// before it answers, so a request sent after the answer finds every
// broker with the new configuration stored. Tables read once at start,
// such as [bootstrap] and [resource], take effect at the next start.

// moduleReloadTimeout bounds how long a module may take to answer
// config-reload.
const moduleReloadTimeout = 30 * time.Second

// configState is the broker's current configuration.
type configState struct {
	reloading sync.Mutex // held across a whole reload: one at a time
	mu        sync.Mutex // guards table
	table     map[string]any
	offered   []byte // the configuration a follower offered its modules last
	// synced is closed once a follower has its parent's configuration
	// (at once on rank 0); config.get waits for it
	synced chan struct{}
}

func (c *configState) get() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.table
}

func (c *configState) set(t map[string]any) {
	c.mu.Lock()
	c.table = t
	c.mu.Unlock()
}

// configGet answers the instance's TOML configuration as a JSON object
// (flux-core's config.get; empty when the instance has none).
func (s *builtins) configGet(r *flux.Request) {
	select {
	case <-s.conf.synced:
	default:
		// a follower answers with its parent's configuration only
		go func() {
			select {
			case <-s.conf.synced:
				s.configGet(r)
			case <-s.b.ctx.Done():
				r.Errorf(syscall.ENOSYS, "broker is shutting down")
			}
		}()
		return
	}
	cfg := s.conf.get()
	if cfg == nil {
		cfg = map[string]any{}
	}
	r.Respond(withReals(cfg).(map[string]any))
}

// ConfigJSON encodes a TOML configuration table as config.get answers
// it: floats stay JSON reals (5.0) even when integral.
func ConfigJSON(table map[string]any) ([]byte, error) {
	return json.Marshal(withReals(table))
}

// withReals returns a copy of v with its float64 values as jsonwire.Real.
func withReals(v any) any {
	switch x := v.(type) {
	case float64:
		return jsonwire.Real(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = withReals(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = withReals(e)
		}
		return a
	case []map[string]any: // TOML arrays of tables
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = withReals(e)
		}
		return a
	}
	return v
}

// TypedNumbers returns v, decoded with json.Decoder.UseNumber, with its
// numbers as TOML decoding makes them: int64 for an integer, float64 for
// a real (one written with a fraction or exponent).
func TypedNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if n, err := x.Int64(); err == nil {
				return n
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = TypedNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = TypedNumbers(e)
		}
	}
	return v
}

// configReload reads the configuration path again (flux config reload).
func (s *builtins) configReload(r *flux.Request) {
	if !requireOwner(r) || !s.onLeader(r) {
		return
	}
	go func() {
		table := map[string]any{}
		if s.b.cfg.ReloadTOML != nil {
			t, err := s.b.cfg.ReloadTOML()
			if err != nil {
				r.Errorf(syscall.EINVAL, "config reload: %v", err)
				return
			}
			table = t
		}
		s.applyConfig(r, table)
	}()
}

// configLoad replaces the configuration with the request's object (flux
// config load).
func (s *builtins) configLoad(r *flux.Request) {
	if !requireOwner(r) || !s.onLeader(r) {
		return
	}
	var table map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Msg.JSON()))
	dec.UseNumber()
	if err := dec.Decode(&table); err != nil && len(r.Msg.JSON()) > 0 {
		r.Errorf(syscall.EPROTO, "config load: %v", err)
		return
	}
	TypedNumbers(table)
	if table == nil {
		r.Errorf(syscall.EPROTO, "config load: the configuration must be a JSON object")
		return
	}
	if s.b.cfg.CheckTOML != nil {
		if err := s.b.cfg.CheckTOML(table); err != nil {
			r.Errorf(syscall.EINVAL, "config load: %v", err)
			return
		}
	}
	go s.applyConfig(r, table)
}

// applyConfig makes table the configuration of this broker and its
// modules, or of none of them.
func (s *builtins) applyConfig(r *flux.Request, table map[string]any) {
	s.conf.reloading.Lock()
	defer s.conf.reloading.Unlock()
	payload, err := json.Marshal(table)
	if err != nil {
		r.Errorf(syscall.EINVAL, "config: %v", err)
		return
	}
	old := s.conf.get()
	if old == nil {
		old = map[string]any{}
	}
	oldPayload, _ := json.Marshal(old)
	// stored first: a module that starts meanwhile reads the new one
	s.conf.set(table)
	offered := s.b.modules.services()
	took, err := s.offerConfig(offered, payload)
	if err != nil {
		s.conf.set(old)
		// back to the old one: the modules that took the new one, and
		// those loaded meanwhile, which may have read it at start
		if _, rerr := s.offerConfig(append(took, newServices(offered, s.b.modules.services())...), oldPayload); rerr != nil {
			s.b.log.Error("restoring the configuration of modules after a refused reload", "err", rerr)
		}
		r.RespondError(err)
		return
	}
	s.b.applyAccess(table)
	s.b.log.Info("configuration updated")
	s.noteConfig(table)
	if ev, err := ConfigJSON(table); err == nil {
		if err := s.h.Publish(configUpdatedTopic, json.RawMessage(ev), false); err != nil {
			s.b.log.Error("publishing the new configuration to the other brokers", "err", err)
		}
	}
	for _, t := range startOnlyTables {
		if !reflect.DeepEqual(old[t], table[t]) {
			s.b.log.Warn(fmt.Sprintf("configuration: the [%s] table changed; it takes effect when the broker restarts", t))
		}
	}
	r.Respond(nil)
}

// onLeader answers EINVAL and returns false on a broker other than rank 0.
func (s *builtins) onLeader(r *flux.Request) bool {
	if s.b.rank != 0 {
		r.Errorf(syscall.EINVAL, "configuration can only be changed on rank 0")
		return false
	}
	return true
}

// configUpdatedTopic is the event rank 0 publishes with each new
// configuration.
const configUpdatedTopic = "config.updated"

// followConfig makes a broker other than rank 0 take each configuration
// rank 0 publishes.
func (s *builtins) followConfig(ctx context.Context) {
	err := s.h.OnOwnerEvent(ctx, configUpdatedTopic, func(m *flux.Message) {
		table, err := decodeConfig(m.JSON())
		if err != nil {
			s.b.log.Error("config.updated: " + err.Error())
			return
		}
		s.conf.set(table) // at once: a config.get that follows sees it
		go s.offerFollowed()
	})
	if err != nil && ctx.Err() == nil {
		s.b.log.Error("subscribing to configuration updates", "err", err)
	}
}

// offerFollowed offers the configuration stored last to this broker's
// modules (a follower's, which cannot refuse what rank 0 took: a module
// that does is logged).
func (s *builtins) offerFollowed() {
	s.conf.reloading.Lock()
	defer s.conf.reloading.Unlock()
	table := s.conf.get()
	payload, err := json.Marshal(table)
	if err != nil || bytes.Equal(payload, s.conf.offered) {
		return
	}
	s.conf.offered = payload
	s.b.applyAccess(table)
	if _, err := s.offerConfig(s.b.modules.services(), payload); err != nil {
		s.b.log.Error("configuration from rank 0 refused", "err", err)
		return
	}
	s.b.log.Info("configuration updated from rank 0")
}

// syncConfig replaces a follower's configuration with its parent's, as
// it joins and before its modules load.
func (s *builtins) syncConfig() error {
	defer close(s.conf.synced)
	ctx, cancel := context.WithTimeout(s.b.ctx, moduleReloadTimeout)
	defer cancel()
	f, err := s.h.RPCRaw("config.get", flux.NodeidUpstream, nil, 0)
	if err != nil {
		return err
	}
	m, err := f.Get(ctx)
	if err != nil {
		return err
	}
	table, err := decodeConfig(m.JSON())
	if err != nil {
		return err
	}
	s.conf.set(table)
	s.b.applyAccess(table)
	return nil
}

// decodeConfig decodes a configuration object as config.get answers it,
// TOML's number types kept.
func decodeConfig(payload []byte) (map[string]any, error) {
	var table map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&table); err != nil {
		return nil, fmt.Errorf("configuration: %v", err)
	}
	if table == nil {
		return nil, errors.New("configuration: not a JSON object")
	}
	TypedNumbers(table)
	return table, nil
}

// noteConfig logs what the configuration sets that is not acted on.
func (s *builtins) noteConfig(table map[string]any) {
	if s.b.cfg.NoteTOML == nil || s.b.rank != 0 {
		return
	}
	for _, n := range s.b.cfg.NoteTOML(table) {
		s.b.log.Warn(n)
	}
}

// newServices returns the services of now that are not in before.
func newServices(before, now []string) []string {
	var added []string
	for _, svc := range now {
		if !slices.Contains(before, svc) {
			added = append(added, svc)
		}
	}
	return added
}

// startOnlyTables are read when the broker starts, not on a reload.
var startOnlyTables = []string{"bootstrap", "resource"}

// offerConfig sends payload to each service's config-reload method at
// once and waits for all. It returns the services that took it and the
// first refusal (in services' order).
func (s *builtins) offerConfig(services []string, payload []byte) ([]string, error) {
	ctx, cancel := context.WithTimeout(s.b.ctx, moduleReloadTimeout)
	defer cancel()
	errs := make([]error, len(services))
	handled := make([]bool, len(services))
	var wg sync.WaitGroup
	for i, svc := range services {
		f, err := s.h.RPCRaw(svc+".config-reload", flux.NodeidAny, payload, 0)
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Get(ctx)
			switch {
			case errors.Is(err, syscall.ENOSYS):
				// keeps no configuration
			case err != nil:
				errs[i] = err
			default:
				handled[i] = true
			}
		}()
	}
	wg.Wait()
	var took []string
	var first error
	for i, svc := range services {
		if handled[i] {
			took = append(took, svc)
		}
		if errs[i] != nil && first == nil {
			first = flux.NewError(flux.ErrnoOf(errs[i]), fmt.Sprintf("%s: %s", svc, flux.ErrorText(errs[i])))
		}
	}
	return took, first
}
