package boot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// seed004 is seed 004's boot.conf with a key and one address (10.0.0.1)
// that fakeHost holds.
const seed004 = `session-id = "mycluster"
curve_cert = "curve.cert"
tbon-endpoints = [ "tcp://192.168.9.1:8020", "tcp://10.0.0.1:8020", "tcp://192.168.9.3:8020"]
`

// bootFile decides the plan of host for -S boot.config_file=boot.conf
// (files written into one directory), with -c DIR when withConfig.
// It returns boot.conf's directory too.
func bootFile(t *testing.T, files map[string]string, host string, withConfig bool, o Options) (*Plan, string, error) {
	t.Helper()
	dir := writeConf(t, files)
	o.BootFile = filepath.Join(dir, "boot.conf")
	if withConfig {
		// -c from another directory: curve_cert stays boot.conf's
		// neighbour
		other := t.TempDir()
		o.ConfigPath = filepath.Join(other, "conf.toml")
		if err := os.WriteFile(o.ConfigPath, []byte(files["conf.toml"]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o.Host = fakeHost(host)
	o.Getenv = noEnv
	p, err := Decide(context.Background(), o)
	return p, dir, err
}

// TestBootFile: seed 004's spelling goes the [bootstrap] table's way: the
// rank from this host's addresses or -S boot.rank, the parent by the
// fanout, this broker's own entry in the hostlist its hostname.
func TestBootFile(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		o     Options
		want  Plan
	}{
		{"by address", map[string]string{"boot.conf": seed004}, Options{},
			Plan{Method: "config", Rank: 1, Size: 3, Fanout: 2, ParentURI: "tcp://192.168.9.1:8020",
				Hostlist: []string{"192.168.9.1", "me", "192.168.9.3"}}},
		{"boot.rank", map[string]string{"boot.conf": seed004}, Options{Rank: "0"},
			Plan{Method: "config", Rank: 0, Size: 3, Fanout: 2, BindURI: "tcp://192.168.9.1:8020",
				Hostlist: []string{"me", "10.0.0.1", "192.168.9.3"}}},
		{"fanout 1 chain", map[string]string{"boot.conf": seed004}, Options{Rank: "2", Fanout: 1},
			Plan{Method: "config", Rank: 2, Size: 3, Fanout: 1, ParentURI: "tcp://10.0.0.1:8020",
				Hostlist: []string{"192.168.9.1", "10.0.0.1", "me"}}},
		{"written with [bootstrap]", map[string]string{"boot.conf": "[bootstrap]\n" + seed004}, Options{},
			Plan{Method: "config", Rank: 1, Size: 3, Fanout: 2, ParentURI: "tcp://192.168.9.1:8020",
				Hostlist: []string{"192.168.9.1", "me", "192.168.9.3"}}},
		{"with -c for [tbon]", map[string]string{"boot.conf": seed004, "conf.toml": "[tbon]\nfanout = 1\n"}, Options{},
			Plan{Method: "config", Rank: 1, Size: 3, Fanout: 1, ParentURI: "tcp://192.168.9.1:8020", BindURI: "tcp://10.0.0.1:8020",
				Hostlist: []string{"192.168.9.1", "me", "192.168.9.3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, withConfig := tc.files["conf.toml"]
			p, dir, err := bootFile(t, tc.files, "me", withConfig, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if p.CertPath != filepath.Join(dir, "curve.cert") {
				t.Errorf("cert %q", p.CertPath)
			}
			got := *p
			got.CertPath, got.cleanup = "", nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestBootFileBad(t *testing.T) {
	noKey := strings.Replace(seed004, "curve_cert = \"curve.cert\"\n", "", 1)
	tests := []struct {
		name  string
		files map[string]string
		o     Options
		kind  error
		want  []string
	}{
		{"empty session-id", map[string]string{"boot.conf": "session-id = \"\"\ntbon-endpoints = [\"tcp://10.0.0.1:1\"]\n"}, Options{}, ErrConfig,
			[]string{"boot.config_file=", "boot.conf", "bootstrap.session-id: empty"}},
		{"no key", map[string]string{"boot.conf": noKey}, Options{}, ErrNeedCert,
			[]string{"boot.conf", "curve_cert: required for 3 brokers", "-S tbon.cert"}},
		{"not this host's", map[string]string{"boot.conf": "tbon-endpoints = [\"tcp://10.9.9.9:1\"]\n"}, Options{}, ErrNotListed,
			[]string{"boot.conf", "no entry is an address of this host", "-S boot.rank"}},
		{"name, not address", map[string]string{"boot.conf": "tbon-endpoints = [\"tcp://node1:8020\"]\n"}, Options{}, ErrConfig,
			[]string{"boot.conf", `tbon-endpoints[0]: "tcp://node1:8020": the address must be numeric`}},
		{"unknown key", map[string]string{"boot.conf": "tbon-endpoint = [\"tcp://10.0.0.1:1\"]\n"}, Options{}, ErrConfig,
			[]string{"boot.conf", "bootstrap.tbon-endpoint: unknown key"}},
		{"boot.rank out of range", map[string]string{"boot.conf": seed004}, Options{Rank: "3"}, ErrConfig,
			[]string{"boot.rank=3: not a rank of the 3 tbon-endpoints (0-2)"}},
		{"boot.rank not a number", map[string]string{"boot.conf": seed004}, Options{Rank: "one"}, ErrConfig,
			[]string{"boot.rank=one: not a rank"}},
		{"boot.rank with hosts", map[string]string{"boot.conf": "[bootstrap]\nhosts = [{host=\"me\"}]\n"}, Options{Rank: "0"}, ErrConfig,
			[]string{"boot.rank=0: only used with tbon-endpoints"}},
		{"both files have [bootstrap]", map[string]string{"boot.conf": seed004, "conf.toml": "[bootstrap]\nhosts = [{host=\"me\"}]\n"}, Options{}, ErrConfig,
			[]string{"a [bootstrap] table in the configuration: give one"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, withConfig := tc.files["conf.toml"]
			_, _, err := bootFile(t, tc.files, "me", withConfig, tc.o)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error kind: %v, want %v", err, tc.kind)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
	t.Run("boot.rank without tbon-endpoints", func(t *testing.T) {
		_, err := Decide(context.Background(), Options{Rank: "1", Host: fakeHost("me"), Getenv: noEnv})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "boot.rank=1: only used with tbon-endpoints") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Decide(context.Background(), Options{BootFile: "/nonexistent/boot.conf", Host: fakeHost("me"), Getenv: noEnv})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "boot.config_file: open /nonexistent/boot.conf") {
			t.Errorf("error %v", err)
		}
	})
}
