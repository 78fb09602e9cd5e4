package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTop: flux top prints one frame when its output is not a terminal:
// the resource bars and job counts, and the running jobs, newest first;
// on a terminal (through script(1)) it follows keys and q quits.
func TestTop(t *testing.T) {
	e := start(t)
	older := e.submit("-N1", "--job-name=older", testDuration("60s"), "true")
	newer := e.submit("-N2", "--job-name=newer", testDuration("60s"), "true")
	e.waitEvent(newer, "start")
	e.submit("--urgency=hold", "true")
	out := e.must("top")
	for _, want := range []string{"nodes [", "3/4", "1 pending", "2 running", "size: 4", "depth: 0", "JOBID USER"} {
		if !strings.Contains(out, want) {
			t.Errorf("flux top lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, newer.String()), strings.Index(out, older.String()); i < 0 || j < 0 || i > j {
		t.Errorf("running jobs not listed newest first:\n%s", out)
	}
	e.fail("is not a running Flux instance", "top", older.String())
	e.fail("--queue=nosuch", "top", "-q", "nosuch")
	if script, err := exec.LookPath("script"); err == nil {
		cmd := exec.Command(script, "-qec", e.inst.Bin+" top", "/dev/null")
		cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
		cmd.Stdin = strings.NewReader("jjdq")
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "complete,") {
			t.Errorf("interactive flux top (d shows complete/failed, q quits): %v\n%q", err, b)
		}
	}
	e.must("cancel", older.String(), newer.String())
}
