package cli

import (
	"bytes"
	"encoding/json"
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

func TestFormatConfigValueStrictTypes(t *testing.T) {
	for _, tt := range []struct {
		v    any
		typ  string
		want string // "" for an error
	}{
		{json.Number("5"), "real", ""},
		{json.Number("5.0"), "real", "5.0"},
		{json.Number("1e3"), "real", "1e3"},
		{json.Number("5.0"), "integer", ""},
		{json.Number("5"), "integer", "5"},
		{"60s", "fsd-real", "60.000000"},
		{"1.5m", "fsd-real", "90.000000"},
		{"1.5m", "fsd-integer", "90"},
	} {
		got, err := formatConfigValue(tt.v, tt.typ)
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), "does not have the requested type") {
				t.Errorf("%v as %s: %q, %v; want a type error", tt.v, tt.typ, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v as %s: %q, %v; want %q", tt.v, tt.typ, got, err, tt.want)
		}
	}
}
