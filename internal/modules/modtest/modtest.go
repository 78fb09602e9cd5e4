// Package modtest holds stand-in modules (a KVS that only records
// commits, a scheduler that allocates instantly) for testing one module
// against the protocols of its neighbours without the real ones.
package modtest

import (
	"context"
	"encoding/json"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// KVS accepts commits and keeps appended values, standing in for the
// KVS so the job manager's state machine is tested on its own. Values
// committed by valref are read from the content service (load the
// content module alongside).
type KVS struct {
	mu      sync.Mutex
	vals    map[string][]byte
	commits [][]string
}

// NewKVS returns an empty stand-in KVS module named "kvs".
func NewKVS() *KVS { return &KVS{vals: map[string][]byte{}} }

// Value returns the value stored at key.
func (f *KVS) Value(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.vals[key]...)
}

// Commits returns the keys each commit so far wrote, commit by commit.
func (f *KVS) Commits() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.commits...)
}

// Name implements module.Module.
func (*KVS) Name() string { return "kvs" }

// Run implements module.Module.
func (f *KVS) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	// memory only, as a kvs without a backing store: a checkpoint is
	// done at once
	h.HandleFunc("kvs.checkpoint", func(r *flux.Request) { r.Respond(map[string]any{"rootref": "", "rootseq": 0}) })
	h.HandleFunc("kvs.commit", func(r *flux.Request) {
		ops, err := kvs.RequestOps(r.Msg)
		if err != nil {
			r.RespondError(err)
			return
		}
		f.mu.Lock()
		keys := make([]string, 0, len(ops))
		for _, op := range ops {
			keys = append(keys, op.Key)
			var d struct {
				Type string          `json:"type"`
				Raw  json.RawMessage `json:"data"`
				Data []byte          `json:"-"`
			}
			json.Unmarshal(op.Dirent, &d)
			if d.Type == "valref" {
				// the value's blobs are in the content store
				var refs []string
				json.Unmarshal(d.Raw, &refs)
				var buf []byte
				for _, ref := range refs {
					b, err := content.Load(ctx, h, ref, 0)
					if err != nil {
						f.mu.Unlock()
						r.RespondError(err)
						return
					}
					buf = append(buf, b...)
				}
				d.Data = buf
			} else {
				json.Unmarshal(d.Raw, &d.Data)
			}
			if op.Flags&kvs.FlagAppend != 0 {
				f.vals[op.Key] = append(f.vals[op.Key], d.Data...)
			} else {
				f.vals[op.Key] = d.Data
			}
		}
		f.commits = append(f.commits, keys)
		f.mu.Unlock()
		r.Respond(map[string]any{"rootref": "sha1-x", "rootseq": 1})
	})
	// Commits are kept in memory only: every checkpoint is at hand.
	h.HandleFunc("kvs.checkpoint", func(r *flux.Request) {
		r.Respond(map[string]any{"rootref": "sha1-x", "rootseq": 1})
	})
	h.HandleFunc("kvs.lookup", func(r *flux.Request) {
		var req struct {
			Key string `json:"key"`
		}
		if r.Decode(&req) != nil {
			return
		}
		f.mu.Lock()
		v, ok := f.vals[req.Key]
		f.mu.Unlock()
		if !ok {
			r.Errorf(syscall.ENOENT, "%s: no such key", req.Key)
			return
		}
		r.Respond(map[string]any{"val": map[string]any{"ver": 1, "type": "val", "data": v}})
	})
	return h.Serve(ctx)
}

// Sched is a stand-in scheduler module named "sched": it allocates
// rank 0 core 0 to every job at once, or holds every job when Hold is set.
type Sched struct {
	Hold bool
	// R is the allocation every job gets (default: rank 0, core 0).
	R string
}

// Name implements module.Module.
func (*Sched) Name() string { return "sched" }

// Run implements module.Module.
func (s *Sched) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	pending := map[jobid.ID]*flux.Request{}
	h.HandleFunc("sched.alloc", func(r *flux.Request) {
		var req struct {
			ID      jobid.ID        `json:"id"`
			Jobspec json.RawMessage `json:"jobspec"`
		}
		r.Decode(&req)
		if len(req.Jobspec) == 0 {
			// it said nothing of attachments at sched-ready: RFC 27's
			// payload carries the jobspec
			r.Errorf(syscall.EPROTO, "sched.alloc: no jobspec in the payload")
			return
		}
		if s.Hold {
			pending[req.ID] = r
			r.Respond(map[string]any{"id": req.ID, "type": 1, "annotations": map[string]any{"sched": map[string]any{"reason_pending": "held by test"}}})
			return
		}
		r.Respond(map[string]any{"id": req.ID, "type": 0,
			"R":           json.RawMessage(s.allocation()),
			"annotations": map[string]any{"sched": map[string]any{"resource_summary": "rank0/core0"}}})
	})
	h.HandleFunc("sched.cancel", func(r *flux.Request) {
		var req struct {
			ID jobid.ID `json:"id"`
		}
		r.Decode(&req)
		if p, ok := pending[req.ID]; ok {
			delete(pending, req.ID)
			p.Respond(map[string]any{"id": req.ID, "type": 3})
		}
	})
	h.HandleFunc("sched.free", func(r *flux.Request) {
		var req struct {
			ID jobid.ID `json:"id"`
		}
		r.Decode(&req)
		r.Respond(map[string]any{"id": req.ID})
	})
	h.HandleFunc("sched.prioritize", func(r *flux.Request) {})
	go func() {
		if err := h.Call(ctx, "job-manager.sched-hello", flux.NodeidAny, nil, nil); err != nil {
			return
		}
		h.Call(ctx, "job-manager.sched-ready", flux.NodeidAny, map[string]any{"mode": "unlimited"}, nil)
	}()
	return h.Serve(ctx)
}

func (s *Sched) allocation() string {
	if s.R != "" {
		return s.R
	}
	return `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`
}
