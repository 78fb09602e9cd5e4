package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestFortune: every category prints something; a bad one is refused.
func TestFortune(t *testing.T) {
	for _, c := range fortuneCategories {
		var out, errb strings.Builder
		if code := Main([]string{"fortune", "-c", c}, strings.NewReader(""), &out, &errb); code != 0 || strings.TrimSpace(out.String()) == "" {
			t.Errorf("fortune -c %s: exit %d, %q %q", c, code, out.String(), errb.String())
		}
	}
	var out, errb strings.Builder
	if code := Main([]string{"fortune", "-c", "gloom"}, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), "invalid choice: 'gloom'") {
		t.Errorf("fortune -c gloom: exit %d, %q", code, errb.String())
	}
	out.Reset()
	if Main([]string{"fortune", "--help"}, strings.NewReader(""), &out, &errb); !strings.Contains(out.String(), "category") {
		t.Errorf("fortune --help lacks category: %q", out.String())
	}
}

// TestPythonListVersions: flux-python<digits> executables on
// FLUX_EXEC_PATH_PREPEND are listed without their prefix; others not.
func TestPythonListVersions(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"flux-python0.0": 0o755, "flux-python0.1": 0o644, "flux-pythonx": 0o755} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FLUX_EXEC_PATH_PREPEND", dir)
	py, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLUXGO_PYTHONPATH", py)
	var out, errb strings.Builder
	if code := Main([]string{"python", "--list-versions"}, strings.NewReader(""), &out, &errb); code != 0 || out.String() != "python0.0\n" {
		t.Errorf("python --list-versions: exit %d, %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	Main([]string{"python", "--get-path"}, strings.NewReader(""), &out, &errb)
	var inst strings.Builder
	if code := Main([]string{"config", "builtin", "--installed", "python_path"}, strings.NewReader(""), &inst, &errb); code != 0 || inst.String() != out.String() {
		t.Errorf("config builtin --installed python_path %q, flux python --get-path %q", inst.String(), out.String())
	}
}

// TestHelpExtras: flux help lists the commands of FLUX_CMDHELP_PATTERN
// files; flux /path/prog runs prog with MANPATH ending in ':' and the rc
// path lists without repeats.
func TestHelpExtras(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(`[{"name":"test","description":"test commands","commands":[{"name":"test","description":"a test"}]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLUX_CMDHELP_PATTERN", filepath.Join(dir, "*.json"))
	var out, errb strings.Builder
	if code := Main([]string{"help"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), "\ntest commands\n") || !strings.Contains(out.String(), "a test") {
		t.Errorf("flux help with FLUX_CMDHELP_PATTERN: exit %d, %q", code, out.String())
	}
	bin := testinstance.Binary(t)
	cmd := exec.Command(bin, "/usr/bin/printenv", "MANPATH", "FLUX_RC_EXTRA")
	cmd.Env = append(os.Environ(), "MANPATH=", "FLUX_RC_EXTRA=/foo:/bar:/foo")
	got, err := cmd.Output()
	if err != nil || string(got) != ":\n/foo:/bar\n" {
		t.Errorf("flux /usr/bin/printenv: %q, %v", got, err)
	}
}

// TestPingPadAndLogStats: --pad takes a size suffix; the broker's log
// ring has module-style stats (flux module stats log), as in flux-core.
func TestPingPadAndLogStats(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 1})
	if out := inst.MustRun(t, "ping", "--pad", "10K", "--count", "1", "--interval", "0", "0"); !strings.Contains(out, "pad=10240") {
		t.Errorf("ping --pad 10K: %q", out)
	}
	if r := inst.Run(t, "ping", "--pad", "1G", "-c", "1", "0"); r.Code == 0 || !strings.Contains(r.Stderr, "want 0 to 64M") {
		t.Errorf("ping --pad 1G: %+v", r)
	}
	before := strings.TrimSpace(inst.MustRun(t, "module", "stats", "--parse", "count", "log"))
	inst.MustRun(t, "logger", "hello")
	after := strings.TrimSpace(inst.MustRun(t, "module", "stats", "--parse", "count", "log"))
	if before == after || before == "" {
		t.Errorf("log count %q then %q", before, after)
	}
}
