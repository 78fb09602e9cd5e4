package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestConfigBuiltin: every flux-core builtin key prints (empty where
// fluxgo builds the thing in), python_path is where flux python finds
// the package, and an unknown key is an error naming the valid ones.
func TestConfigBuiltin(t *testing.T) {
	t.Setenv("FLUXGO_PYTHONPATH", "/pkgdir")
	var out, errb bytes.Buffer
	if code := Main([]string{"config", "builtin"}, nil, &out, &errb); code != 0 {
		t.Fatalf("flux config builtin: exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(builtinKeys) {
		t.Fatalf("%d lines for %d keys:\n%s", len(lines), len(builtinKeys), out.String())
	}
	for i, k := range builtinKeys {
		if !strings.HasPrefix(lines[i], k+"=") {
			t.Errorf("line %d %q, want %s=...", i, lines[i], k)
		}
	}
	out.Reset()
	if code := Main([]string{"config", "builtin", "python_path"}, nil, &out, &errb); code != 0 || out.String() != "/pkgdir\n" {
		t.Errorf("python_path: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"config", "builtin", "shell_path"}, nil, &out, &errb); code != 0 || strings.TrimSpace(out.String()) == "" {
		t.Errorf("shell_path: exit %d, %q", code, out.String())
	}
	errb.Reset()
	code := Main([]string{"config", "builtin", "nope"}, nil, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "nope: unknown builtin configuration key (valid: rc1_path") {
		t.Errorf("unknown key: exit %d, %q", code, errb.String())
	}
}
