package jobinfo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// KVS flags (flux-core's FLUX_KVS_* values).
const (
	kvsWatch       = 0x04
	kvsWaitCreate  = 0x08
	kvsWatchAppend = 0x100
)

// kvsLookup starts a kvs.lookup of key in the primary namespace.
func (s *service) kvsLookup(key string) (*flux.Future, error) {
	return s.h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{"key": key, "namespace": "primary", "flags": 0}, 0)
}

// valData extracts the value bytes of a kvs.lookup or kvs-watch.lookup
// response ({"val": {"ver":1,"type":"val","data":"<base64>"}}).
func valData(m *flux.Message) ([]byte, error) {
	data, _, err := valPiece(m)
	return data, err
}

// valPiece is valData for a kvs-watch answer that may be a piece of a
// value with more pieces to come (more).
func valPiece(m *flux.Message) (data []byte, more bool, err error) {
	var resp struct {
		Val struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"val"`
		More bool `json:"more"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		return nil, false, fmt.Errorf("kvs response: %w", err)
	}
	if resp.Val.Type != "val" {
		return nil, false, flux.NewError(syscall.EISDIR, fmt.Sprintf("not a value (%s)", resp.Val.Type))
	}
	var s string
	if err := json.Unmarshal(resp.Val.Data, &s); err != nil {
		return nil, false, fmt.Errorf("kvs response: bad data: %w", err)
	}
	data, err = base64.StdEncoding.DecodeString(s)
	return data, resp.More, err
}
