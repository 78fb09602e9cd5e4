package kvs

import (
	"context"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// OwnerDefault as a namespace owner means the instance owner.
const OwnerDefault = -1

// NamespaceInfo describes one namespace (kvs.namespace-list).
type NamespaceInfo struct {
	Namespace string `json:"namespace"`
	Owner     uint32 `json:"owner"`
	Flags     int    `json:"flags"`
}

// NamespaceCreate creates namespace name owned by userid owner
// (OwnerDefault: the instance owner). rootref, if not empty, is its
// initial root (a blobref of a stored dir); else it starts empty.
func NamespaceCreate(ctx context.Context, h *flux.Handle, name string, owner int64, rootref string) error {
	req := map[string]any{"namespace": name, "owner": owner, "flags": 0}
	if rootref != "" {
		req["rootref"] = rootref
	}
	return h.Call(ctx, "kvs.namespace-create", 0, req, nil)
}

// NamespaceRemove removes namespace name (removing one that does not
// exist succeeds).
func NamespaceRemove(ctx context.Context, h *flux.Handle, name string) error {
	return h.Call(ctx, "kvs.namespace-remove", 0, map[string]string{"namespace": name}, nil)
}

// NamespaceListResponse is the kvs.namespace-list response.
type NamespaceListResponse struct {
	Namespaces []NamespaceInfo `json:"namespaces"`
}

// NamespaceList lists the namespaces.
func NamespaceList(ctx context.Context, h *flux.Handle) ([]NamespaceInfo, error) {
	var resp NamespaceListResponse
	err := h.Call(ctx, "kvs.namespace-list", flux.NodeidAny, nil, &resp)
	return resp.Namespaces, err
}

// RootInfo is a namespace's current root (kvs.getroot).
type RootInfo struct {
	Owner     uint32 `json:"owner"`
	Rootseq   int64  `json:"rootseq"`
	Rootref   string `json:"rootref"`
	Flags     int    `json:"flags"`
	Namespace string `json:"namespace"`
}

// Treeobj returns the root as an RFC 11 dirref.
func (r RootInfo) Treeobj() *treeobj.Object { return treeobj.NewDirref(r.Rootref) }

// GetRoot returns namespace ns's current root as the local broker knows
// it.
func GetRoot(ctx context.Context, h *flux.Handle, ns string) (RootInfo, error) {
	var r RootInfo
	err := h.Call(ctx, "kvs.getroot", flux.NodeidAny, map[string]any{"namespace": Namespace(ns), "flags": 0}, &r)
	return r, err
}

// GetVersion returns namespace ns's root sequence number.
func GetVersion(ctx context.Context, h *flux.Handle, ns string) (int64, error) {
	r, err := GetRoot(ctx, h, ns)
	return r.Rootseq, err
}

// WaitVersion waits until the local broker's root of ns reaches version.
func WaitVersion(ctx context.Context, h *flux.Handle, ns string, version int64) error {
	return h.Call(ctx, "kvs.wait-version", flux.NodeidAny,
		map[string]any{"rootseq": version, "namespace": Namespace(ns)}, nil)
}

// Dropcache asks the local KVS to drop its cache.
func Dropcache(ctx context.Context, h *flux.Handle) error {
	return h.Call(ctx, "kvs.dropcache", flux.NodeidAny, nil, nil)
}

// DropcacheAll asks every KVS in the instance to drop its cache.
func DropcacheAll(h *flux.Handle) error {
	return h.Publish("kvs.dropcache", nil, false)
}

// Checkpoint asks rank 0 to checkpoint the primary namespace's root now
// and returns the root checkpointed.
func Checkpoint(ctx context.Context, h *flux.Handle) (CommitResult, error) {
	var r CommitResult
	err := h.Call(ctx, "kvs.checkpoint", 0, nil, &r)
	return r, err
}
