// Package kvs is the Go client for the Flux key-value store (RFC 11):
// transactions committed with kvs.commit and lookups with kvs.lookup.
package kvs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Operation flags (flux-core's FLUX_KVS_* values).
const (
	FlagReadDir     = 0x01
	FlagReadLink    = 0x02
	FlagWatch       = 0x04
	FlagWaitCreate  = 0x08
	FlagTreeObj     = 0x10
	FlagAppend      = 0x20
	FlagWatchFull   = 0x40
	FlagWatchUniq   = 0x80
	FlagWatchAppend = 0x100
)

// Commit flags.
const (
	CommitNoMerge = 0x01
	CommitSync    = 0x04
)

// Op is one operation of a transaction as kvs.commit carries it: a key,
// flags and a tree object (RFC 11) or null to unlink.
type Op struct {
	Key    string          `json:"key"`
	Flags  int             `json:"flags"`
	Dirent json.RawMessage `json:"dirent"`
}

// Txn accumulates operations to commit atomically.
type Txn struct {
	Ops []Op
}

// valDirent encodes data as an RFC 11 "val" tree object.
func valDirent(data []byte) json.RawMessage {
	b, _ := json.Marshal(struct {
		Ver  int    `json:"ver"`
		Type string `json:"type"`
		Data []byte `json:"data"`
	}{1, "val", data})
	return b
}

// Put stores raw bytes at key.
func (t *Txn) Put(key string, value []byte) {
	t.Ops = append(t.Ops, Op{Key: key, Dirent: valDirent(value)})
}

// PutJSON stores the JSON encoding of v at key.
func (t *Txn) PutJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("kvs put %s: %w", key, err)
	}
	t.Put(key, b)
	return nil
}

// Append appends raw bytes to the value at key (creating it).
func (t *Txn) Append(key string, value []byte) {
	t.Ops = append(t.Ops, Op{Key: key, Flags: FlagAppend, Dirent: valDirent(value)})
}

// Unlink removes key (recursively for a directory).
func (t *Txn) Unlink(key string) {
	t.Ops = append(t.Ops, Op{Key: key, Dirent: json.RawMessage("null")})
}

// Mkdir creates an empty directory at key.
func (t *Txn) Mkdir(key string) {
	t.Ops = append(t.Ops, Op{Key: key, Dirent: json.RawMessage(`{"ver":1,"type":"dir","data":{}}`)})
}

// Symlink makes key a symbolic link to target (in namespace ns if set).
func (t *Txn) Symlink(key, ns, target string) {
	d := map[string]any{"ver": 1, "type": "symlink", "data": map[string]any{"target": target}}
	if ns != "" {
		d["data"].(map[string]any)["namespace"] = ns
	}
	b, _ := json.Marshal(d)
	t.Ops = append(t.Ops, Op{Key: key, Dirent: b})
}

// Len returns the number of operations.
func (t *Txn) Len() int { return len(t.Ops) }

// CommitResult is the kvs.commit response.
type CommitResult struct {
	Rootref string `json:"rootref"`
	Rootseq int64  `json:"rootseq"`
}

// CommitAsync sends the transaction to namespace ns ("" = primary) and
// returns the pending RPC.
func CommitAsync(h *flux.Handle, ns string, flags int, t *Txn) (*flux.Future, error) {
	if ns == "" {
		ns = "primary"
	}
	ops := t.Ops
	if ops == nil {
		ops = []Op{}
	}
	return h.RPC("kvs.commit", flux.NodeidAny, struct {
		Namespace string `json:"namespace"`
		Flags     int    `json:"flags"`
		Ops       []Op   `json:"ops"`
	}{ns, flags, ops}, 0)
}

// Commit commits t and waits for the result.
func Commit(ctx context.Context, h *flux.Handle, ns string, flags int, t *Txn) (CommitResult, error) {
	var res CommitResult
	f, err := CommitAsync(h, ns, flags, t)
	if err != nil {
		return res, err
	}
	err = f.Decode(ctx, &res)
	return res, err
}
