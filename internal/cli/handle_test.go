package cli

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnclosingURIFallback: with FLUX_URI unset a command talks to the
// system instance's socket when one listens there, and otherwise says
// that neither is there.
func TestEnclosingURIFallback(t *testing.T) {
	dir := t.TempDir()
	old := systemSocket
	t.Cleanup(func() { systemSocket = old })
	systemSocket = filepath.Join(dir, "local")
	t.Setenv("FLUX_URI", "")

	_, err := enclosingURI()
	if err == nil || !strings.Contains(err.Error(), "FLUX_URI is not set and no system instance listens at "+systemSocket) {
		t.Fatalf("no socket: got %v", err)
	}
	l, err := net.Listen("unix", systemSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	uri, err := enclosingURI()
	if err != nil || uri != "local://"+systemSocket {
		t.Fatalf("socket there: got %q, %v", uri, err)
	}
	t.Setenv("FLUX_URI", "local:///elsewhere")
	if uri, _ := enclosingURI(); uri != "local:///elsewhere" {
		t.Fatalf("FLUX_URI set: got %q, want it used", uri)
	}
}
