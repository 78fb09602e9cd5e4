package filearchive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// BlobStore takes the blobs of the large files of an archive being built.
// Store may return before the blob is stored (to keep several stores in
// flight); Flush waits for all of them and reports the first failure.
type BlobStore interface {
	Store(ref string, data []byte) error
	Flush() error
}

// Builder makes file objects from files on disk.
type Builder struct {
	// Dir is the directory relative paths are taken from ("" is the
	// current directory). Archive paths are relative to it.
	Dir    string
	Params Params
	// Blobs stores the blobs of files over Params.SmallFileThreshold.
	Blobs BlobStore
	// Trace, if set, is called with each file's archive path as it is
	// added.
	Trace func(path string)

	// Files are the file objects made so far, in order: a directory comes
	// after what it holds, so extracting in order can give a read-only
	// directory its mode last.
	Files []map[string]any
	// Blobrefs are the blobs stored so far, in order.
	Blobrefs []string
}

// Add adds the file at p (relative to Dir or absolute) and, if it is a
// directory, everything under it. Its archive path is p made relative:
// leading "/" removed, "." and empty components dropped. A p that leaves
// Dir through ".." is refused.
func (b *Builder) Add(p string) error {
	if b.Params.Chunksize < 0 || b.Params.SmallFileThreshold < 0 {
		return fmt.Errorf("invalid chunk size %d or small file threshold %d", b.Params.Chunksize, b.Params.SmallFileThreshold)
	}
	name := path.Clean("/" + filepath.ToSlash(p))[1:] // "" for "." and "/"
	if rel := path.Clean(filepath.ToSlash(p)); rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s: cannot archive a path leading out of the directory with '..' (use -C to start from its parent)", p)
	}
	full := p
	if !filepath.IsAbs(p) && b.Dir != "" {
		full = filepath.Join(b.Dir, p)
	}
	fi, err := os.Lstat(full)
	if err != nil {
		return fmt.Errorf("%s: %s", p, errnoText(err))
	}
	if fi.IsDir() {
		return b.addDir(full, name, p, fi)
	}
	return b.addFile(full, name, p, fi)
}

// addDir adds what directory full (shown as disp in errors) holds, then
// the directory itself unless it is the archive's root (name "").
func (b *Builder) addDir(full, name, disp string, fi fs.FileInfo) error {
	ents, err := os.ReadDir(full)
	if err != nil {
		return fmt.Errorf("%s: %s", disp, errnoText(err))
	}
	for _, d := range ents {
		cfull := filepath.Join(full, d.Name())
		cdisp := filepath.Join(disp, d.Name())
		cname := d.Name()
		if name != "" {
			cname = name + "/" + d.Name()
		}
		cfi, err := os.Lstat(cfull)
		if err != nil {
			return fmt.Errorf("%s: %s", cdisp, errnoText(err))
		}
		if cfi.IsDir() {
			err = b.addDir(cfull, cname, cdisp, cfi)
		} else {
			err = b.addFile(cfull, cname, cdisp, cfi)
		}
		if err != nil {
			return err
		}
	}
	if name == "" {
		return nil
	}
	return b.addFile(full, name, disp, fi)
}

// addFile adds one file object: a regular file, directory or symlink.
func (b *Builder) addFile(full, name, disp string, fi fs.FileInfo) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("%s: file name is not valid UTF-8, which an archive cannot hold", disp)
	}
	if b.Trace != nil {
		b.Trace(name)
	}
	var obj map[string]any
	var err error
	switch t := fi.Mode().Type(); t {
	case 0:
		obj, err = b.regular(full, disp)
	case fs.ModeDir:
		obj = statFields(fi.Sys().(*syscall.Stat_t))
	case fs.ModeSymlink:
		var target string
		if target, err = os.Readlink(full); err != nil {
			err = fmt.Errorf("readlink %s: %s", disp, errnoText(err))
		} else if !utf8.ValidString(target) {
			err = fmt.Errorf("%s: symbolic link target is not valid UTF-8, which an archive cannot hold", disp)
		} else {
			obj = statFields(fi.Sys().(*syscall.Stat_t))
			obj["data"] = target
		}
	default:
		err = fmt.Errorf("%s: unsupported file type (%s): only regular files, directories and symbolic links can be archived", disp, typeName(t))
	}
	if err != nil {
		return err
	}
	obj["path"] = name
	b.Files = append(b.Files, obj)
	return nil
}

