package shellproc

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAsUser switches the filesystem identity of one thread to an
// unprivileged uid and back (as root only).
func TestAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to take another user's filesystem identity")
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	private := t.TempDir() // 0700, root's
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := canEnter(nil, private); err != nil {
		t.Fatalf("root cannot enter %s: %v", private, err)
	}
	err := canEnter(nobody, private)
	var pe *os.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("nobody entering a 0700 root directory: %v", err)
	}
	if _, err := openAsUser(nobody, filepath.Join(private, "f")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("nobody creating a file in a 0700 root directory: %v", err)
	}
	public := t.TempDir()
	os.Chmod(filepath.Dir(public), 0o755) // the test's own temporary directory
	os.Chmod(public, 0o777)
	f, err := openAsUser(nobody, filepath.Join(public, "out"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(public, "out"), &st)
	if st.Uid != 65534 || st.Gid != 65534 {
		t.Fatalf("file made as nobody is owned by %d:%d", st.Uid, st.Gid)
	}
	// root's own permissions are back, on whichever thread runs next
	for i := 0; i < 20; i++ {
		f, err := openAsUser(nil, filepath.Join(private, "root"))
		if err != nil {
			t.Fatalf("root after switching back: %v", err)
		}
		f.Close()
	}
}
