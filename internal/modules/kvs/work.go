package kvs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// How values are kept in a stored directory. flux-core stores every
// value longer than a blobref (72 characters of base64) as a blob behind
// a valref, and each append to a value as one more blob. A job's eventlog
// is appended to a handful of times and its R written once: stored that
// way, most of the blobs a job costs the content store are a hundred
// bytes each, and the directory that points at them is rewritten anyway
// with every commit that touches the job. So fluxgo keeps such values
// in the directory (RFC 11 allows a val of any size) while they are
// small and their directory stays small:
//
//   - a val of up to maxValSize characters is always inline (flux-core's
//     rule);
//   - a val of up to maxInlineVal characters (1 KiB of data) is inline
//     too while the directory's inline values longer than maxValSize
//     total at most dirInlineBudget characters; over budget, the largest
//     go to blobs first;
//   - an append to an inline val extends it in place while the result
//     fits maxInlineVal; past that it becomes a valref of the old data's
//     blob and the appended data's, and later appends add blobs as
//     flux-core's do.
//
// A value stored behind a valref stays there. kvs-watch's WATCH_APPEND
// follows an inline val growing, and its change into a valref.
const (
	maxValSize      = 72
	maxInlineVal    = 1368
	dirInlineBudget = 4096
)

// op is one decoded transaction operation.
type op struct {
	key    string   // as given (for the setroot key list, normalized)
	comps  []string // path components
	flags  int
	dirent *treeobj.Object // nil: unlink
	// raw is the data of an append attached by a module of this broker,
	// not base64-encoded (dirent is then an empty val): appended to an
	// inline val it is encoded once, straight into the new value.
	raw []byte
}

// blob is a new content blob a batch must store: a value's data, or a
// directory (dir set) serialized as data.
type blob struct {
	ref    string
	digest []byte // ref's raw digest
	data   []byte
	dir    *treeobj.Object
}

// work is the in-memory tree a batch changes. Directories copied from
// the committed tree into the work tree are "mutable" (owned by this
// batch); everything else is shared with the committed, immutable tree.
// Each transaction's changes are logged so a failing transaction is
// undone without affecting the others in the batch.
type work struct {
	c        *cache
	hashName string
	ns       string
	rootref  string
	root     *treeobj.Object // mutable copy of the root dir, once needed
	mutable  map[*treeobj.Object]bool
	undo     []undoRec
	blobs    []blob
	missing  []string        // dirs to load before the batch can be applied
	replaced []string        // stored dirs the batch copied (superseded once it is published)
	queued   map[string]bool // refs already in blobs
	// lastParent is the path of the directory the last operation's walk
	// reached (lastDir, mutable): the operations of one job (its J,
	// jobspec, eventlog, R) share it, and skip the walk from the root.
	// Only walks without symlinks are remembered; a rollback forgets it.
	lastParent []string
	lastDir    *treeobj.Object
}

type undoRec struct {
	dir  *treeobj.Object
	name string
	prev *treeobj.Object // nil: the entry did not exist
}

// errMissing reports a directory that must be loaded before the batch
// can be applied. It is not an error of the transaction.
type errMissing struct{ ref string }

func (e errMissing) Error() string { return "missing " + e.ref }

// newWork returns a work tree on rootref. ops, the operations the batch
// holds, sizes its maps and logs: a batch of a burst copies and stores a
// directory per two operations or so (a job's keys share one), and each
// operation and copy logs an undo record; grown step by step, maps
// rehash and slices are copied each time.
func newWork(c *cache, hashName, ns, rootref string, ops int) *work {
	hint := ops/2 + 8
	return &work{c: c, hashName: hashName, ns: ns, rootref: rootref,
		mutable: make(map[*treeobj.Object]bool, hint), queued: make(map[string]bool, hint),
		undo: make([]undoRec, 0, ops+hint), blobs: make([]blob, 0, hint)}
}

// set changes entry name of dir (nil deletes), logging the old entry.
func (w *work) set(dir *treeobj.Object, name string, val *treeobj.Object) {
	w.undo = append(w.undo, undoRec{dir: dir, name: name, prev: dir.Entry(name)})
	dir.Set(name, val)
}

// rollback undoes every change after undo record mark.
func (w *work) rollback(mark, blobMark int) {
	w.lastParent, w.lastDir = nil, nil
	for i := len(w.undo) - 1; i >= mark; i-- {
		u := w.undo[i]
		u.dir.Set(u.name, u.prev)
	}
	w.undo = w.undo[:mark]
	for _, b := range w.blobs[blobMark:] {
		delete(w.queued, b.ref)
	}
	w.blobs = w.blobs[:blobMark]
}

