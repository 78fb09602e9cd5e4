package filearchive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

// memBlobs is an in-memory content store: it checks that every blob is
// stored under its own blobref.
type memBlobs struct {
	t     *testing.T
	blobs map[string][]byte
}

func newMemBlobs(t *testing.T) *memBlobs { return &memBlobs{t: t, blobs: map[string][]byte{}} }

func (m *memBlobs) Store(ref string, data []byte) error {
	hash, _, err := content.Parse(ref)
	if err != nil {
		return err
	}
	if want, _ := content.Blobref(hash, data); want != ref {
		m.t.Fatalf("blob stored as %s is %s", ref, want)
	}
	m.blobs[ref] = bytes.Clone(data)
	return nil
}

func (m *memBlobs) Flush() error { return nil }

func (m *memBlobs) Fetch(refs []string, fn func(int, []byte) error) error {
	for i, ref := range refs {
		data, ok := m.blobs[ref]
		if !ok {
			return fmt.Errorf("load %s: No such file or directory", ref)
		}
		if err := fn(i, data); err != nil {
			return err
		}
	}
	return nil
}

// node is what a test tree compares: type, permissions, content or
// link target, and blocks allocated (for holes).
type node struct {
	Mode fs.FileMode
	Data string
}

func readTree(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{Mode: fi.Mode()}
		switch {
		case fi.Mode().Type() == fs.ModeSymlink:
			n.Data, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			n.Data = string(b)
		}
		out[rel] = n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t *testing.T, p string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// roundTrip builds an archive of dir's contents, passes it through JSON
// as the KVS holds it, and extracts it into a new directory.
func roundTrip(t *testing.T, src string, p Params, blobs *memBlobs) ([]map[string]any, string) {
	t.Helper()
	b := Builder{Dir: src, Params: p, Blobs: blobs}
	if err := b.Add("."); err != nil {
		t.Fatal(err)
	}
	enc, err := json.Marshal(b.Files)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	x := Extractor{Dir: dst, Blobs: blobs}
	if err := x.Extract(files); err != nil {
		t.Fatal(err)
	}
	return files, dst
}

// TestRoundTrip: a tree of text, binary, large, empty and sparse files,
// symlinks and directories (one read-only, one sticky) comes back with
// the same types, permissions, contents and link targets.
func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes
	big[5] = 0xff
	write(t, filepath.Join(src, "a.txt"), []byte("hello\n"), 0o640)
	write(t, filepath.Join(src, "bin"), []byte{0, 1, 2, 0xfe}, 0o751)
	write(t, filepath.Join(src, "sub", "big"), big, 0o600)
	write(t, filepath.Join(src, "sub", "deeper", "empty"), nil, 0o644)
	write(t, filepath.Join(src, "ro", "inside"), []byte("x"), 0o444)
	os.Chmod(filepath.Join(src, "ro"), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "ro"), 0o755) })
	os.Mkdir(filepath.Join(src, "sticky"), 0o755)
	os.Chmod(filepath.Join(src, "sticky"), 0o1777)
	os.Symlink("a.txt", filepath.Join(src, "link"))
	os.Symlink("/no/such/target", filepath.Join(src, "sub", "abs"))
	sparse := filepath.Join(src, "sparse")
	write(t, sparse, nil, 0o644)
	os.Truncate(sparse, 1<<20)
	f, _ := os.OpenFile(sparse, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("tail"))
	f.Close()

	blobs := newMemBlobs(t)
	p := Params{Hash: "sha1", Chunksize: 4096, SmallFileThreshold: 1024}
	files, dst := roundTrip(t, src, p, blobs)
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	if a, b := readTree(t, src), readTree(t, dst); !reflect.DeepEqual(a, b) {
		t.Errorf("extracted tree differs (-src +dst):\n%v\n%v", a, b)
	}

	byPath := map[string]map[string]any{}
	var order []string
	for _, f := range files {
		byPath[f["path"].(string)] = f
		order = append(order, f["path"].(string))
	}
	if got := byPath["a.txt"]; got["encoding"] != "utf-8" || got["data"] != "hello\n" || got["size"] != float64(6) {
		t.Errorf("a.txt: %v", got)
	}
	if got := byPath["bin"]; got["encoding"] != "base64" || got["mode"] != float64(0o100751) {
		t.Errorf("bin: %v", got)
	}
	if got := byPath["sub/big"]; got["encoding"] != "blobvec" || len(got["data"].([]any)) != 4 {
		t.Errorf("sub/big: want 4 blobs of at most 4096 bytes, got %v", got["data"])
	}
	if got := byPath["sub/deeper/empty"]; got["data"] != nil || got["encoding"] != nil || got["size"] != float64(0) {
		t.Errorf("empty: %v", got)
	}
	if got := byPath["link"]; got["data"] != "a.txt" || got["mode"].(float64) != float64(syscall.S_IFLNK|0o777) {
		t.Errorf("link: %v", got)
	}
	if _, ok := byPath["."]; ok {
		t.Errorf("the archive's root is an entry: %v", order)
	}
	// a directory comes after what it holds
	pos := map[string]int{}
	for i, p := range order {
		pos[p] = i
	}
	idx := func(p string) int { return pos[p] }
	if idx("sub") < idx("sub/big") || idx("ro") < idx("ro/inside") {
		t.Errorf("directories before their contents: %v", order)
	}
	// holes are not stored: only the data at the end of the sparse file
	if vec := byPath["sparse"]["data"].([]any); byPath["sparse"]["encoding"] == "blobvec" {
		last := vec[len(vec)-1].([]any)
		if vec[0].([]any)[0].(float64) == 0 && len(vec) > 2 {
			t.Logf("file system without SEEK_HOLE: sparse stored whole (%d blobs)", len(vec))
		} else if last[0].(float64)+last[1].(float64) != 1<<20+4 {
			t.Errorf("sparse: %v", vec)
		}
	}
}

