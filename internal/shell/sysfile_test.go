package shell

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestControlFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory.limit_in_bytes")
	if err := writeControl(p, "1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("write of a missing file: %v, want not exist", err)
	}
	if _, err := readControl(p); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), p) {
		t.Fatalf("read of a missing file: %v, want not exist naming it", err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(p, "4096"); err != nil {
		t.Fatal(err)
	}
	if b, err := readControl(p); err != nil || string(b) != "4096" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// larger than the first buffer, up to the bound, and past it
	big := bytes.Repeat([]byte("12345\n"), 10000)
	os.WriteFile(p, big, 0o644)
	if b, err := readControl(p); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("read %d bytes of %d: %v", len(b), len(big), err)
	}
	os.WriteFile(p, make([]byte, maxControlFile+1), 0o644)
	if _, err := readControl(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("read past the bound: %v", err)
	}
}

func TestTaskPipe(t *testing.T) {
	for _, shellReads := range []bool{true, false} {
		sh, tk, err := taskPipe(shellReads)
		if err != nil {
			t.Fatal(err)
		}
		w, r := tk, sh
		if !shellReads {
			w, r = sh, tk
		}
		if _, err := w.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		w.Close()
		b := make([]byte, 16)
		n, _ := r.Read(b)
		if string(b[:n]) != "hello" {
			t.Fatalf("read %q", b[:n])
		}
		r.Close()
	}
}
