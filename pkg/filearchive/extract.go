package filearchive

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// BlobFetcher loads the blobs of large files. Fetch calls fn with each
// blob of refs in order (loading ahead as it likes) and stops at the
// first error, of a load or of fn.
type BlobFetcher interface {
	Fetch(refs []string, fn func(i int, data []byte) error) error
}

// Extractor writes the files of an archive under a directory.
//
// Regular files, directories and symbolic links are made with the
// archive's permission bits (sticky included, set-user-ID and
// set-group-ID dropped); owners and times are not restored. A directory
// gets its mode after everything has been written, so a read-only one can
// still be filled. Paths are checked first (CheckPath): nothing is written
// for an archive with an absolute path or a "..", and a file is never
// written through a symbolic link found on the way to it.
type Extractor struct {
	// Dir is the destination directory ("" is the current directory).
	Dir string
	// Overwrite replaces existing files and symlinks (and empty
	// directories in the way of a file); without it an existing one is an
	// error. An existing directory is kept either way.
	Overwrite bool
	// Blobs loads the blobs of blobvec-encoded files.
	Blobs BlobFetcher
	// Trace, if set, is called with each path as it is extracted.
	Trace func(path string)

	dirs []dirMode       // directories to give their mode at the end
	safe map[string]bool // directories checked to be real directories
}

type dirMode struct {
	full string
	mode fs.FileMode
}

// Extract writes files (file objects of an archive) in order.
func (x *Extractor) Extract(files []map[string]any) error {
	ents := make([]entry, len(files))
	for i, obj := range files {
		e, err := decodeEntry(i, obj)
		if err != nil {
			return err
		}
		ents[i] = e
	}
	x.dirs, x.safe = nil, map[string]bool{}
	for _, e := range ents {
		if x.Trace != nil {
			x.Trace(e.path)
		}
		if err := x.extract(e); err != nil {
			return err
		}
	}
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		if err := os.Chmod(d.full, d.mode); err != nil {
			return fmt.Errorf("chmod %s: %s", d.full, errnoText(err))
		}
	}
	return nil
}

// perm is the mode bits a file is given: permissions and sticky.
func perm(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	if mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func (x *Extractor) full(p string) string {
	if x.Dir == "" {
		return filepath.FromSlash(p)
	}
	return filepath.Join(x.Dir, filepath.FromSlash(p))
}

func (x *Extractor) extract(e entry) error {
	if err := x.makeParents(e.path); err != nil {
		return err
	}
	full := x.full(e.path)
	if !e.isDir() {
		delete(x.safe, e.path) // whatever was there is replaced
	}
	switch {
	case e.isDir():
		return x.dir(e, full)
	case e.isLink():
		if err := x.clear(e, full); err != nil {
			return err
		}
		if err := os.Symlink(e.obj["data"].(string), full); err != nil {
			return x.createErr(e, err)
		}
		return nil
	default:
		if err := x.clear(e, full); err != nil {
			return err
		}
		return x.regular(e, full)
	}
}

// makeParents checks that the directories on the way to p are real
// directories, not symbolic links, and makes those that are missing.
func (x *Extractor) makeParents(p string) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if x.safe[dir] {
			continue
		}
		full := x.full(dir)
		fi, err := os.Lstat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// another extraction into the same place may make it first
			if err := os.Mkdir(full, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: cannot create directory %s: %s", p, dir, errnoText(err))
			}
			if fi, err := os.Lstat(full); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s: %s changed while being created", p, dir)
			}
		case err != nil:
			return fmt.Errorf("%s: %s: %s", p, dir, errnoText(err))
		case fi.Mode().Type() == fs.ModeSymlink:
			return fmt.Errorf("%s: refusing to extract through symbolic link %s", p, dir)
		case !fi.IsDir():
			return fmt.Errorf("%s: %s is not a directory", p, dir)
		}
		x.safe[dir] = true
	}
	return nil
}

// clear makes way for the file e: with Overwrite it removes what is at
// full (a directory only if empty); without, it leaves it for the create
// to fail on.
func (x *Extractor) clear(e entry, full string) error {
	if !x.Overwrite {
		return nil
	}
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s", e.path, errnoText(err))
	}
	if err := os.Remove(full); err != nil {
		if fi.IsDir() {
			return fmt.Errorf("%s: cannot replace directory: %s", e.path, errnoText(err))
		}
		return fmt.Errorf("%s: cannot replace existing file: %s", e.path, errnoText(err))
	}
	return nil
}

