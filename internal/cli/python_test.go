package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPythonEnv(t *testing.T) {
	got := pythonEnv([]string{"A=1", "PYTHONPATH=/x:/y", "B=2"}, "/pkg")
	want := []string{"A=1", "B=2", "PYTHONPATH=/pkg" + string(os.PathListSeparator) + "/x:/y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pythonEnv = %q, want %q", got, want)
	}
	got = pythonEnv([]string{"PYTHONPATH="}, "/pkg")
	if !reflect.DeepEqual(got, []string{"PYTHONPATH=/pkg"}) {
		t.Errorf("pythonEnv with empty PYTHONPATH = %q", got)
	}
}

func TestPythonPackageDirOverride(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FLUXGO_PYTHONPATH", dir)
	got, err := pythonPackageDir()
	if err != nil || got != dir {
		t.Fatalf("pythonPackageDir = %q, %v; want %q", got, err, dir)
	}
}

func TestPythonCommand(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	// a fake interpreter that reports its arguments and PYTHONPATH
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakepython")
	script := "#!/bin/sh\necho \"$PYTHONPATH $*\"\nexit 5\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLUXGO_PYTHON", fake)
	t.Setenv("FLUXGO_PYTHONPATH", "/pkgdir")
	t.Setenv("PYTHONPATH", "")
	var out, errb bytes.Buffer
	code := Main([]string{"python", "-c", "print(1)", "--x"}, nil, &out, &errb)
	if code != 5 {
		t.Errorf("exit code %d, want 5 (stderr %q)", code, errb.String())
	}
	if got := out.String(); got != "/pkgdir -c print(1) --x\n" {
		t.Errorf("output %q", got)
	}
	out.Reset()
	if code := Main([]string{"python", "--get-path"}, nil, &out, &errb); code != 0 || out.String() != "/pkgdir\n" {
		t.Errorf("--get-path: code %d, output %q", code, out.String())
	}
}

// TestFluxEnv: the flux executable's directory goes first on PATH once,
// and the Python package first on PYTHONPATH.
func TestFluxEnv(t *testing.T) {
	exe := fluxExecutable()
	if exe == "" {
		t.Skip("no flux executable")
	}
	bindir := filepath.Dir(exe)
	t.Setenv("FLUXGO_PYTHONPATH", "/py")
	env := fluxEnv([]string{"PATH=/usr/bin", "PYTHONPATH=/other", "HOME=/h"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["PATH"] != bindir+":/usr/bin" || got["PYTHONPATH"] != "/py:/other" || got["HOME"] != "/h" {
		t.Errorf("fluxEnv: %v", got)
	}
	if again := fluxEnv(env); !contains(again, "PATH="+bindir+":/usr/bin") {
		t.Errorf("PATH grew on a second pass: %v", again)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
