package integration

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOverlayTrace: flux overlay trace shows the messages rank 0 sends to
// and receives from its overlay peers, filtered by type and topic.
func TestOverlayTrace(t *testing.T) {
	e := start(t)
	cmd := exec.Command(e.inst.Bin, "overlay", "trace", "-t", "event,request", "-f", "test.*")
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	// publish until the trace shows it (it may not be registered yet)
	e.must("kvs", "put", "not.traced=1") // kvs.* does not match test.*
	var got []string
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	e.must("event", "pub", "test.hello", `{"n":1}`)
	for len(got) < 4 { // two children, each with its payload line
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("trace ended early: %v", got)
			}
			got = append(got, l)
		case <-tick.C:
			if len(got) == 0 {
				e.must("event", "pub", "test.hello", `{"n":1}`)
			}
		case <-deadline:
			t.Fatalf("trace lines so far: %q", got)
		}
	}
	all := strings.Join(got, "\n")
	// the event goes down to rank 0's children (tx) with its payload
	if !strings.Contains(all, "tx> 1 event test.hello") || !strings.Contains(all, `{"n":1}`) {
		t.Errorf("trace:\n%s", all)
	}
	if strings.Contains(all, "kvs.") || strings.Contains(all, "response") {
		t.Errorf("filters not applied:\n%s", all)
	}
	e.fail(`"bogus" is not request`, "overlay", "trace", "-t", "bogus")
}