// TestCreatePaths: "-C dir ." gives paths relative to dir; an absolute
// path loses its "/"; a path through ".." out of the directory and a
// FIFO are refused naming the file.
func TestCreatePaths(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "d", "f"), []byte("x"), 0o644)
	b := Builder{Dir: src, Params: DefaultParams()}
	for _, p := range []string{"./d/f", filepath.Join(src, "d", "f")} {
		if err := b.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Files[0]["path"], "d/f"; got != want {
		t.Errorf("path %v, want %v", got, want)
	}
	if got, want := b.Files[1]["path"], strings.TrimPrefix(filepath.Join(src, "d", "f"), "/"); got != want {
		t.Errorf("path %v, want %v", got, want)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"../x":    "../x: cannot archive a path leading out",
		"d/../..": "d/../..: cannot archive a path leading out",
		"fifo":    "fifo: unsupported file type (FIFO)",
		"nofile":  "nofile: No such file or directory",
	} {
		if err := b.Add(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Add(%q): %v, want %q", p, err, want)
		}
	}
	if err := (&Builder{Dir: src, Params: Params{Hash: "sha1", Chunksize: 1}}).Add("d"); err == nil || !strings.Contains(err.Error(), "no content store") {
		t.Errorf("large file without a content store: %v", err)
	}
}

// TestSmallFileThresholdZero: a threshold of 0 sends every file with data
// to the content store; an unlimited chunk size stores it as one blob.
func TestSmallFileThresholdZero(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "f"), bytes.Repeat([]byte("z"), 3000), 0o644)
	blobs := newMemBlobs(t)
	files, _ := roundTrip(t, src, Params{Hash: "sha256", Chunksize: 0, SmallFileThreshold: 0}, blobs)
	vec := files[0]["data"].([]any)
	if files[0]["encoding"] != "blobvec" || len(vec) != 1 || !strings.HasPrefix(vec[0].([]any)[2].(string), "sha256-") {
		t.Errorf("got %v", files[0])
	}
}

// TestExtractRefusesUnsafePaths: absolute paths, ".." and the destination
// itself are refused before anything is written; a file is not written
// through a symlink the archive made.
func TestExtractRefusesUnsafePaths(t *testing.T) {
	file := func(p string) map[string]any {
		return map[string]any{"path": p, "mode": float64(0o100644), "encoding": "utf-8", "data": "pwned", "size": float64(5)}
	}
	for _, tc := range []struct {
		path, want string
	}{
		{"/etc/x", "/etc/x: refusing to extract an absolute path"},
		{"../x", "../x: refusing to extract a path containing '..'"},
		{"a/../../x", "a/../../x: refusing to extract a path containing '..'"},
		{"./.", "./.: refusing to extract a path naming the destination"},
		{"", "empty path"},
	} {
		dst := t.TempDir()
		x := Extractor{Dir: dst}
		err := x.Extract([]map[string]any{file("ok"), file(tc.path)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.path, err, tc.want)
		}
		if ents, _ := os.ReadDir(dst); len(ents) != 0 {
			t.Errorf("%q: wrote %v before refusing", tc.path, ents)
		}
	}
	outside := t.TempDir()
	dst := t.TempDir()
	x := Extractor{Dir: dst}
	err := x.Extract([]map[string]any{
		{"path": "a", "mode": float64(syscall.S_IFLNK | 0o777), "data": outside},
		file("a/x"),
	})
	if err == nil || !strings.Contains(err.Error(), "a/x: refusing to extract through symbolic link a") {
		t.Errorf("through symlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("wrote through the symlink")
	}
}

// TestExtractOverwrite: an existing file is an error naming it unless
// Overwrite; an existing directory is kept either way.
func TestExtractOverwrite(t *testing.T) {
	dst := t.TempDir()
	write(t, filepath.Join(dst, "d", "f"), []byte("old"), 0o644)
	files := []map[string]any{
		{"path": "d/f", "mode": float64(0o100600), "encoding": "utf-8", "data": "new", "size": float64(3)},
		{"path": "d", "mode": float64(0o40750)},
	}
	x := Extractor{Dir: dst}
	if err := x.Extract(files); err == nil || err.Error() != "d/f: file exists (use --overwrite to replace it)" {
		t.Fatalf("no overwrite: %v", err)
	}
	x.Overwrite = true
	if err := x.Extract(files); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dst)
	want := map[string]node{"d": {Mode: fs.ModeDir | 0o750}, "d/f": {Mode: 0o600, Data: "new"}}
	if a, b := want, got; !reflect.DeepEqual(a, b) {
		t.Errorf("(-want +got):\n%v\n%v", a, b)
	}
}

