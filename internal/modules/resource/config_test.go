package resource

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

func TestBuildConfigR(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		brokers []string
		want    string // R short form, nodelist, properties
		err     string
	}{
		{
			name: "one entry",
			json: `[{"hosts":"node[0-3]","cores":"0-63"}]`,
			want: "rank[0-3]/core[0-63] node[0-3] map[]",
		},
		{
			name: "entries merge per host",
			json: `[{"hosts":"test[1-4]","cores":"0-7"},{"hosts":"test[1,2]","gpus":"0-1"},{"hosts":"test[1-3]","properties":["batch"]},{"hosts":"test4","properties":["debug"]}]`,
			want: "rank[0-1]/core[0-7],gpu[0-1] rank[2-3]/core[0-7] test[1-4] map[batch:0-2 debug:3]",
		},
		{
			name:    "ranks follow the broker hostlist",
			json:    `[{"hosts":"a,b","cores":"0-1"},{"hosts":"c","cores":"0-3"}]`,
			brokers: []string{"c", "a", "b"},
			want:    "rank0/core[0-3] rank[1-2]/core[0-1] c,a,b map[]",
		},
		{
			name:    "a hostlist that differs is ignored",
			json:    `[{"hosts":"node[0-1]","cores":"0"}]`,
			brokers: []string{"vm", "vm"},
			want:    "rank[0-1]/core0 node[0-1] map[]",
		},
		{name: "bad hostlist", json: `[{"hosts":"node[0-","cores":"0"}]`, err: "resource.config[0].hosts"},
		{name: "bad cores", json: `[{"hosts":"n0","cores":"x"}]`, err: "resource.config[0].cores"},
		{name: "no cores", json: `[{"hosts":"n0","gpus":"0"}]`, err: "host n0 has no cores"},
		{name: "bad property", json: `[{"hosts":"n0","cores":"0","properties":["a|b"]}]`, err: "resource.config[0].properties"},
		{name: "unknown key", json: `[{"hosts":"n0","cores":"0","memory":"1G"}]`, err: `unknown key "memory"`},
		{name: "not an array", json: `{"hosts":"n0"}`, err: "resource.config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := parseConfigJSON([]byte(tt.json))
			if err == nil {
				c := Config{Entries: entries, DiscoverTimeout: 1}
				if err = c.Validate(); err == nil {
					r, berr := buildConfigR(entries, tt.brokers)
					err = berr
					if err == nil {
						props := map[string]string{}
						for k, v := range r.Properties() {
							props[k] = v.String()
						}
						got := r.String() + " " + r.Nodelist().String() + " " + fmtMap(props)
						if got != tt.want {
							t.Fatalf("got  %s\nwant %s", got, tt.want)
						}
					}
				}
			}
			if tt.err == "" && err != nil {
				t.Fatal(err)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrConfig) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.err)
				}
			}
		})
	}
}

func fmtMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	var b strings.Builder
	b.WriteString("map[")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + ":" + m[k])
	}
	b.WriteString("]")
	return b.String()
}

func TestConfigTOML(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte(`
[bootstrap]
curve_cert = "/x"

[resource]
exclude = "node0"

[[resource.config]]
hosts = "node[0-16383]"
cores = "0-63"

[[resource.config]]
hosts = "node[0-3]"
gpus = "0-3"
properties = ["debug"]
`), 0o644)
	var c Config
	if err := c.readTOML(good); err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) != 2 || c.Exclude != "node0" {
		t.Fatalf("config %+v", c)
	}
	r, err := buildConfigR(c.Entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.NNodes() != 16384 || r.NCores() != 16384*64 || r.NGPUs() != 16 || r.PropertyRanks("debug").String() != "0-3" {
		t.Fatalf("R %s", r.String())
	}
	ex, err := excludeRanks(c.Exclude, r)
	if err != nil || !ex.Equal(idset.New(0)) {
		t.Fatalf("exclude %v %v", ex, err)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[[resource.config]]\nhosts = \"n0\"\ncorez = \"0\"\n"), 0o644)
	if err := (&Config{}).readTOML(bad); err == nil || !strings.Contains(err.Error(), "corez") {
		t.Fatalf("unknown key: %v", err)
	}
	if err := (&Config{}).readTOML(filepath.Join(dir, "missing.toml")); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestHwloc counts cores and GPUs of the real topologies in the shared
