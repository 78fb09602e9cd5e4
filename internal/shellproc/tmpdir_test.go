package shellproc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if !emptyDir(dir) {
		t.Fatal("a new directory is not empty")
	}
	if emptyDir(filepath.Join(dir, "missing")) {
		t.Fatal("a missing directory is empty")
	}
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if emptyDir(dir) {
		t.Fatal("a directory holding a file is empty")
	}
	if emptyDir(f) {
		t.Fatal("a file is an empty directory")
	}
	os.Remove(f)
	os.Mkdir(filepath.Join(dir, ".hidden"), 0o700)
	if emptyDir(dir) {
		t.Fatal("a directory holding a hidden one is empty")
	}
}
