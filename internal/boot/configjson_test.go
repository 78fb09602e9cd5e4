package boot

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// A config directory's .json files are read beside its .toml files, in
// name order, with TOML's value types; bad JSON is an error naming the
// file.
func TestLoadConfigJSON(t *testing.T) {
	dir := writeConf(t, map[string]string{
		"10-bootstrap.toml": "[bootstrap]\ncurve_cert = \"curve.cert\"\n",
		"20-more.json": `{"bootstrap": {"default_port": 8050,
			"hosts": [{"host": "node0"}, {"host": "node[1-2]"}]},
			"tbon": {"fanout": 2, "torpid_max": "30s"}, "x": {"f": 1.5, "l": [1, "a"]}}`,
	})
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs, _, _ := c.Section("bootstrap")
	if bs["curve_cert"] != "curve.cert" || bs["default_port"] != int64(8050) {
		t.Fatalf("merged bootstrap: %v", bs)
	}
	hosts, ok := bs["hosts"].([]map[string]any)
	if !ok || len(hosts) != 2 || hosts[1]["host"] != "node[1-2]" {
		t.Fatalf("hosts: %#v", bs["hosts"])
	}
	if tb, _, _ := c.Section("tbon"); tb["fanout"] != int64(2) || tb["torpid_max"] != "30s" {
		t.Fatalf("tbon: %v", tb)
	}
	if x, _, _ := c.Section("x"); x["f"] != 1.5 {
		t.Fatalf("float: %v", x)
	}
	// A single .json file works too.
	one, err := LoadConfig(filepath.Join(dir, "20-more.json"))
	if err != nil || one.Table["tbon"].(map[string]any)["fanout"] != int64(2) {
		t.Fatalf("single json file: %v %v", one, err)
	}

	for _, tc := range []struct{ name, text, want string }{
		{"bad.json", `{"tbon": {"fanout": }`, "bad.json: byte"},
		{"arr.json", `[1, 2]`, "arr.json: want a JSON object at the top, got an array"},
		{"null.json", `{"tbon": {"fanout": null}}`, "null.json: null has no TOML equivalent"},
		{"two.json", `{"a": {}} {"b": {}}`, "two.json: text after the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := writeConf(t, map[string]string{tc.name: tc.text})
			_, err := LoadConfig(d)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}

	// A key set by a .toml and a .json file is a conflict naming both.
	d := writeConf(t, map[string]string{
		"a.toml": "[tbon]\nfanout = 2\n",
		"b.json": `{"tbon": {"fanout": 4}}`,
	})
	if _, err := LoadConfig(d); err == nil || !strings.Contains(err.Error(), "b.json: tbon.fanout is already set in "+filepath.Join(d, "a.toml")) {
		t.Fatalf("conflict: %v", err)
	}
}
