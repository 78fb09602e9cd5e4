package pythontest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// repoRoot is the source tree this file belongs to.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// python returns the interpreter to use: $FLUXGO_PYTHON, else python3 on
// PATH, else /usr/bin/python3.
func python(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLUXGO_PYTHON"); p != "" {
		return p
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	t.Skip("python3 not found: skipping the Python client tests (set FLUXGO_PYTHON to run them)")
	return ""
}

// TestPythonSuite runs python -m unittest discover -s python/tests. The
// suite starts its own instances with the flux binary under test.
func TestPythonSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the Python client tests")
	}
	py := python(t)
	root := repoRoot(t)
	bin := testinstance.Binary(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v",
		"-s", filepath.Join(root, "python", "tests"), "-t", filepath.Join(root, "python", "tests"))
	cmd.Dir = root
	env := []string{"FLUX_TEST_BINARY=" + bin, "PYTHONDONTWRITEBYTECODE=1"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLUX_URI=") || strings.HasPrefix(kv, "FLUX_TEST_BINARY=") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("python tests timed out:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("python tests failed (%v):\n%s", err, out.String())
	}
	if testing.Verbose() {
		t.Logf("%s", out.String())
	}
}
