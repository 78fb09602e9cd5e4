package content

import (
	"encoding/json"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// checkpoint is rank 0's copy of the latest value put under a key.
type checkpoint struct {
	value json.RawMessage
	dirty bool // not yet written to the backing store
}

// checkpointPutRequest is the content.checkpoint-put (and
// content-backing.checkpoint-put) payload: {"key": K, "value": V}, V any
// JSON value (the KVS writes {"version":1,"rootref":R,"sequence":N,
// "timestamp":T}). The response has no payload.
type checkpointPutRequest struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// checkpointGetRequest is the content.checkpoint-get payload {"key": K};
// the response is {"value": V}, or ENOENT.
type checkpointGetRequest struct {
	Key string `json:"key"`
}

func decodePut(r *flux.Request) (checkpointPutRequest, bool) {
	var req checkpointPutRequest
	if r.Decode(&req) != nil {
		return req, false
	}
	if req.Key == "" {
		r.Errorf(syscall.EPROTO, "%s: key is missing or empty", r.Topic())
		return req, false
	}
	if len(req.Value) == 0 || string(req.Value) == "null" {
		r.Errorf(syscall.EPROTO, "%s: value is missing", r.Topic())
		return req, false
	}
	return req, true
}

// checkpointPut answers content.checkpoint-put. Ranks > 0 pass it to the
// parent. Rank 0 keeps the value; with a backing store it writes it there
// once every blob stored before it is there too, then answers; without
// one it answers at once and writes the value when a backing store
// registers.
func (s *service) checkpointPut(r *flux.Request) {
	req, ok := decodePut(r)
	if !ok {
		return
	}
	if s.rank > 0 {
		s.forwardUp(r, req)
		return
	}
	cp := &checkpoint{value: req.Value, dirty: true}
	s.checkpoints[req.Key] = cp
	if !s.backing {
		r.Respond(nil)
		return
	}
	s.cache.barrier(func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		s.writeCheckpoint(req.Key, cp, func(err error) {
			if err != nil {
				r.RespondError(err)
				return
			}
			r.Respond(nil)
		})
	})
	s.pump()
}

// writeCheckpoint puts cp to the backing store and reports the outcome.
func (s *service) writeCheckpoint(key string, cp *checkpoint, done func(error)) {
	f, err := s.h.RPC("content-backing.checkpoint-put", 0, checkpointPutRequest{Key: key, Value: cp.value}, 0)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err == nil && s.checkpoints[key] == cp {
			cp.dirty = false
		}
		done(err)
	})
}

// flushCheckpoints writes the checkpoints put while there was no backing
// store, once the blobs stored before them are written.
func (s *service) flushCheckpoints() {
	for key, cp := range s.checkpoints {
		if !cp.dirty {
			continue
		}
		s.cache.barrier(func(err error) {
			if err != nil || s.checkpoints[key] != cp || !cp.dirty {
				return
			}
			s.writeCheckpoint(key, cp, func(err error) {
				if err != nil {
					s.log.Error("checkpoint " + key + ": backing store: " + err.Error())
				}
			})
		})
	}
}

// checkpointGet answers content.checkpoint-get. Ranks > 0 pass it to the
// parent; rank 0 answers from its copy of the latest put, else from the
// backing store, else ENOENT.
func (s *service) checkpointGet(r *flux.Request) {
	var req checkpointGetRequest
	if r.Decode(&req) != nil {
		return
	}
	if req.Key == "" {
		r.Errorf(syscall.EPROTO, "%s: key is missing or empty", r.Topic())
		return
	}
	if s.rank > 0 {
		s.forwardUp(r, req)
		return
	}
	if cp, ok := s.checkpoints[req.Key]; ok {
		r.Respond(map[string]json.RawMessage{"value": cp.value})
		return
	}
	if !s.backing {
		if s.deferUntilBacking(func() { s.checkpointGet(r) }) {
			return
		}
		r.Errorf(syscall.ENOENT, "checkpoint key %s unavailable", req.Key)
		return
	}
	f, err := s.h.RPC("content-backing.checkpoint-get", 0, req, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		var resp struct {
			Value json.RawMessage `json:"value"`
		}
		if err := m.UnmarshalPayload(&resp); err != nil || len(resp.Value) == 0 {
			r.Errorf(syscall.EPROTO, "content-backing.checkpoint-get: malformed response")
			return
		}
		if _, ok := s.checkpoints[req.Key]; !ok {
			s.checkpoints[req.Key] = &checkpoint{value: resp.Value}
		}
		r.Respond(map[string]json.RawMessage{"value": resp.Value})
	})
}

// forwardUp passes a checkpoint request to the parent's content service
// and relays its answer.
func (s *service) forwardUp(r *flux.Request, payload any) {
	f, err := s.h.RPC(r.Topic(), flux.NodeidUpstream, payload, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		if p := m.JSON(); len(p) > 0 {
			r.Respond(json.RawMessage(p))
			return
		}
		r.Respond(nil)
	})
}
