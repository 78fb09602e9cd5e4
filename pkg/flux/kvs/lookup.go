package kvs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// PrimaryNamespace is the namespace every instance has.
const PrimaryNamespace = "primary"

// Namespace returns ns, or when it is empty $FLUX_KVS_NAMESPACE, or
// "primary".
func Namespace(ns string) string {
	if ns != "" {
		return ns
	}
	if env := os.Getenv("FLUX_KVS_NAMESPACE"); env != "" {
		return env
	}
	return PrimaryNamespace
}

// lookupResponse is the kvs.lookup response {val}.
type lookupResponse struct {
	Val *treeobj.Object `json:"val"`
}

// LookupAsync sends a kvs.lookup of key in namespace ns with flags
// (FlagReadDir, FlagReadLink, FlagTreeObj). With FlagWatch or
// FlagWaitCreate use Watch instead.
func LookupAsync(h *flux.Handle, ns string, flags int, key string) (*flux.Future, error) {
	if flags&(FlagWatch|FlagWaitCreate|FlagStream) != 0 {
		return nil, fmt.Errorf("kvs lookup %s: watch flags need Watch: %w", key, syscall.EINVAL)
	}
	return h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{
		"key": key, "namespace": Namespace(ns), "flags": flags,
	}, 0)
}

// LookupAtAsync looks key up relative to the snapshot root (an RFC 11
// dirref, e.g. a commit's CommitResult.Treeobj or a getroot result).
func LookupAtAsync(h *flux.Handle, flags int, key string, root *treeobj.Object) (*flux.Future, error) {
	if root == nil || root.Type != treeobj.Dirref {
		return nil, fmt.Errorf("kvs lookup %s: the snapshot root must be a dirref: %w", key, syscall.EINVAL)
	}
	return h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{
		"key": key, "flags": flags, "rootdir": root,
	}, 0)
}

// LookupResult decodes a lookup response into its tree object.
func LookupResult(ctx context.Context, f *flux.Future) (*treeobj.Object, error) {
	var resp lookupResponse
	if err := f.Decode(ctx, &resp); err != nil {
		return nil, err
	}
	if resp.Val == nil {
		return nil, fmt.Errorf("kvs lookup response has no value: %w", syscall.EPROTO)
	}
	return resp.Val, nil
}

// Lookup returns the tree object a kvs.lookup answers for key: a val for
// a value (valrefs are resolved by the KVS), a dir with FlagReadDir, a
// symlink with FlagReadLink, the stored object as is with FlagTreeObj.
func Lookup(ctx context.Context, h *flux.Handle, ns string, flags int, key string) (*treeobj.Object, error) {
	f, err := LookupAsync(h, ns, flags, key)
	if err != nil {
		return nil, err
	}
	return LookupResult(ctx, f)
}

// LookupAt is Lookup relative to a snapshot root.
func LookupAt(ctx context.Context, h *flux.Handle, flags int, key string, root *treeobj.Object) (*treeobj.Object, error) {
	f, err := LookupAtAsync(h, flags, key, root)
	if err != nil {
		return nil, err
	}
	return LookupResult(ctx, f)
}

// ValueOf returns the data of a val object a lookup returned.
func ValueOf(key string, o *treeobj.Object) ([]byte, error) {
	switch o.Type {
	case treeobj.Val:
		return o.Value()
	case treeobj.Dir, treeobj.Dirref:
		return nil, fmt.Errorf("%s is a directory: %w", key, syscall.EISDIR)
	}
	return nil, fmt.Errorf("%s: lookup returned a %s object, not a value: %w", key, o.Type, syscall.EPROTO)
}

// GetRaw returns the value stored at key.
func GetRaw(ctx context.Context, h *flux.Handle, ns, key string) ([]byte, error) {
	o, err := Lookup(ctx, h, ns, 0, key)
	if err != nil {
		return nil, err
	}
	return ValueOf(key, o)
}

