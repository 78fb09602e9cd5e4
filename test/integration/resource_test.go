package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResourceReloadAndAcquireMute: flux resource reload replaces the
// inventory once the scheduler is unloaded, from an R file or hwloc XML
// files, and acquire-mute stops the scheduler's updates.
func TestResourceReloadAndAcquireMute(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fake := write("fake.json", `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"nodelist":["fake[0-3]"],"starttime":0,"expiration":0}}`)
	big := write("big.json", `{"version":1,"execution":{"R_lite":[{"rank":"0-7","children":{"core":"0-1"}}],"nodelist":["big[0-7]"],"starttime":0,"expiration":0}}`)

	// the scheduler holds the resources (once it has run a job, it has
	// surely acquired them: rc1 loads it asynchronously)
	e.waitEvent(e.submit("true"), "clean")
	e.fail("resources are busy (unload scheduler?)", "resource", "reload", fake)
	if canRunAsGuest(e) {
		if r := e.asGuest("resource", "reload", fake); r.Code == 0 || !strings.Contains(r.Stderr, "owner") {
			t.Errorf("reload as guest: %+v", r)
		}
		if r := e.asGuest("resource", "acquire-mute"); r.Code == 0 || !strings.Contains(r.Stderr, "owner") {
			t.Errorf("acquire-mute as guest: %+v", r)
		}
	}
	e.must("module", "remove", "sched-simple")
	e.fail("nosuch.json", "resource", "reload", filepath.Join(dir, "nosuch.json"))
	e.fail("override with -f", "resource", "reload", big)
	e.must("resource", "reload", "--force", big)
	e.must("resource", "reload", fake)
	e.must("module", "load", "sched-simple")
	if got := e.must("resource", "list", "-s", "all", "-n", "-o", "{nnodes} {ncores} {nodelist}"); got != "4 8 fake[0-3]" {
		t.Errorf("after reload: %q", got)
	}

	// hwloc XML: one <rank>.xml per rank
	e.must("module", "remove", "sched-simple")
	xdir := filepath.Join(dir, "xml")
	os.Mkdir(xdir, 0o755)
	for rank := range 4 {
		var b strings.Builder
		fmt.Fprintf(&b, "<topology version=\"2.0\">\n<object type=\"Machine\">\n<info name=\"HostName\" value=\"hw%d\"/>\n", rank)
		for c := range 3 {
			fmt.Fprintf(&b, "<object type=\"Core\" os_index=\"%d\"><object type=\"PU\" os_index=\"%d\"/></object>\n", c, c)
		}
		b.WriteString("</object>\n</topology>\n")
		write(filepath.Join("xml", fmt.Sprintf("%d.xml", rank)), b.String())
	}
	e.must("resource", "reload", "-x", xdir)
	e.must("module", "load", "sched-simple")
	if got := e.must("resource", "list", "-s", "all", "-n", "-o", "{nnodes} {ncores} {nodelist}"); got != "4 12 hw[0-3]" {
		t.Errorf("after reload -x: %q", got)
	}
	if got := e.must("resource", "status", "-n", "-o", "{state} {nodelist}"); got != "avail hw[0-3]" {
		t.Errorf("status after reload -x: %q", got)
	}

	// muted, the scheduler no longer hears of a drained node
	e.waitFor("the scheduler to see all nodes up", func() bool {
		return e.must("resource", "list", "-s", "up", "-n", "-o", "{nnodes}") == "4"
	})
	e.must("resource", "acquire-mute")
	e.must("resource", "drain", "hw1")
	if got := e.must("resource", "status", "-s", "drain", "--skip-empty", "-n", "-o", "{state} {nodelist}"); got != "drained hw1" {
		t.Errorf("status after drain: %q", got)
	}
	if got := e.must("resource", "list", "-s", "down", "-n", "-o", "{nnodes}"); got != "0" {
		t.Errorf("the muted scheduler saw the drain: down %q", got)
	}
}
