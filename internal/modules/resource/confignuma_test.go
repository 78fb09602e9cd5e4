package resource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// TestConfigNUMA: domains declared in [[resource.config]] go into R's
// scheduling key, grouped by rank as discovered ones are; several
// entries may declare a host's domains between them.
func TestConfigNUMA(t *testing.T) {
	entries, err := parseConfigJSON([]byte(`[
		{"hosts":"n[0-2]","cores":"0-7","gpus":"0-1","numa":[
			{"cores":"0-3","gpus":"0","socket":0,"nics":["mlx5_0"]},
			{"cores":"4-7","gpus":"1","socket":1}]},
		{"hosts":"n3","cores":"0-3"},
		{"hosts":"n4","cores":"0-3","numa":[{"cores":"0-1"}]},
		{"hosts":"n4","cores":"4-5","numa":[{"cores":"4-5"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	R, err := buildConfigR(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fluxgo.numa":[{"ranks":"0-2","domains":[{"cores":"0-3","gpus":"0","socket":0,"nics":["mlx5_0"]},{"cores":"4-7","gpus":"1","socket":1}]},` +
		`{"ranks":"4","domains":[{"cores":"0-1"},{"cores":"4-5"}]}]}`
	if got := string(R.Scheduling()); got != want {
		t.Fatalf("scheduling %s\nwant       %s", got, want)
	}
	// without domains nothing is written
	plain, _ := parseConfigJSON([]byte(`[{"hosts":"n0","cores":"0-3"}]`))
	if R, err := buildConfigR(plain, nil); err != nil || R.Scheduling() != nil {
		t.Fatalf("no domains: %s %v", R.Scheduling(), err)
	}
}

// TestConfigNUMAErrors: each mistake is refused with the key and value
// it is about.
func TestConfigNUMAErrors(t *testing.T) {
	for _, tt := range []struct{ name, json, err string }{
		{"no cores", `[{"hosts":"n0","cores":"0-3","numa":[{"gpus":"0"}]}]`, `resource.config[0].numa[0].cores is required`},
		{"bad cores", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-"}]}]`, `resource.config[0].numa[0].cores "0-"`},
		{"bad gpus", `[{"hosts":"n0","cores":"0-3","gpus":"0","numa":[{"cores":"0","gpus":"a"}]}]`, `resource.config[0].numa[0].gpus "a"`},
		{"core out of range", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-1"},{"cores":"2-5"}]}]`,
			`resource.config[0].numa[1].cores "2-5": core 4-5 is not among the entry's cores (0-3)`},
		{"gpu out of range", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-1","gpus":"0"}]}]`,
			`resource.config[0].numa[0].gpus "0": gpu 0 is not among the entry's gpus (none)`},
		{"cores overlap", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-2"},{"cores":"2-3"}]}]`,
			`resource.config[0].numa[1].cores "2-3": core 2 is in an earlier domain too`},
		{"gpus overlap", `[{"hosts":"n0","cores":"0-3","gpus":"0-1","numa":[{"cores":"0-1","gpus":"0-1"},{"cores":"2-3","gpus":"1"}]}]`,
			`resource.config[0].numa[1].gpus "1": gpu 1 is in an earlier domain too`},
		{"negative socket", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","socket":-1}]}]`,
			`resource.config[0].numa[0].socket -1`},
		{"bad memory", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","memory":"lots"}]}]`,
			`resource.config[0].numa[0].memory "lots": size "lots": want a number with an optional K, M, G, T or P suffix`},
		{"zero memory", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","memory":0}]}]`,
			`resource.config[0].numa[0].memory 0: size 0: must be positive`},
		{"memory not a size", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","memory":[1]}]}]`,
			`resource.config[0].numa[0].memory [1]: want a size such as "512M"`},
		{"huge memory", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","memory":"2048P"}]}]`,
			`resource.config[0].numa[0].memory "2048P": above 1024P`},
		{"empty nic", `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-3","nics":[""]}]}]`,
			`resource.config[0].numa[0].nics`},
		{"overlap across entries", `[{"hosts":"n[0-1]","cores":"0-3","numa":[{"cores":"0-1"}]},{"hosts":"n1","cores":"0-3","numa":[{"cores":"1-2"}]}]`,
			`resource.config[1].numa[0].cores "1-2": core 1 of host n1 is in a domain of resource.config[0] too`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := parseConfigJSON([]byte(tt.json))
			if err == nil {
				_, err = buildConfigR(entries, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v\nwant one with %s", err, tt.err)
			}
		})
	}
	if _, err := parseConfigJSON([]byte(`[{"hosts":"n0","cores":"0","numa":[{"cores":"0","mem":"1G"}]}]`)); err == nil {
		t.Fatal("accepted an unknown key in a domain")
	}
}

// TestConfigNUMATOML: the domains as an admin writes them, in a TOML
// config file and through the [resource] table (TableAttrs).
func TestConfigNUMATOML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resource.toml")
	os.WriteFile(path, []byte(`
[[resource.config]]
hosts = "n[0-1]"
cores = "0-7"
gpus = "0-1"
numa = [
  { cores = "0-3", gpus = "0", socket = 0, nics = ["mlx5_0"], memory = "64G" },
  { cores = "4-7", gpus = "1", socket = 1, memory = 68719476736 },
]
`), 0o644)
	var c Config
	if err := c.readTOML(path); err != nil {
		t.Fatal(err)
	}
	R, err := buildConfigR(c.Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fluxgo.numa":[{"ranks":"0-1","domains":[{"cores":"0-3","gpus":"0","socket":0,"nics":["mlx5_0"],"memory":68719476736},{"cores":"4-7","gpus":"1","socket":1,"memory":68719476736}]}]}`
	if got := string(R.Scheduling()); got != want {
		t.Fatalf("scheduling %s\nwant       %s", got, want)
	}
	os.WriteFile(path, []byte("[[resource.config]]\nhosts = \"n0\"\ncores = \"0\"\nnuma = [{ cores = \"0\", mem = \"1G\" }]\n"), 0o644)
	if err := c.readTOML(path); err == nil || !strings.Contains(err.Error(), "mem") {
		t.Fatalf("unknown key in a TOML domain: %v", err)
	}
	// config.get's JSON form of the same table
	attrs, err := TableAttrs(map[string]any{"resource": map[string]any{"config": []any{
		map[string]any{"hosts": "n0", "cores": "0-3", "numa": []any{map[string]any{"cores": "0-1"}, map[string]any{"cores": "2-3"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseConfigJSON([]byte(attrs["resource.config"]))
	if err != nil || len(entries) != 1 || len(entries[0].NUMA) != 2 {
		t.Fatalf("through TableAttrs: %+v %v", entries, err)
	}
}

// TestConfigJSONErrors: decoding errors of resource.config name the key
// and what it wants, in the configuration's terms (QA: Go's decoder
// messages, with Go type names).
func TestConfigJSONErrors(t *testing.T) {
	for in, want := range map[string]string{
		`[{"hosts":"n0","cores":"0-3","memory":"1G"}]`:                         `resource.config: unknown key "memory" (an entry has hosts, cores, gpus, properties and numa`,
		`[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-1","socket":"x"}]}]`: `resource.config: numa.socket: want a number, not a string`,
		`[{"hosts":"n0","cores":"0-3","numa":"0-1"}]`:                          `resource.config: numa: want an array of tables, not a string`,
		`[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-1","nics":"m"}]}]`:   `resource.config: numa.nics: want an array of strings, not a string`,
		`{"hosts":"n0"}`:             `resource.config: want an array of tables, not an object`,
		`[{"hosts":"n0","cores":3}]`: `resource.config: cores: want a string, not a number`,
	} {
		_, err := parseConfigJSON([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// TestConfigSocketRange: a socket id is a logical one, below the number
// of the entry's domains (QA: socket = 99 on a 2-domain node passed).
func TestConfigSocketRange(t *testing.T) {
	in := `[{"hosts":"n0","cores":"0-3","numa":[{"cores":"0-1","socket":0},{"cores":"2-3","socket":99}]}]`
	entries, err := parseConfigJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	_, err = entryDomains(0, entries[0], idset.MustParse("0-3"), idset.Set{})
	if want := "resource.config[0].numa[1].socket 99: want a logical socket id below 2"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("socket 99 of 2 domains: %v, want %q", err, want)
	}
}
