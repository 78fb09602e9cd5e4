package contentsqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// gcChoice is what flux shutdown asked for (content-sqlite.gc-at-stop).
type gcChoice int8

const (
	gcByThreshold gcChoice = iota // [kvs] gc-threshold decides
	gcYes                         // flux shutdown --gc
	gcNo                          // flux shutdown --skip-gc
)

// gcThreshold reads [kvs] gc-threshold (0: none).
func gcThreshold(ctx context.Context, h *flux.Handle) (int64, error) {
	var conf struct {
		KVS struct {
			GCThreshold *json.Number `json:"gc-threshold"`
		} `json:"kvs"`
	}
	var raw json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &raw); err != nil {
		return 0, fmt.Errorf("config.get: %w", err)
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return 0, fmt.Errorf("[kvs] gc-threshold: want a non-negative integer: %w", err)
	}
	if conf.KVS.GCThreshold == nil {
		return 0, nil
	}
	n, err := conf.KVS.GCThreshold.Int64()
	if err != nil || n < 0 {
		return 0, fmt.Errorf("[kvs] gc-threshold=%s: want a non-negative integer (KVS commits between collections; 0: never)", conf.KVS.GCThreshold)
	}
	return n, nil
}

// handleGCAtStop records whether to collect garbage as the instance
// stops: {"gc": true} (flux shutdown --gc) or false (--skip-gc).
func (s *service) handleGCAtStop(r *flux.Request) {
	var req struct {
		GC *bool `json:"gc"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.GC == nil {
		r.Errorf(syscall.EPROTO, "content-sqlite.gc-at-stop: want {\"gc\": true|false}")
		return
	}
	if s.scratch && *req.GC {
		r.Errorf(syscall.EINVAL, "the content store is a scratch database (the instance has no statedir): nothing outlives the instance, so there is nothing to collect")
		return
	}
	s.gc = gcNo
	if *req.GC {
		s.gc = gcYes
	}
	r.Respond(nil)
}

// wantGC decides, at unload, whether to collect: only as the instance
// stops (the KVS, which links blobs, has unloaded: a module reload with
// the KVS running must not), and when asked or the threshold is met.
func (s *service) wantGC() (bool, string) {
	if s.scratch || s.gc == gcNo {
		return false, ""
	}
	_, seq, err := s.st.KVSSequence()
	if err != nil {
		return false, ""
	}
	why := "flux shutdown --gc"
	if s.gc == gcByThreshold {
		n := seq - s.st.LastGCSequence()
		if s.gcThreshold <= 0 || n < s.gcThreshold {
			return false, ""
		}
		why = fmt.Sprintf("%d KVS commits since the last collection, gc-threshold is %d", n, s.gcThreshold)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.h.Call(ctx, "kvs.getroot", flux.NodeidAny, map[string]any{"namespace": "primary"}, nil)
	if !errors.Is(err, syscall.ENOSYS) {
		s.log.Warn("not collecting garbage: the KVS is still loaded (this is a module reload, not the instance stopping)", "why", why)
		return false, ""
	}
	return true, why
}

// collect runs the collection as the module closes.
func (s *service) collect() {
	ok, why := s.wantGC()
	if !ok {
		return
	}
	s.log.Info("collecting the content store's garbage", "why", why, "objects", s.st.Count())
	st, err := s.st.Collect()
	if err != nil {
		s.log.Error(err.Error())
		return
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	s.log.Info("content store garbage collected", "kept", st.Kept, "kept_size", mb(st.KeptBytes),
		"removed", st.Removed, "removed_size", mb(st.RemovedBytes), "file_before", mb(st.FileBefore),
		"file_after", mb(st.FileAfter), "elapsed", st.Elapsed.Round(time.Millisecond).String())
}
