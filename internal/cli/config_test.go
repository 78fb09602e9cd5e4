package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigBuiltin: a builtin key prints (python_path where flux
// python finds the package), no key is a usage error, and an unknown key
// is an error naming the valid ones.
func TestConfigBuiltin(t *testing.T) {
	t.Setenv("FLUXGO_PYTHONPATH", "/pkgdir")
	var out, errb bytes.Buffer
	if code := Main([]string{"config", "builtin"}, nil, &out, &errb); code == 0 {
		t.Fatalf("flux config builtin with no NAME: exit 0")
	}
	out.Reset()
	if code := Main([]string{"config", "builtin", "python_path"}, nil, &out, &errb); code != 0 || out.String() != "/pkgdir\n" {
		t.Errorf("python_path: exit %d, %q", code, out.String())
	}
	for _, k := range []string{"shell_path", "confdir", "libexecdir"} {
		out.Reset()
		if code := Main([]string{"config", "builtin", k}, nil, &out, &errb); code != 0 || strings.TrimSpace(out.String()) == "" {
			t.Errorf("%s: exit %d, %q", k, code, out.String())
		}
	}
	errb.Reset()
	code := Main([]string{"config", "builtin", "nope"}, nil, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "nope is invalid (valid: rc1_path") {
		t.Errorf("unknown key: exit %d, %q", code, errb.String())
	}
}

// TestParseConfigValue: flux config set reads each type strictly and
// names the value it could not read.
func TestParseConfigValue(t *testing.T) {
	for _, tt := range []struct {
		text, typ string
		want      string // JSON; "" for an error
	}{
		{"42", "integer", "42"},
		{"0x10", "integer", "16"},
		{"hello", "integer", ""},
		{"3", "real", "3.0"},
		{"3.14", "real", "3.14"},
		{"hello", "real", ""},
		{"true", "boolean", "true"},
		{"false", "boolean", "false"},
		{"maybe", "boolean", ""},
		{"[1,2,3]", "array", "[1,2,3]"},
		{"[1 2]", "array", ""},
		{"{}", "array", ""},
		{"{}", "object", "{}"},
		{"{foo}", "object", ""},
		{"45m", "fsd", `"45m"`},
		{"hello", "fsd", ""},
		{"xyz", "string", `"xyz"`},
		{`"quoted"`, "string", `"quoted"`},
		{`"hello`, "string", ""},
	} {
		v, err := parseConfigValue(tt.text, tt.typ)
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), "Error parsing") {
				t.Errorf("%q as %s: %v, %v; want an error", tt.text, tt.typ, v, err)
			}
			continue
		}
		b, _ := json.Marshal(v)
		if err != nil || string(b) != tt.want {
			t.Errorf("%q as %s: %s, %v; want %s", tt.text, tt.typ, b, err, tt.want)
		}
	}
}

// TestSetConfigPath: set makes the tables on the path and refuses to
// go through a value that is not one.
func TestSetConfigPath(t *testing.T) {
	conf := map[string]any{"x": "s"}
	if err := setConfigPath(conf, "a.b.c", json.Number("1")); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(conf); string(b) != `{"a":{"b":{"c":1}},"x":"s"}` {
		t.Errorf("got %s", b)
	}
	if err := setConfigPath(conf, "x.y", true); err == nil || !strings.Contains(err.Error(), "x is not a table") {
		t.Errorf("through a string: %v", err)
	}
	if configTypeOf(json.Number("1.0")) != "real" || configTypeOf(json.Number("1")) != "integer" || configTypeOf("s") != "string" {
		t.Error("configTypeOf")
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
