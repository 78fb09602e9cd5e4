// Package kvsfake is an in-memory stand-in for the kvs and kvs-watch
// modules, speaking their RPCs (kvs.commit, kvs.lookup with READDIR,
// kvs-watch.lookup with WATCH, WATCH_APPEND and WAITCREATE,
// kvs-watch.cancel) closely enough to test the job modules that read
// job data, without the content store.
package kvsfake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"syscall"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// KVS flags (flux-core's values).
const (
	flagReadDir     = 0x01
	flagWatch       = 0x04
	flagWaitCreate  = 0x08
	flagAppend      = 0x20
	flagWatchAppend = 0x100
)

// Store holds the keys; KVS and Watch modules share one.
type Store struct {
	mu      sync.Mutex
	vals    map[string][]byte
	notify  []func()
	lookups int
}

// New returns an empty store.
func New() *Store { return &Store{vals: map[string][]byte{}} }

// Put sets key to val.
func (s *Store) Put(key string, val []byte) {
	s.mu.Lock()
	s.vals[key] = append([]byte(nil), val...)
	s.mu.Unlock()
	s.changed()
}

// Append appends val to key.
func (s *Store) Append(key string, val []byte) {
	s.mu.Lock()
	s.vals[key] = append(s.vals[key], val...)
	s.mu.Unlock()
	s.changed()
}

// Get returns key's value.
func (s *Store) Get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[key]
	return append([]byte(nil), v...), ok
}

// Lookups returns how many kvs.lookup requests were served.
func (s *Store) Lookups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

func (s *Store) changed() {
	s.mu.Lock()
	fns := append([]func(){}, s.notify...)
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (s *Store) unlink(key string) {
	for k := range s.vals {
		if k == key || strings.HasPrefix(k, key+".") {
			delete(s.vals, k)
		}
	}
}

func valObject(v []byte) map[string]any {
	return map[string]any{"ver": 1, "type": "val", "data": base64.StdEncoding.EncodeToString(v)}
}

// dir returns the directory object at key, or nil if there is none.
// Must hold mu.
func (s *Store) dir(key string) map[string]any {
	prefix := key + "."
	ents := map[string]any{}
	for k, v := range s.vals {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		name, sub, deeper := strings.Cut(rest, ".")
		_ = sub
		if deeper {
			ents[name] = map[string]any{"ver": 1, "type": "dir", "data": map[string]any{}}
		} else if _, isDir := ents[name]; !isDir {
			ents[name] = valObject(v)
		}
	}
	if len(ents) == 0 {
		return nil
	}
	return map[string]any{"ver": 1, "type": "dir", "data": ents}
}

// KVS returns the stand-in "kvs" module.
func (s *Store) KVS() module.Module { return &kvsModule{s: s} }

// Watch returns the stand-in "kvs-watch" module.
func (s *Store) Watch() module.Module { return &watchModule{s: s} }

type kvsModule struct{ s *Store }

func (*kvsModule) Name() string { return "kvs" }

func (m *kvsModule) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	s := m.s
	// memory only, as a kvs without a backing store: a checkpoint is
	// done at once
	h.HandleFunc("kvs.checkpoint", func(r *flux.Request) { r.Respond(map[string]any{"rootref": "", "rootseq": 0}) })
	h.HandleFunc("kvs.commit", func(r *flux.Request) {
		ops, err := fluxkvs.RequestOps(r.Msg)
		if err != nil {
			r.RespondError(err)
			return
		}
		s.mu.Lock()
		for _, op := range ops {
			if string(op.Dirent) == "null" {
				s.unlink(op.Key)
				continue
			}
			var d struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			json.Unmarshal(op.Dirent, &d)
			if d.Type != "val" {
				continue
			}
			var b64 string
			json.Unmarshal(d.Data, &b64)
			data, _ := base64.StdEncoding.DecodeString(b64)
			if op.Flags&flagAppend != 0 {
				s.vals[op.Key] = append(s.vals[op.Key], data...)
			} else {
				s.vals[op.Key] = data
			}
		}
		s.mu.Unlock()
		s.changed()
		r.Respond(map[string]any{"rootref": "sha1-0", "rootseq": 1})
	})
	h.HandleFunc("kvs.lookup", func(r *flux.Request) {
		var req struct {
			Key   string `json:"key"`
			Flags int    `json:"flags"`
		}
		if r.Decode(&req) != nil {
			return
		}
		s.mu.Lock()
		s.lookups++
		v, ok := s.vals[req.Key]
		var d map[string]any
		if !ok {
			d = s.dir(req.Key)
		}
		s.mu.Unlock()
		switch {
		case ok && req.Flags&flagReadDir != 0:
			r.Errorf(syscall.ENOTDIR, "%s: not a directory", req.Key)
		case ok:
			r.Respond(map[string]any{"val": valObject(v)})
		case d != nil && req.Flags&flagReadDir != 0:
			r.Respond(map[string]any{"val": d})
		case d != nil:
			r.Errorf(syscall.EISDIR, "%s: is a directory", req.Key)
		default:
			r.Errorf(syscall.ENOENT, "%s: no such key", req.Key)
		}
	})
	return h.Serve(ctx)
}

