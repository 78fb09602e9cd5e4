package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
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
