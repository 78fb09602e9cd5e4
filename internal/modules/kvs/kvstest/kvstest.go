// Package kvstest runs the kvs and kvs-watch modules in-process for
// tests, on top of an in-memory stand-in for the content service (RFC 10
// content.load/store/flush and checkpoint-get/put), so the KVS is tested
// on its own and under the race detector. The stand-in's store outlives
// an instance: start a second instance on the same Store to test restart.
package kvstest

import (
	"context"
	"crypto/sha1"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/kvs"
	"github.com/fluxgo/fluxgo/internal/modules/kvswatch"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// Store is the content of the stand-in content service, shared by every
// rank's instance of it (SHA-1 digests).
type Store struct {
	mu          sync.Mutex
	blobs       map[string][]byte
	checkpoints map[string]json.RawMessage
	// NoBacking makes content.flush answer ENOSYS, as rank 0's content
	// service does without a backing store.
	NoBacking bool
	// FailStores makes content.store fail with EIO.
	FailStores atomic.Bool

	Loads, Stores int // requests served
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{blobs: map[string][]byte{}, checkpoints: map[string]json.RawMessage{}}
}

// Len returns the number of blobs stored.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.blobs)
}

// Checkpoint returns the value stored under a checkpoint key.
func (s *Store) Checkpoint(key string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpoints[key]
}

// Module returns a "content" module serving s.
func (s *Store) Module() module.Module { return &contentModule{s: s} }

type contentModule struct{ s *Store }

func (*contentModule) Name() string { return "content" }

func (m *contentModule) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	s := m.s
	h.HandleFunc("content.load", func(r *flux.Request) {
		s.mu.Lock()
		data, ok := s.blobs[string(r.Msg.Payload)]
		s.Loads++
		s.mu.Unlock()
		if !ok {
			r.Errorf(syscall.ENOENT, "content.load: no such blob")
			return
		}
		r.RespondRaw(data)
	})
	// store keeps blobs and answers their digests, concatenated (one
	// for content.store)
	store := func(r *flux.Request, blobs [][]byte) {
		if s.FailStores.Load() {
			r.Errorf(syscall.EIO, "%s: injected failure", r.Topic())
			return
		}
		var digests []byte
		s.mu.Lock()
		for _, b := range blobs {
			data := append([]byte(nil), b...)
			d := sha1.Sum(data)
			s.blobs[string(d[:])] = data
			s.Stores++
			digests = append(digests, d[:]...)
		}
		s.mu.Unlock()
		r.RespondRaw(digests)
	}
	h.HandleFunc("content.store", func(r *flux.Request) { store(r, [][]byte{r.Msg.Payload}) })
	h.HandleFunc("content.store-batch", func(r *flux.Request) {
		blobs, _, _, err := fluxcontent.RequestBlobs(r.Msg)
		if err != nil {
			r.RespondError(err)
			return
		}
		store(r, blobs)
	})
	h.HandleFunc("content.flush", func(r *flux.Request) {
		if s.NoBacking {
			r.Errorf(syscall.ENOSYS, "no backing store")
			return
		}
		r.Respond(nil)
	})
	h.HandleFunc("content.checkpoint-put", func(r *flux.Request) {
		var req struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if r.Decode(&req) != nil {
			return
		}
		s.mu.Lock()
		s.checkpoints[req.Key] = req.Value
		s.mu.Unlock()
		r.Respond(nil)
	})
	h.HandleFunc("content.checkpoint-get", func(r *flux.Request) {
		var req struct {
			Key string `json:"key"`
		}
		if r.Decode(&req) != nil {
			return
		}
		s.mu.Lock()
		v, ok := s.checkpoints[req.Key]
		s.mu.Unlock()
		if !ok {
			r.Errorf(syscall.ENOENT, "no checkpoint %s", req.Key)
			return
		}
		r.Respond(map[string]json.RawMessage{"value": v})
	})
	return h.Serve(ctx)
}

// Options configure an instance.
type Options struct {
	Size    int      // brokers (default 1)
	Store   *Store   // content (default: a new one)
	KVSArgs []string // kvs module arguments
	NoWatch bool     // don't load kvs-watch
	// Extra are more modules (name: factory), loaded on every rank after
	// the KVS, in name order.
	Extra map[string]module.Factory
}

// Start runs an in-process instance with the stand-in content service,
// kvs and kvs-watch on every rank. It stops when the test ends.
func Start(t testing.TB, o Options) *brokertest.Instance {
	t.Helper()
	if o.Store == nil {
		o.Store = NewStore()
	}
	reg := module.NewRegistry()
	store := o.Store
	reg.Register("content", func() module.Module { return store.Module() })
	reg.Register("kvs", kvs.New)
	reg.Register("kvs-watch", kvswatch.New)
	mods := []broker.ModuleSpec{
		{Name: "content", Ranks: "all"},
		{Name: "kvs", Ranks: "all", Args: o.KVSArgs},
	}
	if !o.NoWatch {
		mods = append(mods, broker.ModuleSpec{Name: "kvs-watch", Ranks: "all"})
	}
	for _, name := range slices.Sorted(maps.Keys(o.Extra)) {
		reg.Register(name, o.Extra[name])
		mods = append(mods, broker.ModuleSpec{Name: name, Ranks: "all"})
	}
	return brokertest.Start(t, brokertest.Options{Size: o.Size, Registry: reg, Modules: mods})
}
