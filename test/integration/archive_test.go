package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// archiveNode is what the archive tests compare of a file: type and
// permissions, and content or link target.
type archiveNode struct {
	Mode fs.FileMode
	Data string
}

// archiveTree reads everything under root.
func archiveTree(t *testing.T, root string) map[string]archiveNode {
	t.Helper()
	out := map[string]archiveNode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := archiveNode{Mode: fi.Mode()}
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

// archiveSource makes a tree with text, binary, multi-blob, empty and
// sparse files, an executable, symlinks, and nested and read-only
// directories.
func archiveSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	big := make([]byte, 300_000)
	rand.New(rand.NewSource(1)).Read(big)
	files := []struct {
		path string
		data []byte
		mode fs.FileMode
	}{
		{"README", []byte("stage me\n"), 0o644},
		{"bin/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755},
		{"data/small.bin", []byte{0, 0xff, 1, 0xfe}, 0o600},
		{"data/big.dat", big, 0o640},
		{"data/empty", nil, 0o644},
		{"data/deep/er/x", []byte("deep"), 0o444},
		{"ro/inside", []byte("read-only dir"), 0o644},
	}
	for _, f := range files {
		p := filepath.Join(src, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, f.mode)
	}
	sparse := filepath.Join(src, "data", "sparse")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(sparse, 2<<20)
	f, _ := os.OpenFile(sparse, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("end")
	f.Close()
	os.Symlink("../README", filepath.Join(src, "bin", "readme"))
	os.Symlink("/nonexistent/target", filepath.Join(src, "dangling"))
	os.Chmod(filepath.Join(src, "ro"), 0o555)
	os.Chmod(filepath.Join(src, "data", "deep"), 0o750)
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "ro"), 0o755) })
	return src
}

// makeWritable lets t.TempDir's cleanup remove read-only directories.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// TestArchiveStageToEveryRank: the flux-archive(1) staging recipe. An
// archive created on rank 0 (small files inline, large ones as blobs of
// several chunks, a sparse file, symlinks, a read-only directory) is
// extracted on every broker with flux exec, each rank reading through
// its own KVS and content cache, and every copy matches the source:
// types, permission bits, contents, link targets.
func TestArchiveStageToEveryRank(t *testing.T) {
	e := start(t)
	src := archiveSource(t)
	dst := t.TempDir()
	t.Cleanup(func() { makeWritable(dst) })

	e.must("archive", "create", "--name=stage", "--chunksize=64K", "-C", src, ".")
	e.must("exec", "-r", "all", "sh", "-c",
		fmt.Sprintf(`d=%[1]s/$(%[2]s getattr rank) && mkdir -p $d && %[2]s archive extract -n stage --waitcreate=30s -C $d`, dst, e.inst.Bin))
	want := archiveTree(t, src)
	for rank := 0; rank < 4; rank++ {
		got := archiveTree(t, filepath.Join(dst, fmt.Sprint(rank)))
		if !reflect.DeepEqual(want, got) {
			for p, w := range want {
				if g, ok := got[p]; !ok || g.Mode != w.Mode || g.Data != w.Data {
					t.Errorf("rank %d: %s: got %v (len %d), want %v (len %d)", rank, p, g.Mode, len(g.Data), w.Mode, len(w.Data))
				}
			}
			if len(got) != len(want) {
				t.Errorf("rank %d: %d files, want %d", rank, len(got), len(want))
			}
		}
	}

	// the KVS layout: an RFC 37 array under archive.NAME, the large file
	// as a blobvec of 64K blobs
	var objs []map[string]any
	if err := json.Unmarshal([]byte(e.must("kvs", "get", "archive.stage")), &objs); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o["path"] {
		case "data/big.dat":
			if o["encoding"] != "blobvec" || len(o["data"].([]any)) != 5 {
				t.Errorf("data/big.dat: want 5 blobs, got %v %v", o["encoding"], o["data"])
			}
		case "README":
			if o["encoding"] != "utf-8" || o["data"] != "stage me\n" {
				t.Errorf("README: %v", o)
			}
		}
	}
	if got, want := e.must("archive", "list", "-n", "stage", "-l", "bin/*"), "l 0777        0 bin/readme\nf 0755       19 bin/run.sh"; got != want {
		t.Errorf("list -l bin/*:\n%s\nwant\n%s", got, want)
	}

	// extracting again is an error naming the file; --overwrite replaces
	r := e.fail("file exists (use --overwrite to replace it)", "archive", "extract", "-n", "stage", "-C", filepath.Join(dst, "0"))
	if r.Code != 1 {
		t.Errorf("exit code %d, want 1", r.Code)
	}
	os.WriteFile(filepath.Join(dst, "0", "README"), []byte("changed"), 0o644)
	e.must("archive", "extract", "-n", "stage", "--overwrite", "-C", filepath.Join(dst, "0"), "README")
	if b, _ := os.ReadFile(filepath.Join(dst, "0", "README")); string(b) != "stage me\n" {
		t.Errorf("--overwrite README: %q", b)
	}
	e.must("archive", "remove", "-n", "stage")
	e.fail("KVS lookup archive.stage: No such file or directory", "archive", "list", "-n", "stage")
}