// rootDir returns the mutable root directory.
func (w *work) rootDir() (*treeobj.Object, error) {
	if w.root != nil {
		return w.root, nil
	}
	d, ok, err := w.c.getDir(w.rootref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errMissing{w.rootref}
	}
	w.root = d.CopyDir()
	w.mutable[w.root] = true
	w.replaced = append(w.replaced, w.rootref)
	return w.root, nil
}

// apply applies one transaction's operations. On error the transaction's
// changes are undone. Directories missing from the cache are collected in
// w.missing (and the transaction reports errMissing): the batch must load
// them and start over.
func (w *work) apply(ops []op) error {
	mark, blobMark, nmiss := len(w.undo), len(w.blobs), len(w.missing)
	for i := range ops {
		o := &ops[i]
		err := w.link(o.comps, o.flags, o.dirent, o.raw, 0)
		if err == nil {
			continue
		}
		if m, ok := err.(errMissing); ok {
			w.missing = append(w.missing, m.ref)
			continue
		}
		w.rollback(mark, blobMark)
		return fmt.Errorf("%s: %w", treeobj.NormalizeKey(o.key), err)
	}
	if len(w.missing) > nmiss {
		return errMissing{w.missing[nmiss]}
	}
	return nil
}

// subdir returns the mutable directory entry name of dir, creating or
// copying it as needed. It returns nil (and no error) when the entry
// does not exist and create is false.
func (w *work) subdir(dir *treeobj.Object, name string, create bool) (*treeobj.Object, error) {
	e := dir.Entry(name)
	var nd *treeobj.Object
	switch {
	case e == nil:
		if !create {
			return nil, nil
		}
		nd = treeobj.NewDir()
	case e.Type == treeobj.Dir && w.mutable[e]:
		return e, nil
	case e.Type == treeobj.Dir:
		nd = e.CopyDir()
	case e.Type == treeobj.Dirref:
		d, ok, err := w.c.getDir(e.Refs[0])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errMissing{e.Refs[0]}
		}
		nd = d.CopyDir()
		w.replaced = append(w.replaced, e.Refs[0])
	default: // a value where a directory is needed: replace it
		if !create {
			return nil, nil
		}
		nd = treeobj.NewDir()
	}
	w.mutable[nd] = true
	w.set(dir, name, nd)
	return nd, nil
}

// link puts dirent (nil: unlink) at the path comps; raw, if not nil, is
// an append's data in place of dirent's (see op).
func (w *work) link(comps []string, flags int, dirent *treeobj.Object, raw []byte, depth int) error {
	if len(comps) == 0 {
		return fmt.Errorf("the root directory cannot be written: %w", syscall.EINVAL)
	}
	parent := comps[:len(comps)-1]
	var dir *treeobj.Object
	if depth == 0 && w.lastDir != nil && slices.Equal(w.lastParent, parent) {
		dir = w.lastDir // the last operation's directory: no walk
	} else {
		var err error
		if dir, err = w.rootDir(); err != nil {
			return err
		}
		for i, name := range parent {
			if e := dir.Entry(name); e != nil && e.Type == treeobj.Symlink {
				if e.Namespace != "" && e.Namespace != w.ns {
					return fmt.Errorf("symlink %q leads to namespace %q: a commit cannot cross namespaces: %w",
						name, e.Namespace, syscall.EINVAL)
				}
				if depth >= symlinkLimit {
					return fmt.Errorf("more than %d symlinks: %w", symlinkLimit, syscall.ELOOP)
				}
				// through a symlink, any directory may change: forget
				w.lastParent, w.lastDir = nil, nil
				rest := append(treeobj.SplitKey(e.Target), comps[i+1:]...)
				return w.link(rest, flags, dirent, raw, depth+1)
			}
			next, err := w.subdir(dir, name, dirent != nil)
			if err != nil {
				return err
			}
			if next == nil {
				return nil // unlinking under a path that does not exist
			}
			dir = next
		}
		if depth == 0 {
			w.lastParent, w.lastDir = parent, dir
		}
	}
	name := comps[len(comps)-1]
	switch {
	case dirent == nil:
		if dir.Entry(name) != nil {
			w.set(dir, name, nil)
		}
		return nil
	case flags&flagAppend != 0:
		return w.append(dir, name, dirent, raw)
	default:
		w.set(dir, name, dirent)
		return nil
	}
}

