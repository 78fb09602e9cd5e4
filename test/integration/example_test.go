package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPublicAPIExample builds examples/cmd/submit, a program in a module of
// its own that uses only fluxgo's pkg/ API (nothing under internal/ can
// be imported from there), and runs it against an instance: it submits
// a job, follows its events and prints its output and exit code.
func TestPublicAPIExample(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to build the example with")
		}
	}
	dir, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "submit")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/submit")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	e := start(t)
	cmd := exec.Command(bin, "sh", "-c", `echo hello; echo oops >&2; printf 'bin\377\n'; exit 3`)
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("the example exited %v, want 3\n%s", err, out)
	}
	for _, want := range []string{"event submit\n", "event start\n", "event clean\n", "stdout: hello\n", "stderr: oops\n", "bin\xff\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example's output lacks %q:\n%s", want, out)
		}
	}
}
