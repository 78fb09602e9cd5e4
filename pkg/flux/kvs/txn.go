// Package kvs is the Go client for the Flux key-value store (RFC 11):
// transactions committed with kvs.commit or kvs.fence, lookups with
// kvs.lookup, watches with kvs-watch.lookup, namespaces, root versions.
// Payloads are flux-core's, so this client works against flux-core's KVS
// and flux-core's clients against fluxgo's.
//
// A namespace argument of "" means $FLUX_KVS_NAMESPACE if set, else
// "primary".
package kvs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Operation flags (flux-core's FLUX_KVS_* values): FlagAppend in a
// transaction, the others in lookups.
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
	FlagStream      = 0x200
)

// Commit flags (FLUX_KVS_NO_MERGE, FLUX_KVS_TXN_COMPACT, FLUX_KVS_SYNC).
const (
	CommitNoMerge = 0x01
	CommitCompact = 0x02
	CommitSync    = 0x04
)

// Op is one operation of a transaction as kvs.commit carries it: a key,
// flags and a tree object (RFC 11) or null to unlink. The value of a Put
// or Append is kept as is and encoded (base64, in a "val" object) only
// when the commit payload is built.
type Op struct {
	Key    string          `json:"key"`
	Flags  int             `json:"flags"`
	Dirent json.RawMessage `json:"dirent"`
	val    []byte          // the data of a val dirent (when Dirent is nil)
	isVal  bool
	obj    *treeobj.Object // the dirent of PutTreeobj (when Dirent is nil; never nil there)
}

// Txn accumulates operations to commit atomically.
type Txn struct {
	Ops []Op
}

// Put stores raw bytes at key. The transaction keeps value (it must not
// change until the transaction is committed).
func (t *Txn) Put(key string, value []byte) {
	t.Ops = append(t.Ops, Op{Key: key, val: value, isVal: true})
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

// Append appends raw bytes to the value at key (creating it). The
// transaction keeps value, as Put does.
func (t *Txn) Append(key string, value []byte) {
	t.Ops = append(t.Ops, Op{Key: key, Flags: FlagAppend, val: value, isVal: true})
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

// PutTreeobj stores an RFC 11 tree object at key as is (a dirref makes
// key a copy of that directory, a symlink a link ...).
func (t *Txn) PutTreeobj(key string, obj *treeobj.Object) {
	t.Ops = append(t.Ops, Op{Key: key, obj: obj})
}

// Treeobj returns the tree object of an operation made by PutTreeobj,
// nil for others: a KVS module takes it as is from an attached commit
// instead of decoding its encoding (it must not be modified).
func (o *Op) Treeobj() *treeobj.Object { return o.obj }

// Len returns the number of operations.
func (t *Txn) Len() int { return len(t.Ops) }

// CommitResult is the kvs.commit response.
type CommitResult struct {
	Rootref string `json:"rootref"`
	Rootseq int64  `json:"rootseq"`
}

// CommitAsync sends the transaction to namespace ns and returns the
// pending RPC (its response decodes into a CommitResult).
func CommitAsync(h *flux.Handle, ns string, flags int, t *Txn) (*flux.Future, error) {
	return CommitVia(h, "kvs.commit", flux.NodeidAny, ns, flags, t)
}

// CommitVia sends a kvs.commit payload to topic at nodeid: a service
// that checks a client's writes and commits them on its behalf (the
// job-shell module's job-shell.commit for a guest's job shell).
func CommitVia(h *flux.Handle, topic string, nodeid uint32, ns string, flags int, t *Txn) (*flux.Future, error) {
	return h.RPC(topic, nodeid, flux.JSONBuffer(encodeCommit(Namespace(ns), flags, "", 0, t.Ops)), 0)
}

// encodeCommit builds a kvs.commit/kvs.fence payload by hand: the dirents
// are already JSON, and encoding/json would validate and copy each one.
func encodeCommit(ns string, flags int, name string, nprocs int, ops []Op) json.RawMessage {
	size := 64 + len(ns) + len(name)
	for i := range ops {
		size += len(ops[i].Key) + len(ops[i].Dirent) + 40
		if ops[i].obj != nil {
			size += 128 // a valref or a small dir, typically
		}
		if ops[i].isVal {
			size += base64.StdEncoding.EncodedLen(len(ops[i].val)) + len(valPrefix) + len(valSuffix)
		}
	}
	b := make([]byte, 0, size)
	if name != "" {
		b = append(b, `{"name":`...)
		b = jsonwire.AppendPlainString(b, name)
		b = append(b, `,"nprocs":`...)
		b = strconv.AppendInt(b, int64(nprocs), 10)
		b = append(b, `,"namespace":`...)
	} else {
		b = append(b, `{"namespace":`...)
	}
	b = jsonwire.AppendPlainString(b, ns)
	b = append(b, `,"flags":`...)
	b = strconv.AppendInt(b, int64(flags), 10)
	b = append(b, `,"ops":`...)
	return append(appendOps(b, ops), '}')
}

// appendOps appends ops as a commit payload's "ops" array.
func appendOps(b []byte, ops []Op) []byte {
	b = append(b, '[')
	for i := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = jsonwire.AppendPlainString(b, ops[i].Key)
		b = append(b, `,"flags":`...)
		b = strconv.AppendInt(b, int64(ops[i].Flags), 10)
		b = append(b, `,"dirent":`...)
		if ops[i].isVal {
			b = appendVal(b, ops[i].val)
		} else if ops[i].obj != nil {
			b = ops[i].obj.AppendEncode(b)
		} else if len(ops[i].Dirent) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, ops[i].Dirent...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// A val tree object as treeobj encodes it: {"data":"<base64>",
// "type":"val","ver":1}.
const (
	valPrefix = `{"data":"`
	valSuffix = `","type":"val","ver":1}`
)

// appendVal appends data as an RFC 11 val object, base64-encoding it in
// place.
func appendVal(b, data []byte) []byte {
	b = append(b, valPrefix...)
	n := base64.StdEncoding.EncodedLen(len(data))
	b = slices.Grow(b, n+len(valSuffix))
	base64.StdEncoding.Encode(b[len(b):len(b)+n], data)
	b = b[:len(b)+n]
	return append(b, valSuffix...)
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

// FenceAsync sends t as one participant of fence name: the KVS commits
// the operations of all nprocs participants (on any ranks) as one
// transaction, and answers each once it is committed.
func FenceAsync(h *flux.Handle, ns, name string, nprocs, flags int, t *Txn) (*flux.Future, error) {
	if name == "" {
		return nil, fmt.Errorf("kvs fence: empty name: %w", syscall.EINVAL)
	}
	return h.RPC("kvs.fence", flux.NodeidAny, flux.JSONBuffer(encodeCommit(Namespace(ns), flags, name, nprocs, t.Ops)), 0)
}

// Fence joins fence name and waits for it to commit.
func Fence(ctx context.Context, h *flux.Handle, ns, name string, nprocs, flags int, t *Txn) (CommitResult, error) {
	var res CommitResult
	f, err := FenceAsync(h, ns, name, nprocs, flags, t)
	if err != nil {
		return res, err
	}
	err = f.Decode(ctx, &res)
	return res, err
}

// Treeobj returns the commit result's root as an RFC 11 dirref.
func (r CommitResult) Treeobj() *treeobj.Object { return treeobj.NewDirref(r.Rootref) }