// append adds a val's data to the value at entry name of dir, turning it
// into (or extending) a valref, so the existing data is never rewritten.
// An attached append gives its data as raw (non-nil) instead of in
// dirent: it is encoded once, straight into the value it extends.
func (w *work) append(dir *treeobj.Object, name string, dirent *treeobj.Object, raw []byte) error {
	if raw == nil && dirent.Type != treeobj.Val {
		return fmt.Errorf("append needs a val object, not %s: %w", dirent.Type, syscall.EPROTO)
	}
	e := dir.Entry(name)
	if e == nil {
		if raw != nil {
			dirent = treeobj.NewVal(raw)
		}
		w.set(dir, name, dirent)
		return nil
	}
	switch e.Type {
	case treeobj.Valref:
		ref, err := w.storeAppended(dirent, raw)
		if err != nil {
			return err
		}
		w.set(dir, name, e.AppendRef(ref))
	case treeobj.Val:
		added := len(dirent.Data)
		if raw != nil {
			added = base64.StdEncoding.EncodedLen(len(raw))
		}
		if len(e.Data)+added <= maxInlineVal {
			var v *treeobj.Object
			var err error
			if raw != nil {
				v, err = treeobj.AppendRaw(e, raw)
			} else {
				v, err = treeobj.AppendVal(e, dirent)
			}
			if err == nil {
				w.set(dir, name, v)
				return nil
			}
		}
		ref1, err := w.storeVal(e)
		if err != nil {
			return err
		}
		ref2, err := w.storeAppended(dirent, raw)
		if err != nil {
			return err
		}
		w.set(dir, name, treeobj.NewValref(ref1).AppendRef(ref2))
	case treeobj.Symlink:
		return fmt.Errorf("cannot append to a symlink: %w", syscall.EOPNOTSUPP)
	case treeobj.Dir, treeobj.Dirref:
		return fmt.Errorf("cannot append to a directory: %w", syscall.EISDIR)
	default:
		return fmt.Errorf("corrupt tree object: %w", syscall.ENOTRECOVERABLE)
	}
	return nil
}

// storeAppended queues an append's data as a blob: raw's if not nil (a
// copy: the blob outlives the sender's buffer), else dirent's.
func (w *work) storeAppended(dirent *treeobj.Object, raw []byte) (string, error) {
	if raw != nil {
		return w.storeData(bytes.Clone(raw))
	}
	return w.storeVal(dirent)
}

// storeVal queues the data of a val as a blob and returns its blobref.
func (w *work) storeVal(v *treeobj.Object) (string, error) {
	data, err := base64.StdEncoding.DecodeString(v.Data)
	if err != nil {
		return "", fmt.Errorf("val data: %v: %w", err, syscall.EPROTO)
	}
	return w.storeData(data)
}

// spill stores the val at entry i of dir as a blob behind a valref.
func (w *work) spill(dir *treeobj.Object, i int) error {
	ref, err := w.storeVal(dir.Entries()[i].Obj)
	if err != nil {
		return err
	}
	dir.SetAt(i, treeobj.NewValref(ref))
	return nil
}

func (w *work) storeData(data []byte) (string, error) {
	ref, digest, err := content.Name(w.hashName, data)
	if err != nil {
		return "", err
	}
	if !w.queued[ref] && !w.c.isStored(ref) {
		w.queued[ref] = true
		w.blobs = append(w.blobs, blob{ref: ref, digest: digest, data: data})
	}
	return ref, nil
}

// unroll turns the work tree into stored form, depth first: every dir
// becomes a dirref to its serialized blob and every long val a valref.
// It returns the new root's blobref. The blobs to store are in w.blobs;
// the directories in it are immutable from here on.
func (w *work) unroll() (string, error) {
	if w.root == nil {
		return w.rootref, nil
	}
	return w.unrollDir(w.root)
}

func (w *work) unrollDir(dir *treeobj.Object) (string, error) {
	var inline []int // vals kept inline if the budget allows
	total := 0
	for i, de := range dir.Entries() {
		e := de.Obj
		switch e.Type {
		case treeobj.Dir:
			ref, err := w.unrollDir(e)
			if err != nil {
				return "", err
			}
			dir.SetAt(i, treeobj.NewDirref(ref))
		case treeobj.Val:
			switch n := len(e.Data); {
			case n > maxInlineVal:
				if err := w.spill(dir, i); err != nil {
					return "", err
				}
			case n > maxValSize:
				inline = append(inline, i)
				total += n
			}
		}
	}
	if total > dirInlineBudget {
		ents := dir.Entries()
		sort.Slice(inline, func(a, b int) bool { return len(ents[inline[a]].Obj.Data) > len(ents[inline[b]].Obj.Data) })
		for _, i := range inline {
			total -= len(ents[i].Obj.Data)
			if err := w.spill(dir, i); err != nil {
				return "", err
			}
			if total <= dirInlineBudget {
				break
			}
		}
	}
	enc := dir.Encode()
	ref, digest, err := content.Name(w.hashName, enc)
	if err != nil {
		return "", err
	}
	if !w.queued[ref] && !w.c.isStored(ref) {
		w.queued[ref] = true
		w.blobs = append(w.blobs, blob{ref: ref, digest: digest, data: enc, dir: dir})
	}
	return ref, nil
}
