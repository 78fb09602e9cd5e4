package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestOverlayDisconnectAndErrors: flux overlay disconnect asks a broker's
// parent to drop it; the broker is then lost, flux overlay errors names
// its host with "administrative disconnect", and a second disconnect or
// one aimed at no child is an error naming the problem.
func TestOverlayDisconnectAndErrors(t *testing.T) {
	e := start(t)
	if r := e.flux("overlay", "errors"); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("healthy instance: overlay errors: %+v", r)
	}
	e.fail("0 has no parent", "overlay", "disconnect", "0")
	e.fail("9 is not a valid rank in this instance (size 4)", "overlay", "disconnect", "9")
	e.fail(`TARGET must be a valid rank or hostname: "no-such-host" is neither`, "overlay", "disconnect", "no-such-host")

	parent := e.must("overlay", "parentof", "3")
	other := "0"
	if parent == "0" {
		other = "2"
	}
	e.fail("rank 3 is not a child of rank "+other, "overlay", "disconnect", "-r", other, "3")

	// a hostname names the first rank on that host (all ranks share one
	// here: rank 0, which has no parent)
	host := e.must("overlay", "lookup", "3")
	if e.must("overlay", "lookup", host) == "0-3" {
		e.fail("0 has no parent", "overlay", "disconnect", host)
	}
	r := e.flux("overlay", "disconnect", "3")
	want := fmt.Sprintf("flux-overlay: asking %s (rank %s) to disconnect child %s (rank 3)", e.must("overlay", "lookup", parent), parent, host)
	if r.Code != 0 || !strings.Contains(r.Stderr, want) {
		t.Fatalf("overlay disconnect 3: %+v, want stderr %q", r, want)
	}
	e.waitFor("rank 3 lost", func() bool {
		return strings.Contains(e.must("overlay", "status", "--no-pretty"), "3 "+host+": lost")
	})
	if got, want := e.must("overlay", "errors"), host+": administrative disconnect"; got != want {
		t.Errorf("overlay errors: %q, want %q", got, want)
	}
	e.fail("rank 3 is already lost", "overlay", "disconnect", "3")
}