// TestExtractBadEntries: malformed objects and missing or wrong blobs are
// errors naming the file and the problem.
func TestExtractBadEntries(t *testing.T) {
	blobs := newMemBlobs(t)
	ref, _ := content.Blobref("sha1", []byte("abc"))
	blobs.Store(ref, []byte("abc"))
	missing, _ := content.Blobref("sha1", []byte("zzz"))
	for _, tc := range []struct {
		obj  string
		want string
	}{
		{`{"mode":33188}`, "archive entry 0: path is missing"},
		{`{"path":"f"}`, "f: mode is missing"},
		{`{"path":"f","mode":"x"}`, "f: mode is not a number"},
		{`{"path":"f","mode":8592}`, "f: unsupported file type (mode 020620)"},
		{`{"path":"l","mode":41471}`, "l: symbolic link without a target"},
		{`{"path":"f","mode":33188,"encoding":"gzip","data":"x"}`, `f: unsupported encoding "gzip"`},
		{`{"path":"f","mode":33188,"encoding":"base64","data":"!!"}`, "f: illegal base64"},
		{`{"path":"f","mode":33188,"size":3,"encoding":"blobvec","data":[[0,3,"` + missing + `"]]}`, "f: load " + missing},
		{`{"path":"f","mode":33188,"size":4,"encoding":"blobvec","data":[[0,4,"` + ref + `"]]}`, "f: blob " + ref + " holds 3 bytes, the archive says 4"},
		{`{"path":"f","mode":33188,"size":3,"encoding":"blobvec","data":[[2,3,"` + ref + `"]]}`, "f: blobvec entry 0 (offset 2, size 3) lies outside the file's 3 bytes"},
		{`{"path":"f","mode":33188,"size":3,"encoding":"blobvec","data":[[0,3]]}`, "f: blobvec entry 0 is not [offset, size, blobref]"},
	} {
		files, err := Decode([]byte("[" + tc.obj + "]"))
		if err != nil {
			t.Fatal(err)
		}
		x := Extractor{Dir: t.TempDir(), Blobs: blobs}
		if err := x.Extract(files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.obj, err, tc.want)
		}
	}
	if _, err := Decode([]byte(`{"path":"f"}`)); err == nil || !strings.Contains(err.Error(), "not an RFC 37 archive") {
		t.Errorf("object as archive: %v", err)
	}
}

// TestListLine: the short and long forms of flux archive list.
func TestListLine(t *testing.T) {
	files, _ := Decode([]byte(`[{"path":"testfile2","mode":33188,"size":2048},{"path":"testdir","mode":16877},{"path":"l","mode":41471,"data":"x"}]`))
	var got []string
	for i, f := range files {
		s, _ := ListLine(i, f, false)
		l, err := ListLine(i, f, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s, l)
	}
	want := []string{"testfile2", "f 0644     2048 testfile2", "testdir", "d 0755        0 testdir", "l", "l 0777        0 l"}
	if a, b := want, got; !reflect.DeepEqual(a, b) {
		t.Errorf("(-want +got):\n%v\n%v", a, b)
	}
}

// TestMatch: fnmatch(3) without flags: '*' crosses '/'.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a/b/c", true},
		{"a/*", "a/b/c", true},
		{"*.txt", "d/x.txt", true},
		{"*.txt", "d/x.txt.bak", false},
		{"testdir", "testdir", true},
		{"testdir", "testdir/f", false},
		{"?", "/", true},
		{"[a-c]x", "bx", true},
		{"[!a-c]x", "bx", false},
		{"[^a-c]x", "dx", true},
		{"[]]", "]", true},
		{"[", "[", true},
		{"[ab", "a", false},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"", "", true},
		{"", "a", false},
	} {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
