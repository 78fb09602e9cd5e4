package integration

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAttachSlowReader: flux job attach of a finished job delivers all of
// its output to a reader that takes its time (it gave up 10 s after the
// job's end, exit 0, whatever was left unprinted).
func TestAttachSlowReader(t *testing.T) {
	e := start(t)
	const size = 2 << 20
	id := e.submit("sh", "-c", "head -c 2097152 /dev/zero | tr '\\0' x")
	e.waitEvent(id, "clean")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.inst.Bin, "job", "attach", id.String())
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	cmd.Stdout = w
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	time.Sleep(12 * time.Second) // the pipe fills; attach waits in write
	data, _ := io.ReadAll(r)
	err = cmd.Wait()
	if len(data) != size || err != nil {
		t.Fatalf("attach through a slow reader: %d bytes of %d, %v, stderr %q", len(data), size, err, errb.String())
	}
}