// TestArchiveCreateOnOtherRank: an archive made on rank 2 (its blobs
// written through to rank 0) extracts on rank 0 and rank 3.
func TestArchiveCreateOnOtherRank(t *testing.T) {
	e := start(t)
	src := t.TempDir()
	big := bytes.Repeat([]byte("rank two data\n"), 20_000)
	os.WriteFile(filepath.Join(src, "f"), big, 0o600)
	e.must("exec", "-r", "2", e.inst.Bin, "archive", "create", "-n", "r2", "-C", src, "f")
	e.must("exec", "-r", "all", e.inst.Bin, "content", "dropcache")
	for _, rank := range []string{"0", "3"} {
		d := filepath.Join(t.TempDir(), rank)
		os.Mkdir(d, 0o755)
		e.must("exec", "-r", rank, e.inst.Bin, "archive", "extract", "-n", "r2", "--waitcreate", "-C", d)
		if b, _ := os.ReadFile(filepath.Join(d, "f")); !bytes.Equal(b, big) {
			t.Errorf("rank %s: got %d bytes, want %d", rank, len(b), len(big))
		}
	}
}

// TestArchiveOptionsAndErrors: --overwrite, --append, --preserve and
// remove manage archive.NAME and archive.NAME_blobs; bad input is an
// error naming what is wrong, and an archive with unsafe paths is not
// extracted at all.
func TestArchiveOptionsAndErrors(t *testing.T) {
	e := start(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "one"), bytes.Repeat([]byte{1}, 2048), 0o644)
	os.WriteFile(filepath.Join(src, "two"), []byte("2\n"), 0o644)
	os.Mkdir(filepath.Join(src, "dir"), 0o755)

	e.must("archive", "create", "-C", src, "one")
	e.fail("archive.main: key exists", "archive", "create", "-C", src, "two")
	e.fail("--overwrite and --append cannot be used together", "archive", "create", "--overwrite", "--append", "-C", src, "two")
	e.must("archive", "create", "--overwrite", "--preserve", "-C", src, "one")
	if got := e.must("kvs", "ls", "archive.main_blobs"); got != "0" {
		t.Errorf("archive.main_blobs: %q, want one blob key", got)
	}
	e.must("archive", "create", "--append", "--preserve", "--small-file-threshold=0", "-C", src, "two", "dir")
	if got, want := e.must("archive", "list"), "one\ntwo\ndir"; got != want {
		t.Errorf("after --append: %q, want %q", got, want)
	}
	if got := e.must("kvs", "ls", "-1", "archive.main_blobs"); got != "0\n1" {
		t.Errorf("--append --preserve blob keys: %q, want 0 and 1", got)
	}
	e.must("archive", "remove")
	e.fail("No such file or directory", "kvs", "get", "archive.main_blobs")
	e.fail("archive.main does not exist", "archive", "remove")
	e.must("archive", "remove", "-f")

	for _, tc := range []struct {
		want string
		args []string
	}{
		{"chdir " + src + "/nodir: No such file or directory", []string{"create", "-C", src + "/nodir", "."}},
		{"nofile: No such file or directory", []string{"create", "-C", src, "nofile"}},
		{"../x: cannot archive a path leading out", []string{"create", "-C", src, "../x"}},
		{`--chunksize=ten: size "ten": want a number with an optional K, M, G, T or P suffix`, []string{"create", "--chunksize=ten", "-C", src, "one"}},
		{`--small-file-threshold=3G: size "3G": want 0 to 2147483647 bytes`, []string{"create", "--small-file-threshold=3G", "-C", src, "one"}},
		{"--mmap cannot work with --preserve", []string{"create", "--mmap", "--preserve", "-C", src, "one"}},
		{"KVS lookup archive.nope: No such file or directory", []string{"extract", "-n", "nope"}},
		{"archive.nope: the archive was not created within 0.2s", []string{"extract", "-n", "nope", "--waitcreate=0.2s"}},
		{"--waitcreate=soon: ", []string{"extract", "-n", "nope", "--waitcreate=soon"}},
		{"--name: the archive name must not be empty", []string{"list", "-n", ""}},
	} {
		e.fail(tc.want, append([]string{"archive"}, tc.args...)...)
	}
	e.fail("--mmap only works on the rank 0 broker", "exec", "-r", "1", e.inst.Bin, "archive", "create", "--mmap", "-C", src, "one")

	// an archive someone wrote by hand with unsafe paths: refused whole
	dst := t.TempDir()
	evil := `[{"path":"ok","mode":33188,"encoding":"utf-8","data":"x","size":1},` +
		`{"path":"../escape","mode":33188,"encoding":"utf-8","data":"x","size":1}]`
	e.must("kvs", "put", "archive.evil="+evil)
	e.fail("../escape: refusing to extract a path containing '..'", "archive", "extract", "-n", "evil", "-C", dst)
	e.must("kvs", "put", `archive.evil=[{"path":"/tmp/abs","mode":33188,"size":0}]`)
	e.fail("/tmp/abs: refusing to extract an absolute path", "archive", "extract", "-n", "evil", "-C", dst)
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("extracted %v from a refused archive", ents)
	}
	e.must("kvs", "put", `archive.evil={"path":"x"}`)
	e.fail("archive.evil: not an RFC 37 archive", "archive", "list", "-n", "evil")

	// a pattern that matches nothing is a note, not an error
	e.must("archive", "create", "-n", "pat", "-C", src, "two")
	if r := e.flux("archive", "list", "-n", "pat", "nomatch"); r.Code != 0 || !strings.Contains(r.Stderr, "no files matched pattern 'nomatch'") {
		t.Errorf("list nomatch: %+v", r)
	}
}