type watchModule struct{ s *Store }

func (*watchModule) Name() string { return "kvs-watch" }

type kvsWatch struct {
	r     *flux.Request
	key   string
	flags int
	sent  []byte
	seen  bool
}

func (m *watchModule) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	s := m.s
	var watches []*kvsWatch
	check := func() {
		kept := watches[:0]
		for _, w := range watches {
			s.mu.Lock()
			v, ok := s.vals[w.key]
			v = append([]byte(nil), v...)
			s.mu.Unlock()
			switch {
			case !ok && !w.seen:
				kept = append(kept, w)
				continue
			case !ok:
				kept = append(kept, w)
				continue
			}
			if !w.seen {
				w.seen = true
				w.sent = v
				w.r.Respond(map[string]any{"val": valObject(v)})
			} else if len(v) > len(w.sent) && string(v[:len(w.sent)]) == string(w.sent) {
				add := v[len(w.sent):]
				w.sent = v
				if w.flags&flagWatchAppend != 0 {
					w.r.Respond(map[string]any{"val": valObject(add)})
				} else {
					w.r.Respond(map[string]any{"val": valObject(v)})
				}
			} else if string(v) != string(w.sent) {
				w.sent = v
				w.r.Respond(map[string]any{"val": valObject(v)})
			}
			if w.flags&flagWatch == 0 {
				w.r.EndStream()
				continue
			}
			kept = append(kept, w)
		}
		watches = kept
	}
	s.mu.Lock()
	s.notify = append(s.notify, func() { h.Post(check) })
	s.mu.Unlock()
	h.HandleFunc("kvs-watch.lookup", func(r *flux.Request) {
		var req struct {
			Key   string `json:"key"`
			Flags int    `json:"flags"`
		}
		if r.Decode(&req) != nil {
			return
		}
		s.mu.Lock()
		_, ok := s.vals[req.Key]
		s.mu.Unlock()
		if !ok && req.Flags&flagWaitCreate == 0 {
			r.Errorf(syscall.ENOENT, "%s: no such key", req.Key)
			return
		}
		watches = append(watches, &kvsWatch{r: r, key: req.Key, flags: req.Flags})
		check()
	})
	h.HandleFunc("kvs-watch.cancel", func(r *flux.Request) {
		var req struct {
			Matchtag uint32 `json:"matchtag"`
		}
		if r.Decode(&req) != nil {
			return
		}
		route := r.Msg.RouteString()
		kept := watches[:0]
		for _, w := range watches {
			if w.r.Msg.RouteString() == route && w.r.Msg.Matchtag == req.Matchtag {
				w.r.EndStream()
				continue
			}
			kept = append(kept, w)
		}
		watches = kept
	})
	h.HandleFunc("kvs-watch.disconnect", func(r *flux.Request) {
		route := r.Msg.RouteString()
		kept := watches[:0]
		for _, w := range watches {
			if w.r.Msg.RouteString() != route {
				kept = append(kept, w)
			}
		}
		watches = kept
	})
	return h.Serve(ctx)
}

// Keys returns every key, sorted (for test diagnostics).
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.vals))
	for k := range s.vals {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
