package instance

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestApplyConf: each form of --conf VALUE, applied in order over one
// table, with TOML's number types.
func TestApplyConf(t *testing.T) {
	dir := t.TempDir()
	tomlFile := filepath.Join(dir, "a.toml")
	jsonFile := filepath.Join(dir, "b.json")
	os.WriteFile(tomlFile, []byte("[resource]\nnorestrict = true\n"), 0o644)
	os.WriteFile(jsonFile, []byte(`{"job-manager":{"inactive-age-limit":"7d"}}`), 0o644)
	table := map[string]any{}
	for _, v := range []string{
		tomlFile, jsonFile,
		"queues.debug.requires=[\"x\"]",
		"policy.limits.job-size.max.nnodes=4",
		"exec.imp=/usr/libexec/flux/flux-imp",
		`{"policy":{"limits":{"duration":"1h"}}}`,
		"[access]\nallow-guest-user = true\n",
	} {
		if err := applyConf(table, v); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
	}
	want := map[string]any{
		"resource":    map[string]any{"norestrict": true},
		"job-manager": map[string]any{"inactive-age-limit": "7d"},
		"queues":      map[string]any{"debug": map[string]any{"requires": []any{"x"}}},
		"policy":      map[string]any{"limits": map[string]any{"job-size": map[string]any{"max": map[string]any{"nnodes": int64(4)}}, "duration": "1h"}},
		"exec":        map[string]any{"imp": "/usr/libexec/flux/flux-imp"},
		"access":      map[string]any{"allow-guest-user": true},
	}
	if !reflect.DeepEqual(table, want) {
		t.Fatalf("got %#v\nwant %#v", table, want)
	}
	for _, bad := range []string{"=1", "a..b=1", "{not json", "[x\nbroken", filepath.Join(dir, "missing.toml"), "exec.imp.x=1"} {
		if err := applyConf(table, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