func (x *Extractor) createErr(e entry, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: file exists (use --overwrite to replace it)", e.path)
	}
	return fmt.Errorf("%s: %s", e.path, errnoText(err))
}

// dir makes directory e, or keeps the one there; its mode is set at the
// end of Extract.
func (x *Extractor) dir(e entry, full string) error {
	fi, err := os.Lstat(full)
	switch {
	case err == nil && fi.IsDir():
	case err == nil && !x.Overwrite:
		return x.createErr(e, fs.ErrExist)
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err := x.clear(e, full); err != nil {
			return err
		}
		if err := os.Mkdir(full, 0o700); err != nil {
			if fi, serr := os.Lstat(full); serr != nil || !fi.IsDir() { // not made meanwhile
				return x.createErr(e, err)
			}
		}
	default:
		return fmt.Errorf("%s: %s", e.path, errnoText(err))
	}
	x.safe[e.path] = true
	x.dirs = append(x.dirs, dirMode{full: full, mode: perm(e.mode)})
	return nil
}

// regular writes regular file e: its data, then its size (a sparse file
// keeps its holes), then its mode.
func (x *Extractor) regular(e entry, full string) error {
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return x.createErr(e, err)
	}
	written, werr := x.writeData(e, f)
	if werr == nil && e.size > written {
		if err := f.Truncate(e.size); err != nil {
			werr = fmt.Errorf("%s: %s", e.path, errnoText(err))
		}
	}
	if werr == nil {
		if err := f.Chmod(perm(e.mode)); err != nil {
			werr = fmt.Errorf("%s: %s", e.path, errnoText(err))
		}
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("%s: %s", e.path, errnoText(err))
	}
	return werr
}

// writeData writes the content of e to f and returns the end of what it
// wrote.
func (x *Extractor) writeData(e entry, f *os.File) (int64, error) {
	if enc, _ := e.obj["encoding"].(string); enc == "blobvec" {
		return x.writeBlobvec(e, f)
	}
	data, _, err := jobspec.DecodeFileEntry(e.obj)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", e.path, err)
	}
	if _, err := f.Write(data); err != nil {
		return 0, fmt.Errorf("%s: write: %s", e.path, errnoText(err))
	}
	return int64(len(data)), nil
}

// writeBlobvec writes the [offset, size, blobref] regions of e, each
// loaded from the content store.
func (x *Extractor) writeBlobvec(e entry, f *os.File) (int64, error) {
	vec, ok := e.obj["data"].([]any)
	if !ok {
		return 0, fmt.Errorf("%s: blobvec data is not an array", e.path)
	}
	type region struct {
		off, size int64
		ref       string
	}
	regions := make([]region, len(vec))
	refs := make([]string, len(vec))
	for i, v := range vec {
		t, ok := v.([]any)
		if !ok || len(t) != 3 {
			return 0, fmt.Errorf("%s: blobvec entry %d is not [offset, size, blobref]", e.path, i)
		}
		tuple := map[string]any{"offset": t[0], "size": t[1]}
		off, _, err1 := intField(tuple, "offset")
		size, _, err2 := intField(tuple, "size")
		ref, ok := t[2].(string)
		switch {
		case err1 != nil || err2 != nil || !ok:
			return 0, fmt.Errorf("%s: blobvec entry %d is not [offset, size, blobref]", e.path, i)
		case off < 0 || size < 0 || (e.size >= 0 && off+size > e.size):
			return 0, fmt.Errorf("%s: blobvec entry %d (offset %d, size %d) lies outside the file's %d bytes", e.path, i, off, size, e.size)
		}
		regions[i] = region{off, size, ref}
		refs[i] = ref
	}
	if len(refs) == 0 {
		return 0, nil
	}
	if x.Blobs == nil {
		return 0, fmt.Errorf("%s: no content store to load its blobs from", e.path)
	}
	var end int64
	var writeErr error
	err := x.Blobs.Fetch(refs, func(i int, data []byte) error {
		r := regions[i]
		if int64(len(data)) != r.size {
			writeErr = fmt.Errorf("%s: blob %s holds %d bytes, the archive says %d (offset %d)", e.path, r.ref, len(data), r.size, r.off)
		} else if _, err := f.WriteAt(data, r.off); err != nil {
			writeErr = fmt.Errorf("%s: write: %s", e.path, errnoText(err))
		}
		end = max(end, r.off+r.size)
		return writeErr
	})
	if err != nil && writeErr == nil {
		err = fmt.Errorf("%s: %v", e.path, err) // a load failed
	}
	return end, err
}
