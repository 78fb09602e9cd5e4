package kvs

import (
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// Lookup flags (flux-core's FLUX_KVS_* values).
const (
	flagReadDir     = 0x01
	flagReadLink    = 0x02
	flagWatch       = 0x04
	flagWaitCreate  = 0x08
	flagTreeObj     = 0x10
	flagAppend      = 0x20
	flagWatchFull   = 0x40
	flagWatchUniq   = 0x80
	flagWatchAppend = 0x100
	flagStream      = 0x200
)

// Commit flags.
const (
	commitNoMerge = 0x01
	commitCompact = 0x02
	commitSync    = 0x04
)

// symlinkLimit bounds how many symlinks one lookup follows (ELOOP).
const symlinkLimit = 10

// nsResolver gives a lookup the current root of another namespace (for
// symlinks that name one). ok=false means the namespace must be fetched
// first; err is set when it does not exist or access is denied.
type nsResolver func(ns string) (rootref string, ok bool, err error)

// lookupReq is one lookup: a key under the root rootref of namespace ns.
type lookupReq struct {
	ns      string
	rootref string
	key     string
	flags   int
	resolve nsResolver
}

// lookupResult is what a lookup pass produced: a value (nil with a nil
// error means the key does not exist), an error, or the blobs and
// namespaces to fetch before trying again.
type lookupResult struct {
	val       *treeobj.Object
	err       error
	missing   []string
	missingNS string
}

func (r *lookupResult) stalled() bool { return len(r.missing) > 0 || r.missingNS != "" }

// lookup runs a lookup against the cache. It never blocks: when objects
// are missing it says which, and the caller loads them and runs it again.
func (c *cache) lookup(q *lookupReq) lookupResult {
	key := treeobj.NormalizeKey(q.key)
	if key == treeobj.Root {
		return c.lookupRoot(q)
	}
	dirent, res := c.walk(q.ns, q.rootref, treeobj.SplitKey(key), q.flags, 0, q.resolve)
	if res.err != nil || res.stalled() || dirent == nil {
		return res
	}
	return c.value(dirent, q.flags, key)
}

func (c *cache) lookupRoot(q *lookupReq) lookupResult {
	if q.flags&flagTreeObj != 0 {
		return lookupResult{val: treeobj.NewDirref(q.rootref)}
	}
	if q.flags&flagReadDir == 0 {
		return lookupResult{err: bare(syscall.EISDIR)}
	}
	dir, ok, err := c.getDir(q.rootref)
	if err != nil {
		return lookupResult{err: err}
	}
	if !ok {
		return lookupResult{missing: []string{q.rootref}}
	}
	return lookupResult{val: dir}
}

// walk resolves path components from the dir at rootref, following
// symlinks (always in the middle of a path; at the end unless READLINK or
// TREEOBJ). It returns the final dirent, or nil when it does not exist.
func (c *cache) walk(ns, rootref string, comps []string, flags, depth int, resolve nsResolver) (*treeobj.Object, lookupResult) {
	dirent := treeobj.NewDirref(rootref)
	for i, name := range comps {
		var dir *treeobj.Object
		switch dirent.Type {
		case treeobj.Dirref:
			d, ok, err := c.getDir(dirent.Refs[0])
			if err != nil {
				return nil, lookupResult{err: err}
			}
			if !ok {
				return nil, lookupResult{missing: []string{dirent.Refs[0]}}
			}
			dir = d
		case treeobj.Dir:
			dir = dirent
		default: // a value in the middle of the path: the key does not exist
			return nil, lookupResult{}
		}
		dirent = dir.Entry(name)
		if dirent == nil {
			return nil, lookupResult{}
		}
		last := i == len(comps)-1
		if dirent.Type != treeobj.Symlink || (last && flags&(flagReadLink|flagTreeObj) != 0) {
			continue
		}
		if depth >= symlinkLimit {
			return nil, lookupResult{err: bare(syscall.ELOOP)}
		}
		tns, troot := ns, rootref
		if dirent.Namespace != "" && dirent.Namespace != ns {
			if resolve == nil {
				return nil, lookupResult{err: fmt.Errorf("symlink to namespace %q cannot be followed here: %w", dirent.Namespace, syscall.EINVAL)}
			}
			ref, ok, err := resolve(dirent.Namespace)
			if err != nil {
				return nil, lookupResult{err: err}
			}
			if !ok {
				return nil, lookupResult{missingNS: dirent.Namespace}
			}
			tns, troot = dirent.Namespace, ref
		}
		rest := append(treeobj.SplitKey(dirent.Target), comps[i+1:]...)
		if len(rest) == 0 {
			// a link to the root directory
			return treeobj.NewDirref(troot), lookupResult{}
		}
		return c.walk(tns, troot, rest, flags, depth+1, resolve)
	}
	return dirent, lookupResult{}
}

// value turns the dirent found by a walk into the lookup's answer.
func (c *cache) value(dirent *treeobj.Object, flags int, key string) lookupResult {
	if flags&flagTreeObj != 0 {
		return lookupResult{val: dirent}
	}
	switch dirent.Type {
	case treeobj.Dirref, treeobj.Dir:
		if flags&flagReadLink != 0 {
			return lookupResult{err: bare(syscall.EINVAL)}
		}
		if flags&flagReadDir == 0 {
			return lookupResult{err: bare(syscall.EISDIR)}
		}
		if dirent.Type == treeobj.Dir {
			return lookupResult{val: dirent}
		}
		dir, ok, err := c.getDir(dirent.Refs[0])
		if err != nil {
			return lookupResult{err: err}
		}
		if !ok {
			return lookupResult{missing: []string{dirent.Refs[0]}}
		}
		return lookupResult{val: dir}
	case treeobj.Valref:
		if flags&flagReadLink != 0 {
			return lookupResult{err: bare(syscall.EINVAL)}
		}
		if flags&flagReadDir != 0 {
			return lookupResult{err: bare(syscall.ENOTDIR)}
		}
		data, missing := c.valrefData(dirent)
		if len(missing) > 0 {
			return lookupResult{missing: missing}
		}
		return lookupResult{val: treeobj.NewVal(data)}
	case treeobj.Val:
		if flags&flagReadLink != 0 {
			return lookupResult{err: bare(syscall.EINVAL)}
		}
		if flags&flagReadDir != 0 {
			return lookupResult{err: bare(syscall.ENOTDIR)}
		}
		return lookupResult{val: dirent}
	case treeobj.Symlink:
		if flags&flagReadDir != 0 {
			return lookupResult{err: bare(syscall.ENOTDIR)}
		}
		return lookupResult{val: dirent}
	}
	return lookupResult{err: fmt.Errorf("%s: corrupt tree object: %w", key, syscall.ENOTRECOVERABLE)}
}

// bare is an error response carrying only an errno, as flux-core's KVS
// sends for the ordinary lookup outcomes (the client prints strerror).
func bare(errno syscall.Errno) error { return flux.NewError(errno, "") }

// valrefData concatenates the blobs of a valref, or lists those missing.
func (c *cache) valrefData(o *treeobj.Object) ([]byte, []string) {
	var missing []string
	size := 0
	for _, ref := range o.Refs {
		d, ok := c.getData(ref)
		if !ok {
			missing = append(missing, ref)
			continue
		}
		size += len(d)
	}
	if len(missing) > 0 {
		return nil, dedupe(missing)
	}
	if len(o.Refs) == 1 {
		d, _ := c.getData(o.Refs[0])
		return d, nil
	}
	buf := make([]byte, 0, size)
	for _, ref := range o.Refs {
		d, _ := c.getData(ref)
		buf = append(buf, d...)
	}
	return buf, nil
}

func dedupe(refs []string) []string {
	if len(refs) < 2 {
		return refs
	}
	seen := make(map[string]bool, len(refs))
	out := refs[:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
