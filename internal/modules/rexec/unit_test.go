package rexec

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		want Config
		err  bool
	}{
		{nil, DefaultConfig(), false},
		{[]string{"stdin-bufsize=100", "kill-grace=5s"}, Config{StdinBufsize: 100, KillGrace: 5 * time.Second}, false},
		{[]string{"stdin-bufsize=0"}, Config{}, true},
		{[]string{"stdin-bufsize=x"}, Config{}, true},
		{[]string{"kill-grace=-1s"}, Config{}, true},
		{[]string{"kill-grace"}, Config{}, true},
		{[]string{"color=blue"}, Config{}, true},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, ","), func(t *testing.T) {
			got, err := parseArgs(tc.args)
			if tc.err {
				if !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("want EINVAL, got %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	plain := filepath.Join(dir, "data")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(plain, []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	tests := []struct {
		file, path, want string
		err              error
	}{
		{"tool", "/nonexistent:" + dir, exe, nil},
		{"data", dir, "", syscall.EACCES},
		{"sub", dir, "", syscall.EACCES},
		{"missing", dir, "", syscall.ENOENT},
		{"./rel/x", dir, "./rel/x", nil},
		{"sh", "", "/bin/sh", nil},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := lookPath(tc.file, tc.path)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || got != tc.want {
				t.Fatalf("lookPath(%q, %q) = %q, %v; want %q, %v", tc.file, tc.path, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	s := &server{localURI: "local:///run/flux/local"}
	got := s.environ(map[string]string{
		"A": "1", "FLUX_URI": "local:///elsewhere", "NOTIFY_SOCKET": "/x", "INVOCATION_ID": "y", "FLUX_PROXY_REMOTE": "z",
	})
	slices.Sort(got)
	want := []string{"A=1", "FLUX_URI=local:///run/flux/local"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestProcName(t *testing.T) {
	for argv, want := range map[string]string{
		"/usr/bin/sleep 10": "sleep",
		"flux getattr rank": "flux getattr",
		"/opt/bin/flux":     "flux",
	} {
		if got := procName(strings.Fields(argv)); got != want {
			t.Errorf("procName(%q) = %q, want %q", argv, got, want)
		}
	}
}

// TestStdinPipe feeds more than a pipe holds through stdinPipe while a
// slow reader drains the other end: order and EOF are kept and the
// Serve-goroutine side never blocks.
func TestStdinPipe(t *testing.T) {
	s := &server{}
	p := &proc{s: s}
	ours, child, err := pipe(false, "stdin")
	if err != nil {
		t.Fatal(err)
	}
	w := newStdinPipe(p, ours, 1<<20)
	rd := os.NewFile(uintptr(child), "child")
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(rd)
		rd.Close()
		got <- b
	}()
	var want []byte
	for i := 0; i < 32; i++ {
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, 16*1024)
		want = append(want, chunk...)
		start := time.Now()
		if err := w.write(chunk, i == 31); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("write blocked for %v", d)
		}
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("read %d bytes, want %d", len(b), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader did not see EOF")
	}
	s.wg.Wait()
	// After EOF, writes are dropped quietly.
	if err := w.write([]byte("late"), false); err != nil {
		t.Fatal(err)
	}
}

func TestStdinPipeOverflow(t *testing.T) {
	s := &server{}
	p := &proc{s: s}
	ours, child, err := pipe(false, "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(child)
	w := newStdinPipe(p, ours, 1000)
	// Nobody reads: the pipe (64 KiB) fills, then the 1000-byte queue.
	var werr error
	for i := 0; i < 200 && werr == nil; i++ {
		werr = w.write(make([]byte, 1000), false)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("want ENOSPC overflow, got %v", werr)
	}
	w.close()
	s.wg.Wait()
}