// Get returns the value stored at key as a string (flux-core strings may
// carry a terminating NUL, which is dropped).
func Get(ctx context.Context, h *flux.Handle, ns, key string) (string, error) {
	b, err := GetRaw(ctx, h, ns, key)
	if err != nil {
		return "", err
	}
	if n := len(b); n > 0 && b[n-1] == 0 {
		b = b[:n-1]
	}
	return string(b), nil
}

// GetJSON decodes the JSON value stored at key into v.
func GetJSON(ctx context.Context, h *flux.Handle, ns, key string, v any) error {
	b, err := GetRaw(ctx, h, ns, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: value is not JSON: %v: %w", key, err, syscall.EINVAL)
	}
	return nil
}

// Readlink returns the target (and namespace, "" if none) of the symlink
// at key.
func Readlink(ctx context.Context, h *flux.Handle, ns, key string) (target, targetNS string, err error) {
	o, err := Lookup(ctx, h, ns, FlagReadLink, key)
	if err != nil {
		return "", "", err
	}
	if o.Type != treeobj.Symlink {
		return "", "", fmt.Errorf("%s is not a symlink: %w", key, syscall.EINVAL)
	}
	return o.Target, o.Namespace, nil
}

// Directory is a KVS directory as a lookup returned it. Its entries are
// stored objects: subdirectories are usually dirrefs and large values
// valrefs, which need their own lookups.
type Directory struct {
	Key string          // the directory's key, normalized
	Obj *treeobj.Object // the dir object
}

// Dir returns the directory at key ("." for the root).
func Dir(ctx context.Context, h *flux.Handle, ns, key string) (*Directory, error) {
	o, err := Lookup(ctx, h, ns, FlagReadDir, key)
	if err != nil {
		return nil, err
	}
	return newDirectory(key, o)
}

// DirAt returns the directory at key relative to a snapshot root.
func DirAt(ctx context.Context, h *flux.Handle, key string, root *treeobj.Object) (*Directory, error) {
	o, err := LookupAt(ctx, h, FlagReadDir, key, root)
	if err != nil {
		return nil, err
	}
	return newDirectory(key, o)
}

func newDirectory(key string, o *treeobj.Object) (*Directory, error) {
	if o.Type != treeobj.Dir {
		return nil, fmt.Errorf("%s: lookup returned a %s object, not a dir: %w", key, o.Type, syscall.EPROTO)
	}
	return &Directory{Key: treeobj.NormalizeKey(key), Obj: o}, nil
}

// Names returns the entry names, sorted.
func (d *Directory) Names() []string { return d.Obj.Names() }

// Len returns the number of entries.
func (d *Directory) Len() int { return d.Obj.Len() }

// Entry returns the object of entry name (nil if there is none).
func (d *Directory) Entry(name string) *treeobj.Object { return d.Obj.Entry(name) }

// KeyAt returns the full key of entry name.
func (d *Directory) KeyAt(name string) string { return treeobj.JoinKey(d.Key, name) }

// Copy copies srckey (a value, directory or symlink) to dstkey: the
// destination refers to the same stored objects, so a directory is not
// walked. srcns and dstns may differ.
func Copy(ctx context.Context, h *flux.Handle, srcns, srckey, dstns, dstkey string, commitFlags int) (CommitResult, error) {
	o, err := Lookup(ctx, h, srcns, FlagTreeObj, srckey)
	if err != nil {
		return CommitResult{}, err
	}
	var t Txn
	t.PutTreeobj(dstkey, o)
	return Commit(ctx, h, dstns, commitFlags, &t)
}

// Move is Copy followed by an unlink of srckey (two commits, not atomic,
// as in flux-core).
func Move(ctx context.Context, h *flux.Handle, srcns, srckey, dstns, dstkey string, commitFlags int) (CommitResult, error) {
	if _, err := Copy(ctx, h, srcns, srckey, dstns, dstkey, commitFlags); err != nil {
		return CommitResult{}, err
	}
	var t Txn
	t.Unlink(srckey)
	return Commit(ctx, h, srcns, commitFlags, &t)
}