// statFields are the mode, mtime and ctime of a file object.
func statFields(st *syscall.Stat_t) map[string]any {
	return map[string]any{"mode": int64(st.Mode), "mtime": st.Mtim.Sec, "ctime": st.Ctim.Sec}
}

// regular makes the object of a regular file: empty (no data at all,
// holes only), held in the archive (up to the small file threshold), or
// a blobvec of its data regions cut at the chunk size.
func (b *Builder) regular(full, disp string) (map[string]any, error) {
	// O_NONBLOCK: a FIFO swapped in since the Lstat must not block the
	// open; the Fstat then refuses it.
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", disp, errnoText(err))
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("%s: %s", disp, errnoText(err))
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("%s: changed to a file that is not regular while being archived", disp)
	}
	obj := statFields(&st)
	size := st.Size
	regions, err := dataRegions(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", disp, errnoText(err))
	}
	switch {
	case len(regions) == 0:
		obj["size"] = size
	case size <= b.Params.SmallFileThreshold:
		data := make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil {
			return nil, readErr(disp, err)
		}
		small := jobspec.FileEntry(data, 0)
		obj["encoding"], obj["data"], obj["size"] = small["encoding"], small["data"], size
	default:
		vec, err := b.blobvec(f, disp, regions)
		if err != nil {
			return nil, err
		}
		obj["encoding"], obj["data"], obj["size"] = "blobvec", vec, size
	}
	return obj, nil
}

// blobvec stores the data regions of f as blobs and returns their
// [offset, size, blobref] list.
func (b *Builder) blobvec(f *os.File, disp string, regions [][2]int64) ([]any, error) {
	if b.Blobs == nil {
		return nil, fmt.Errorf("%s: no content store to put a large file in", disp)
	}
	vec := []any{}
	for _, r := range regions {
		for off, end := r[0], r[0]+r[1]; off < end; {
			n := end - off
			if b.Params.Chunksize > 0 {
				n = min(n, b.Params.Chunksize)
			}
			data := make([]byte, n)
			if _, err := f.ReadAt(data, off); err != nil {
				return nil, readErr(disp, err)
			}
			ref, err := content.Blobref(b.Params.Hash, data)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", disp, err)
			}
			if err := b.Blobs.Store(ref, data); err != nil {
				return nil, fmt.Errorf("%s: %v", disp, err)
			}
			b.Blobrefs = append(b.Blobrefs, ref)
			vec = append(vec, []any{off, n, ref})
			off += n
		}
	}
	return vec, nil
}

// dataRegions returns the [offset, length] regions of f holding data,
// found with SEEK_DATA/SEEK_HOLE so the holes of a sparse file are left
// out; where the file system cannot say, the whole file is one region.
func dataRegions(f *os.File, size int64) ([][2]int64, error) {
	fd := int(f.Fd())
	var out [][2]int64
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data past off
		}
		if errors.Is(err, unix.EINVAL) && off == 0 {
			return [][2]int64{{0, size}}, nil
		}
		if err != nil {
			return nil, err
		}
		if start >= size {
			break
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		end = min(end, size)
		out = append(out, [2]int64{start, end - start})
		off = end
	}
	return out, nil
}

func readErr(disp string, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: file shrank while being archived", disp)
	}
	return fmt.Errorf("%s: %s", disp, errnoText(err))
}

// typeName names a file type that cannot be archived.
func typeName(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	}
	return t.String()
}

// errnoText is the C library's description of the errno under err (as
// flux-core's tools print it), or err's own text.
func errnoText(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		s := en.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}
