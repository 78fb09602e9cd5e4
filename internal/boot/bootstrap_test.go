package boot

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeHost is a machine with a loopback, eth0 (10.0.0.1, default route)
// and en0 (192.168.1.5).
func fakeHost(name string) *Host {
	return &Host{
		Name: name,
		Ifaces: []Iface{
			{Name: "lo", Addrs: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, Loopback: true},
			{Name: "eth0", Addrs: []net.IP{net.ParseIP("10.0.0.1")}},
			{Name: "en0", Addrs: []net.IP{net.ParseIP("fe80::1"), net.ParseIP("192.168.1.5")}},
		},
		DefaultIface: "eth0",
	}
}

func noEnv(string) string { return "" }

// writeConf writes files (name -> TOML) into a fresh directory, plus an
// instance key named curve.cert, and returns the directory.
func writeConf(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "curve.cert"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func decide(t *testing.T, dir, host string, o Options) (*Plan, error) {
	t.Helper()
	o.ConfigPath = dir
	o.Host = fakeHost(host)
	o.Getenv = noEnv
	return Decide(context.Background(), o)
}

const manExample = `
[bootstrap]
curve_cert = "curve.cert"
hosts = [
    { host="foo", bind="tcp://eth0:9001", connect="tcp://10.0.1.1:9001" },
    { host = "bar" },
]
`

const defaultsExample = `
[bootstrap]
curve_cert = "curve.cert"
default_port = 8050
default_bind = "tcp://en0:%p"
default_connect = "tcp://e%h:%p"
hosts = [
    { host="test0", bind="tcp://eth0:9001", connect="tcp://test-mgmt:9001" },
    { host = "test[1-6]" },
]
`

func TestConfigBootGood(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		host  string
		opts  Options
		want  Plan // CertPath is checked separately
	}{
		{"man page rank 0", map[string]string{"a.toml": manExample}, "foo", Options{},
			Plan{Method: "config", Rank: 0, Size: 2, Fanout: 2, BindURI: "tcp://10.0.0.1:9001", Hostlist: []string{"foo", "bar"}}},
		{"man page rank 1", map[string]string{"a.toml": manExample}, "bar", Options{},
			Plan{Method: "config", Rank: 1, Size: 2, Fanout: 2, ParentURI: "tcp://10.0.1.1:9001", Hostlist: []string{"foo", "bar"}}},
		{"defaults interior rank", map[string]string{"a.toml": defaultsExample}, "test2", Options{},
			Plan{Method: "config", Rank: 2, Size: 7, Fanout: 2, ParentURI: "tcp://test-mgmt:9001",
				BindURI:  "tcp://192.168.1.5:8050",
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"defaults leaf rank", map[string]string{"a.toml": defaultsExample}, "test4", Options{},
			Plan{Method: "config", Rank: 4, Size: 7, Fanout: 2, ParentURI: "tcp://etest1:8050",
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"fanout from command line", map[string]string{"a.toml": defaultsExample}, "test4", Options{Fanout: 3},
			Plan{Method: "config", Rank: 4, Size: 7, Fanout: 3, ParentURI: "tcp://etest1:8050",
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"fanout from tbon table in another file",
			map[string]string{"a.toml": defaultsExample, "b.toml": "[tbon]\nfanout = 6\nconnect_timeout = \"5s\"\n"}, "test4", Options{},
			Plan{Method: "config", Rank: 4, Size: 7, Fanout: 6, ParentURI: "tcp://test-mgmt:9001", ConnectTimeout: 5 * time.Second,
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"topo kary", map[string]string{"a.toml": defaultsExample + "[tbon]\ntopo = \"kary:3\"\n"}, "test4", Options{},
			Plan{Method: "config", Rank: 4, Size: 7, Fanout: 3, ParentURI: "tcp://etest1:8050",
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"topo custom is flat", map[string]string{"a.toml": defaultsExample + "[tbon]\ntopo = \"custom\"\n"}, "test6", Options{},
			Plan{Method: "config", Rank: 6, Size: 7, Fanout: 6, ParentURI: "tcp://test-mgmt:9001",
				Hostlist: []string{"test0", "test1", "test2", "test3", "test4", "test5", "test6"}}},
		{"parent keys matching the tree", map[string]string{"a.toml": `
[bootstrap]
curve_cert = "curve.cert"
default_port = 8050
default_bind = "tcp://*:%p"
default_connect = "tcp://%h:%p"
[[bootstrap.hosts]]
host = "n0"
[[bootstrap.hosts]]
host = "n[1-2]"
parent = "n0"
[[bootstrap.hosts]]
host = "n[3-4]"
parent = "n1"
`}, "n1", Options{},
			Plan{Method: "config", Rank: 1, Size: 5, Fanout: 2, ParentURI: "tcp://n0:8050", BindURI: "tcp://0.0.0.0:8050",
				Hostlist: []string{"n0", "n1", "n2", "n3", "n4"}}},
		{"ipc needs no key", map[string]string{"a.toml": `
[bootstrap]
hosts = [ { host = "a", bind = "ipc:///tmp/x/tbon", connect = "ipc:///tmp/x/tbon" }, { host = "b" } ]
`}, "a", Options{},
			Plan{Method: "config", Size: 2, Fanout: 2, BindURI: "ipc:///tmp/x/tbon", Hostlist: []string{"a", "b"}}},
		{"one host needs no key or URIs", map[string]string{"a.toml": "[bootstrap]\nhosts = [{host=\"solo\"}]\n"}, "solo", Options{},
			Plan{Method: "config", Size: 1, Fanout: 2, Hostlist: []string{"solo"}}},
		{"empty hosts is standalone", map[string]string{"a.toml": "[bootstrap]\n"}, "me", Options{},
			Plan{Method: "config", Size: 1, Fanout: 2, Hostlist: []string{"me"}}},
		{"no bootstrap table and no PMI", map[string]string{"a.toml": "[resource]\nnoverify = true\n"}, "me", Options{},
			Plan{Method: "single", Size: 1, Fanout: 2, Hostlist: []string{"me"}}},
		{"ipv6 wildcard", map[string]string{"a.toml": `
[bootstrap]
enable_ipv6 = true
curve_cert = "curve.cert"
hosts = [ { host = "a", bind = "tcp://*:99", connect = "tcp://[fd00::1]:99" }, { host = "b" } ]
`}, "b", Options{},
			Plan{Method: "config", Rank: 1, Size: 2, Fanout: 2, ParentURI: "tcp://[fd00::1]:99", Hostlist: []string{"a", "b"}}},
		{"older tbon-endpoints by address", map[string]string{"a.toml": `
[bootstrap]
session-id = "test"
curve_cert = "curve.cert"
tbon-endpoints = ["tcp://192.168.9.1:8020", "tcp://10.0.0.1:8020", "tcp://192.168.9.3:8020", "tcp://192.168.9.4:8020"]
`}, "whatever", Options{},
			Plan{Method: "config", Rank: 1, Size: 4, Fanout: 2, ParentURI: "tcp://192.168.9.1:8020", BindURI: "tcp://10.0.0.1:8020",
				Hostlist: []string{"192.168.9.1", "whatever", "192.168.9.3", "192.168.9.4"}}},
		{"older tbon-endpoints by rank", map[string]string{"a.toml": `
[bootstrap]
rank = 2
curve_cert = "curve.cert"
tbon-endpoints = ["tcp://127.0.0.1:8020", "tcp://127.0.0.1:8021", "tcp://127.0.0.1:8022"]
`}, "whatever", Options{},
			Plan{Method: "config", Rank: 2, Size: 3, Fanout: 2, ParentURI: "tcp://127.0.0.1:8020",
				Hostlist: []string{"127.0.0.1", "127.0.0.1", "whatever"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeConf(t, tc.files)
			p, err := decide(t, dir, tc.host, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := *p
			got.CertPath, got.cleanup = "", nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan\n got %+v\nwant %+v", got, tc.want)
			}
			if strings.Contains(tc.files["a.toml"], "curve_cert") && p.CertPath != filepath.Join(dir, "curve.cert") {
				t.Fatalf("cert path %q, want it resolved against %s", p.CertPath, dir)
			}
		})
	}
}

func TestConfigBootCertOverride(t *testing.T) {
	dir := writeConf(t, map[string]string{"a.toml": manExample})
	other := filepath.Join(t.TempDir(), "key")
	os.WriteFile(other, []byte("key"), 0o600)
	p, err := decide(t, dir, "bar", Options{CertPath: other})
	if err != nil {
		t.Fatal(err)
	}
	if p.CertPath != other {
		t.Fatalf("cert %q: -S tbon.cert should win", p.CertPath)
	}
	_, err = decide(t, dir, "bar", Options{CertPath: "/elsewhere/key"})
	if err == nil || !strings.Contains(err.Error(), "tbon.cert: stat /elsewhere/key") {
		t.Fatalf("missing -S tbon.cert file: %v", err)
	}
}

func TestConfigBootBad(t *testing.T) {
	tests := []struct {
		name string
		conf string
		host string
		kind error
		want string
	}{
		{"duplicate host", `[bootstrap]
curve_cert = "curve.cert"
hosts = [{host="node[1-3]"}, {host="node0"}, {host="node3"}]`, "node1", ErrConfig,
			`bootstrap.hosts[2].host: duplicate host "node3" (already in bootstrap.hosts[0])`},
		{"unknown bootstrap key", "[bootstrap]\nhost = \"x\"\n", "x", ErrConfig, "bootstrap.host: unknown key"},
		{"unknown host entry key", "[bootstrap]\nhosts = [{host=\"a\", port=1}]\n", "a", ErrConfig, "bootstrap.hosts[0].port: unknown key"},
		{"host missing", "[bootstrap]\nhosts = [{host=\"a\"}, {bind=\"tcp://*:1\"}]\n", "a", ErrConfig, "bootstrap.hosts[1].host: required"},
		{"too many hosts", "[bootstrap]\nhosts = [{host=\"n[0-999999]\"}, {host=\"m[0-99999]\"}]\n", "a", ErrConfig, "bootstrap.hosts[1].host: more than 1048576 hosts"},
		{"bad hostlist", "[bootstrap]\nhosts = [{host=\"node[1-\"}]\n", "a", ErrConfig, "bootstrap.hosts[0].host:"},
		{"wrong type", "[bootstrap]\ndefault_port = \"8050\"\n", "a", ErrConfig, "bootstrap.default_port: want an integer, got a string"},
		{"port out of range", "[bootstrap]\ndefault_port = 70000\n", "a", ErrConfig, "bootstrap.default_port: 70000 is not a port"},
		{"hosts not tables", "[bootstrap]\nhosts = [\"a\"]\n", "a", ErrConfig, "bootstrap.hosts[0]: want a table, got a string"},
		{"bootstrap not a table", "bootstrap = 5\n", "a", ErrConfig, "bootstrap: want a table, got an integer"},
		{"%p without default_port", `[bootstrap]
default_connect = "tcp://%h:%p"
hosts = [{host="a"}]`, "a", ErrConfig, `bootstrap.default_connect: "tcp://%h:%p" uses %p but bootstrap.default_port is not set`},
		{"unknown token", "[bootstrap]\nhosts = [{host=\"a\", connect=\"tcp://%x:1\"}]\n", "a", ErrConfig, "bootstrap.hosts[0].connect: \"tcp://%x:1\": unknown token %x"},
		{"no bind for interior host", `[bootstrap]
curve_cert = "curve.cert"
hosts = [{host="n0", connect="tcp://n0:1"}, {host="n1"}]`, "n1", ErrConfig,
			"bootstrap.hosts[0]: host n0 has brokers below it in the tree but no bind URI"},
		{"no connect for interior host", `[bootstrap]
curve_cert = "curve.cert"
hosts = [{host="n0", bind="tcp://*:1"}, {host="n1"}]`, "n1", ErrConfig,
			"bootstrap.hosts[0]: host n0 has brokers below it in the tree but no connect URI"},
		{"bad scheme", "[bootstrap]\nhosts = [{host=\"a\", connect=\"udp://a:1\"}]\n", "a", ErrConfig,
			`bootstrap.hosts[0].connect: "udp://a:1": unsupported scheme "udp"`},
		{"bad port", "[bootstrap]\nhosts = [{host=\"a\", connect=\"tcp://a:http\"}]\n", "a", ErrConfig,
			`bootstrap.hosts[0].connect: "tcp://a:http": port "http" must be a number 1-65535`},
		{"relative ipc", "[bootstrap]\nhosts = [{host=\"a\", bind=\"ipc://tbon\"}]\n", "a", ErrConfig,
			"bootstrap.hosts[0].bind: \"ipc://tbon\": ipc socket path must be absolute"},
		{"bind to a host name", "[bootstrap]\ndefault_bind = \"tcp://node.example.com:1\"\nhosts = [{host=\"a\"}]\n", "a", ErrConfig,
			"bootstrap.default_bind: \"tcp://node.example.com:1\": \"node.example.com\" is not *, an IP address or an interface name"},
		{"no key for tcp", `[bootstrap]
hosts = [{host="n0", bind="tcp://*:1", connect="tcp://n0:1"}, {host="n1"}]`, "n1", ErrNeedCert,
			"bootstrap.curve_cert: required for 2 brokers linked over tcp://"},
		{"key file missing", `[bootstrap]
curve_cert = "/nonexistent/curve.cert"
hosts = [{host="n0", bind="tcp://*:1", connect="tcp://n0:1"}, {host="n1"}]`, "n1", ErrConfig,
			"bootstrap.curve_cert: stat /nonexistent/curve.cert"},
		{"not listed", manExample, "baz", ErrNotListed, `bootstrap.hosts: this host "baz" is not listed`},
		{"parent off the tree", `[bootstrap]
curve_cert = "curve.cert"
default_port = 1
default_bind = "tcp://*:%p"
default_connect = "tcp://%h:%p"
hosts = [{host="n0"}, {host="n1"}, {host="n2"}, {host="n3", parent="n2"}]`, "n0", ErrConfig,
			`bootstrap.hosts[3].parent: "n2" is not the parent of n3 in the k-ary tree with fanout 2 ("n1" is)`},
		{"parent unknown", "[bootstrap]\nhosts = [{host=\"a\"}, {host=\"b\", parent=\"zz\"}]\n", "a", ErrConfig,
			`bootstrap.hosts[1].parent: "zz" is not in bootstrap.hosts`},
		{"both forms", "[bootstrap]\nhosts = [{host=\"a\"}]\ntbon-endpoints = [\"tcp://10.0.0.1:1\"]\n", "a", ErrConfig,
			"bootstrap.tbon-endpoints: set either bootstrap.hosts or the older bootstrap.tbon-endpoints, not both"},
		{"session-id without endpoints", "[bootstrap]\nsession-id = \"x\"\n", "a", ErrConfig,
			"bootstrap.session-id: only used with bootstrap.tbon-endpoints"},
		{"legacy no match", "[bootstrap]\ntbon-endpoints = [\"tcp://10.9.9.9:1\", \"tcp://10.9.9.8:1\"]\n", "a", ErrNotListed,
			"bootstrap.tbon-endpoints: no entry is an address of this host; set bootstrap.rank"},
		{"legacy two matches", "[bootstrap]\ntbon-endpoints = [\"tcp://127.0.0.1:1\", \"tcp://10.0.0.1:1\"]\n", "a", ErrConfig,
			"bootstrap.tbon-endpoints: entries 0 and 1 are both addresses of this host; set bootstrap.rank"},
		{"legacy rank out of range", "[bootstrap]\nrank = 2\ntbon-endpoints = [\"tcp://10.0.0.1:1\"]\n", "a", ErrConfig,
			"bootstrap.rank: 2 is not a rank of the 1 tbon-endpoints"},
		{"legacy name", "[bootstrap]\ntbon-endpoints = [\"tcp://node0:1\"]\n", "a", ErrConfig,
			"bootstrap.tbon-endpoints[0]: \"tcp://node0:1\": the address must be numeric"},
		{"legacy duplicate", "[bootstrap]\ntbon-endpoints = [\"tcp://10.0.0.1:1\", \"tcp://10.0.0.1:1\"]\n", "a", ErrConfig,
			"bootstrap.tbon-endpoints[1]: duplicate endpoint"},
		{"own bind interface missing", `[bootstrap]
curve_cert = "curve.cert"
hosts = [{host="n0", bind="tcp://eth9:1", connect="tcp://n0:1"}, {host="n1"}]`, "n0", ErrConfig,
			`bootstrap.hosts[0].bind: no network interface "eth9" on this host`},
		{"tbon fanout zero", "[tbon]\nfanout = 0\n", "a", ErrConfig, "tbon.fanout: 0 must be 1-65536"},
		{"tbon bad topo", "[tbon]\ntopo = \"binomial\"\n", "a", ErrConfig, `tbon.topo: "binomial": supported topologies are kary:K and custom`},
		{"tbon topo contradicts fanout", "[tbon]\nfanout = 3\ntopo = \"kary:2\"\n", "a", ErrConfig, `tbon.topo: "kary:2" contradicts tbon.fanout = 3`},
		{"tbon unknown key", "[tbon]\ntorpid_maxx = \"30s\"\n", "a", ErrConfig, "tbon.torpid_maxx: unknown key"},
		{"tbon flux-core key checked", "[tbon]\ntorpid_max = \"soon\"\n", "a", ErrConfig, "tbon.torpid_max: invalid Flux standard duration"},
		{"tbon bad duration", "[tbon]\nconnect_timeout = \"soon\"\n", "a", ErrConfig, "tbon.connect_timeout:"},
		{"toml syntax", "[bootstrap\n", "a", ErrConfig, "a.toml: line 2: expected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeConf(t, map[string]string{"a.toml": tc.conf})
			_, err := decide(t, dir, tc.host, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error kind: %v, want %v", err, tc.kind)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadConfigMerge(t *testing.T) {
	dir := writeConf(t, map[string]string{
		"10-bootstrap.toml": "[bootstrap]\ncurve_cert = \"curve.cert\"\n",
		"20-more.toml":      "[bootstrap]\ndefault_port = 8050\n[tbon]\nfanout = 4\n",
		"ignored.txt":       "not toml at all [",
	})
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs, _, _ := c.Section("bootstrap")
	if bs["curve_cert"] != "curve.cert" || bs["default_port"] != int64(8050) {
		t.Fatalf("merged bootstrap: %v", bs)
	}
	if tb, ok, _ := c.Section("tbon"); !ok || tb["fanout"] != int64(4) {
		t.Fatalf("tbon: %v", tb)
	}

	dir = writeConf(t, map[string]string{
		"a.toml": "[bootstrap]\ndefault_port = 1\n",
		"b.toml": "[bootstrap]\ndefault_port = 2\n",
	})
	_, err = LoadConfig(dir)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "b.toml: bootstrap.default_port is already set in "+filepath.Join(dir, "a.toml")) {
		t.Fatalf("conflict: %v", err)
	}

	// A single file works too, and an empty directory is empty.
	if _, err := LoadConfig(filepath.Join(dir, "a.toml")); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig(t.TempDir())
	if err != nil || len(c.Table) != 0 {
		t.Fatalf("empty dir: %v %v", c, err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing")); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing path: %v", err)
	}
}

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		tmpl, want string
		port       int64
	}{
		{"tcp://%h:%p", "tcp://node1:80", 80},
		{"tcp://e%h-ib:%p", "tcp://enode1-ib:80", 80},
		{"tcp://10.0.0.1:9", "tcp://10.0.0.1:9", 0},
	} {
		got, err := expand(tc.tmpl, "node1", tc.port, "k")
		if err != nil || got != tc.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
	for _, bad := range []string{"tcp://%h:%", "tcp://%q:1", "tcp://%h:%p"} {
		if _, err := expand(bad, "n", 0, "k"); !errors.Is(err, ErrConfig) {
			t.Errorf("expand(%q) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestHintAddr(t *testing.T) {
	h := fakeHost("node1")
	h.Lookup = func(name string) ([]net.IP, error) {
		if name == "node1" {
			return []net.IP{net.ParseIP("10.1.1.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, tc := range []struct{ hint, want string }{
		{"", "10.0.0.1"},
		{"default-route", "10.0.0.1"},
		{"en0", "192.168.1.5"},
		{"lo", "127.0.0.1"},
		{"192.168.0.0/16", "192.168.1.5"},
		{"hostname", "10.1.1.1"},
	} {
		ip, err := h.hintAddr(tc.hint, false)
		if err != nil || ip.String() != tc.want {
			t.Errorf("hint %q: %v %v, want %s", tc.hint, ip, err, tc.want)
		}
	}
	for _, hint := range []string{"eth7", "172.16.0.0/12", "10.0.0.0/33"} {
		if _, err := h.hintAddr(hint, false); err == nil || !strings.Contains(err.Error(), "tbon.interface-hint="+hint) {
			t.Errorf("hint %q: %v", hint, err)
		}
	}
	h.DefaultIface = ""
	if _, err := h.hintAddr("", false); err == nil {
		t.Error("no default route accepted")
	}
	h.Name = "elsewhere"
	if _, err := h.hintAddr("hostname", false); err == nil {
		t.Error("unresolvable hostname accepted")
	}
}

func TestDefaultRouteIface(t *testing.T) {
	path := filepath.Join(t.TempDir(), "route")
	os.WriteFile(path, []byte("Iface\tDestination\tGateway\tFlags\n"+
		"eth1\t0010A8C0\t00000000\t0001\n"+
		"eth0\t00000000\t0101A8C0\t0003\n"), 0o600)
	if got := defaultRouteIface(path); got != "eth0" {
		t.Fatalf("got %q", got)
	}
	if got := defaultRouteIface(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Fatalf("missing file: %q", got)
	}
}

// FuzzBootstrap feeds arbitrary TOML through the whole config boot
// decision: it may fail, but must not panic, and a plan it makes must be
// self-consistent.
func FuzzBootstrap(f *testing.F) {
	f.Add(manExample, "foo")
	f.Add(defaultsExample, "test3")
	f.Add("[bootstrap]\ntbon-endpoints = [\"tcp://10.0.0.1:1\"]\nrank = 0\n", "x")
	f.Add("[bootstrap]\nhosts = [{host=\"a[1-3]\", parent=\"a1\"}]\n[tbon]\ntopo = \"custom\"\n", "a2")
	f.Add("[bootstrap]\ndefault_port = 1\ndefault_bind = \"ipc:///t/%h\"\ndefault_connect = \"ipc:///t/%h\"\nhosts = [{host=\"n[0-9]\"}]\n", "n4")
	f.Fuzz(func(t *testing.T, text, host string) {
		c := &Config{Table: make(map[string]any), origin: make(map[string]string), Dir: "/etc/flux"}
		if err := c.add("fuzz.toml", []byte(text)); err != nil {
			return
		}
		bt, ok, err := c.Section("bootstrap")
		if err != nil || !ok {
			return
		}
		tt, _, err := c.Section("tbon")
		if err != nil {
			return
		}
		tb, err := ParseTBON(tt)
		if err != nil {
			return
		}
		bs, err := ParseBootstrap(c, bt)
		if err != nil {
			return
		}
		p, err := planConfig(bs, *fakeHost(host), chooseFanout(0, tb, len(bs.Hosts)), "/k")
		if err != nil {
			return
		}
		if p.Rank >= p.Size || int(p.Size) != len(p.Hostlist) || (p.Rank > 0) != (p.ParentURI != "") {
			t.Fatalf("inconsistent plan %+v", p)
		}
	})
}
