package contentsqlite

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// handleLoad answers content-backing.load: raw digest in, raw blob out.
func (s *service) handleLoad(r *flux.Request) {
	digest := r.Msg.Payload
	if len(digest) != s.st.hashSize {
		r.Errorf(syscall.EPROTO, "%s: request carries %d bytes, want a %d-byte %s digest",
			r.Topic(), len(digest), s.st.hashSize, s.st.opts.Hash)
		return
	}
	s.w.enqueue(&op{kind: opLoad, data: digest, done: func(o *op) {
		if o.err != nil {
			r.RespondError(o.err)
			return
		}
		s.load.push(time.Since(o.start))
		r.RespondRaw(o.out)
	}})
}

// handleStore answers content-backing.store: raw blob in, raw digest out,
// once the transaction holding it has committed.
func (s *service) handleStore(r *flux.Request) {
	s.storeBlobs(r, [][]byte{r.Msg.Payload}, nil)
}

// handleStoreBatch answers content-backing.store-batch: the digests of
// the blobs, in order, once the transactions holding them have
// committed (pkg/flux/content/batch.go).
func (s *service) handleStoreBatch(r *flux.Request) {
	blobs, digests, _, err := fluxcontent.RequestBlobs(r.Msg)
	if err != nil {
		r.RespondError(err)
		return
	}
	if len(blobs) == 0 {
		r.RespondRaw(nil)
		return
	}
	s.storeBlobs(r, blobs, digests)
}

// storeBlobs stores blobs and answers r with their digests, concatenated
// in order (one digest for content-backing.store), once every
// transaction holding them has committed, or with the first error.
// known, if not nil, are the blobs' digests, computed by the module of
// this broker that sent them.
func (s *service) storeBlobs(r *flux.Request, blobs, known [][]byte) {
	digests := make([][]byte, len(blobs))
	pending := len(blobs)
	var failed error
	// one array of ops and one done function for the whole batch
	arr := make([]op, len(blobs))
	ops := make([]*op, len(blobs))
	done := func(o *op) {
		if o.err != nil && failed == nil {
			failed = o.err
			s.log.Error("store: " + o.err.Error())
		}
		if o.err == nil {
			s.store.push(time.Since(o.start))
		}
		digests[o.index] = o.out
		if pending--; pending > 0 {
			return
		}
		if failed != nil {
			r.RespondError(failed)
			return
		}
		r.RespondRaw(bytes.Join(digests, nil))
	}
	for i, b := range blobs {
		o := &arr[i]
		*o = op{kind: opStore, data: b, index: i, done: done}
		if known != nil {
			o.digest = known[i]
		}
		ops[i] = o
	}
	s.w.enqueue(ops...)
}

// handleCheckpointGet answers content-backing.checkpoint-get:
// {"key":K} → {"value":V}.
func (s *service) handleCheckpointGet(r *flux.Request) {
	var req struct {
		Key string `json:"key"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Key == "" {
		r.Errorf(syscall.EPROTO, "%s: key is missing or empty", r.Topic())
		return
	}
	s.w.enqueue(&op{kind: opCheckpointGet, key: req.Key, done: func(o *op) {
		if o.err != nil {
			r.RespondError(o.err)
			return
		}
		r.Respond(map[string]json.RawMessage{"value": o.json})
	}})
}

// handleCheckpointPut answers content-backing.checkpoint-put:
// {"key":K,"value":V} → no payload, once committed.
func (s *service) handleCheckpointPut(r *flux.Request) {
	var req struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Key == "" || len(req.Value) == 0 || string(req.Value) == "null" {
		r.Errorf(syscall.EPROTO, "%s: want {\"key\":K,\"value\":V} with a non-empty key and a value", r.Topic())
		return
	}
	s.w.enqueue(&op{kind: opCheckpointPut, key: req.Key, value: req.Value, done: func(o *op) {
		if o.err != nil {
			s.log.Error("checkpoint-put: " + o.err.Error())
			r.RespondError(o.err)
			return
		}
		r.Respond(nil)
	}})
}

// handleStats answers content-sqlite.stats-get with flux-core's fields
// plus the worker's batching figures.
func (s *service) handleStats(r *flux.Request) {
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(s.st.Path() + suffix); err == nil {
			size += fi.Size()
		}
	}
	var free uint64
	var fs syscall.Statfs_t
	if syscall.Statfs(s.st.Path(), &fs) == nil {
		free = uint64(fs.Bsize) * fs.Bavail
	}
	r.Respond(map[string]any{
		"object_count": s.st.Count(),
		"dbfile_size":  size,
		"dbfile_free":  free,
		"load_time":    s.load.json(),
		"store_time":   s.store.json(),
		"worker":       s.w.stats(),
		"config": map[string]any{
			"journal_mode": s.st.opts.JournalMode,
			"synchronous":  s.st.opts.Synchronous,
			"compress":     s.st.opts.Compress,
		},
	})
}

// tstat accumulates durations (milliseconds) for stats-get.
type tstat struct {
	n             int
	min, max, sum float64
	sumsq         float64
}

func (t *tstat) push(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	if t.n == 0 || ms < t.min {
		t.min = ms
	}
	if ms > t.max {
		t.max = ms
	}
	t.n++
	t.sum += ms
	t.sumsq += ms * ms
}

func (t *tstat) json() map[string]any {
	mean, stddev := 0.0, 0.0
	if t.n > 0 {
		mean = t.sum / float64(t.n)
	}
	if t.n > 1 {
		stddev = math.Sqrt(math.Max(0, (t.sumsq-float64(t.n)*mean*mean)/float64(t.n-1)))
	}
	return map[string]any{"count": t.n, "min": t.min, "max": t.max, "mean": mean, "stddev": stddev}
}
