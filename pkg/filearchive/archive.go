// Package filearchive builds and extracts RFC 37 file archives in array
// form, the format flux archive keeps under archive.NAME in the KVS.
//
// An archive is a JSON array of file objects (regular files, directories
// and symbolic links) with paths relative to the directory it was made
// from. A small regular file is held in its object (utf-8 or base64, see
// jobspec.FileEntry); a larger one is cut into blobs of the content store
// (RFC 10) that its object lists as a "blobvec" of [offset, size, blobref]
// regions, holes of a sparse file left out. The content store is reached
// through the narrow BlobStore and BlobFetcher interfaces, so the package
// works the same against an instance and against an in-memory map.
package filearchive

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strings"
	"syscall"
)

// Params are how Builder encodes regular files.
type Params struct {
	// Hash names the content store's hash (the content.hash attribute),
	// e.g. "sha1": blobrefs are made with it.
	Hash string
	// Chunksize is the largest blob in bytes; 0 is unlimited (one blob
	// per data region of a file).
	Chunksize int64
	// SmallFileThreshold is the size in bytes up to which a regular file
	// is held in the archive itself; larger ones go to the content store.
	// 0 sends every file with data to the content store.
	SmallFileThreshold int64
}

// DefaultParams are flux archive create's defaults: 1 MiB blobs, files
// up to 1 KiB held in the archive, sha1.
func DefaultParams() Params {
	return Params{Hash: "sha1", Chunksize: 1 << 20, SmallFileThreshold: 1 << 10}
}

// Decode parses an archive: a JSON array of file objects.
func Decode(b []byte) ([]map[string]any, error) {
	var files []map[string]any
	if err := json.Unmarshal(b, &files); err != nil {
		return nil, fmt.Errorf("not an RFC 37 archive (a JSON array of file objects): %v", err)
	}
	return files, nil
}

// entry is a file object checked and decoded for extraction and listing.
type entry struct {
	path string // cleaned, relative, without ".." (CheckPath)
	mode uint32 // st_mode: type and permission bits
	size int64  // -1 when the object has none
	obj  map[string]any
}

func (e entry) isReg() bool  { return e.mode&syscall.S_IFMT == syscall.S_IFREG }
func (e entry) isDir() bool  { return e.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (e entry) isLink() bool { return e.mode&syscall.S_IFMT == syscall.S_IFLNK }

// decodeEntry checks file object number i of an archive.
func decodeEntry(i int, obj map[string]any) (entry, error) {
	p, ok := obj["path"].(string)
	if !ok {
		return entry{}, fmt.Errorf("archive entry %d: path is missing or not a string", i)
	}
	clean, err := CheckPath(p)
	if err != nil {
		return entry{}, err
	}
	mode, ok, err := intField(obj, "mode")
	if err == nil && !ok {
		err = fmt.Errorf("mode is missing")
	}
	if err == nil && (mode < 0 || mode > math.MaxUint32) {
		err = fmt.Errorf("mode %d is out of range", mode)
	}
	if err != nil {
		return entry{}, fmt.Errorf("%s: %v", p, err)
	}
	size, ok, err := intField(obj, "size")
	if err == nil && ok && size < 0 {
		err = fmt.Errorf("size %d is negative", size)
	}
	if err != nil {
		return entry{}, fmt.Errorf("%s: %v", p, err)
	}
	if !ok {
		size = -1
	}
	e := entry{path: clean, mode: uint32(mode), size: size, obj: obj}
	if !e.isReg() && !e.isDir() && !e.isLink() {
		return entry{}, fmt.Errorf("%s: unsupported file type (mode 0%o)", p, mode)
	}
	if _, ok := obj["data"].(string); e.isLink() && !ok {
		return entry{}, fmt.Errorf("%s: symbolic link without a target (data)", p)
	}
	return e, nil
}

// intField returns the integer obj[key] (JSON numbers decode as float64),
// whether it is there, and an error when it is not an integer.
func intField(obj map[string]any, key string) (int64, bool, error) {
	v, ok := obj[key]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, true, fmt.Errorf("%s %v is not an integer", key, n)
		}
		return int64(n), true, nil
	case int64:
		return n, true, nil
	case int:
		return int64(n), true, nil
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, true, fmt.Errorf("%s %s is not an integer", key, n)
		}
		return i, true, nil
	}
	return 0, true, fmt.Errorf("%s is not a number", key)
}

// CheckPath checks the path of a file object before it is extracted and
// returns it cleaned ("./a//b" is "a/b"). An absolute path, a path with a
// ".." component and one naming the destination itself are refused: they
// would write outside the destination directory or replace it.
func CheckPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("archive entry with an empty path")
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%s: refusing to extract an absolute path", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("%s: refusing to extract a path containing '..'", p)
		}
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("%s: refusing to extract a path naming the destination directory", p)
	}
	return clean, nil
}

// ListLine is a file object as flux archive list shows it: its path, or
// with long "TYPE 0PERM SIZE PATH" where TYPE is f, d or l.
func ListLine(i int, obj map[string]any, long bool) (string, error) {
	e, err := decodeEntry(i, obj)
	if err != nil {
		return "", err
	}
	if !long {
		return e.path, nil
	}
	t := "f"
	switch {
	case e.isDir():
		t = "d"
	case e.isLink():
		t = "l"
	}
	return fmt.Sprintf("%s 0%o %8d %s", t, e.mode&0o7777, max(e.size, 0), e.path), nil
}

// Filter returns the file objects whose path matches the shell pattern
// (see Match).
func Filter(files []map[string]any, pattern string) []map[string]any {
	var out []map[string]any
	for _, f := range files {
		if p, ok := f["path"].(string); ok && Match(pattern, p) {
			out = append(out, f)
		}
	}
	return out
}