// conformance data.
func TestHwloc(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "shared", "conformance", "hwloc")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	tests := []struct {
		file        string
		cores, gpus string
	}{
		{"corona.xml", "0-47", "0-7"},   // AMD EPYC + 8 MI50 (rsmi)
		{"sierra.xml", "0-43", "0-3"},   // POWER9 + 4 V100 (cuda; DRM cards ignored)
		{"ipa20.xml", "0-111", "0-3"},   // cuda, opencl and nvml each list the same 4
		{"tuo.SPX.xml", "0-95", "0-3"},  // MI300A, one partition per APU
		{"tuo.TPX.xml", "0-95", "0-11"}, // three per APU
		{"tuo.CPX.xml", "0-95", "0-23"}, // six per APU
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			l, err := discover(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if l.Cores.String() != tt.cores || l.GPUs.String() != tt.gpus {
				t.Fatalf("cores %s gpus %s, want %s %s", l.Cores, l.GPUs, tt.cores, tt.gpus)
			}
		})
	}
	if _, err := parseHwloc(strings.NewReader("<nothwloc/>")); err == nil {
		t.Fatal("accepted a non-hwloc document")
	}
	if _, err := parseHwloc(strings.NewReader("<topology><object type=")); err == nil {
		t.Fatal("accepted malformed XML")
	}
}

func TestDiscoverSysfs(t *testing.T) {
	old := sysfsRoot
	defer func() { sysfsRoot = old }()
	sysfsRoot = t.TempDir()
	os.MkdirAll(filepath.Join(sysfsRoot, "devices/system/cpu"), 0o755)
	os.WriteFile(filepath.Join(sysfsRoot, "devices/system/cpu/online"), []byte("0-3,8-11\n"), 0o644)
	l, err := discover("")
	if err != nil || l.Cores.String() != "0-7" || !l.GPUs.Empty() || l.NUMA != nil {
		t.Fatalf("%v %v", l, err)
	}
}

// TestModuleArguments: the arguments flux-core's resource module takes
// are accepted with its meaning; any other is refused by name.
func TestModuleArguments(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		forceUp bool
		verify  Verify
		err     string
	}{
		{args: nil, verify: DefaultVerify},
		{args: []string{"noverify"}, verify: noVerify},
		{args: []string{"monitor-force-up"}, forceUp: true, verify: DefaultVerify},
		{args: []string{"notruncate"}, verify: DefaultVerify},
		{args: []string{"monitor-force-up", "noverify", "notruncate"}, forceUp: true, verify: noVerify},
		{args: []string{"badoption"}, err: `unknown module argument "badoption" (known: monitor-force-up, noverify, notruncate)`},
		{args: []string{"noverify=1"}, err: `unknown module argument "noverify=1"`},
		{args: []string{"noverify", "monitor-ignore-hwloc"}, err: `unknown module argument "monitor-ignore-hwloc"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := &Config{Verify: DefaultVerify}
			err := c.applyArgs(tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrConfig) {
					t.Fatalf("error %v, want a configuration error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ForceUp != tt.forceUp || c.Verify != tt.verify {
				t.Fatalf("ForceUp %v Verify %+v, want %v %+v", c.ForceUp, c.Verify, tt.forceUp, tt.verify)
			}
			if tt.verify == noVerify && !c.Verify.off() {
				t.Fatal("noverify leaves checks on")
			}
		})
	}
}

// TestTableAttrsFromJSON: the [resource] table as config.get returns it
// (JSON: arrays of tables as []any) gives the same attributes as the
// TOML-decoded one.
func TestTableAttrsFromJSON(t *testing.T) {
	toml := map[string]any{"resource": map[string]any{
		"noverify": true,
		"config":   []map[string]any{{"hosts": "n[0-1]", "cores": "0-3"}},
	}}
	want, err := TableAttrs(toml)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(toml)
	var fromJSON map[string]any
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	got, err := TableAttrs(fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from JSON %v, from TOML %v", got, want)
	}
}
