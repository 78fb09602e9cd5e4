package cluster_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/test/cluster"
)

// seedBootConf is seed 004's boot.conf as the slide gives it (its
// "tcp: //192. 168. 1. 1: 8020" without the slide's spaces). The hosts
// are namespaces, so its addresses are theirs whatever the machine's
// own network is.
const seedBootConf = `session-id = "mycluster"
tbon-endpoints = [ "tcp://192.168.1.1:8020", "tcp://192.168.1.2:8020", "tcp://192.168.1.3:8020"]
`

// flux runs a flux command in the test's namespace against the broker
// whose rundir is given.
func fluxCmd(t *testing.T, bin, rundir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// jobs get the submitter's environment: the flux under test is the
	// one their flux commands find
	cmd.Env = append(cleanEnv(), "FLUX_URI=local://"+filepath.Join(rundir, "local"),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cleanEnv is the test's environment without what would make a broker
// join another instance or take another hostname.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "FLUX_URI" || k == "FLUX_FAKE_HOSTNAME" || strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "FLUX_PMI") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// bootCluster starts one broker per host with the given boot arguments
// and waits until rank 0 reports every broker online. The broker of
// host i uses the rundir Dir/run; brokers run as `sh -c` loops when
// restart is set, so a broker that exits (its parent lost) starts again
// as systemd would start it.
func bootCluster(t *testing.T, c *cluster.Cluster, bin string, restart bool, args func(h *cluster.Host) []string) {
	t.Helper()
	for _, h := range c.Hosts {
		rundir := filepath.Join(h.Dir, "run")
		argv := append([]string{bin, "broker", "-Srundir=" + rundir}, args(h)...)
		if h.Index == 0 {
			argv = append(argv, "--", "sleep", "1000000")
		}
		if restart {
			q := make([]string, len(argv))
			for i, a := range argv {
				q[i] = "'" + a + "'"
			}
			loop := fmt.Sprintf("while :; do rm -rf '%s'; %s; sleep 0.2; done", rundir, strings.Join(q, " "))
			argv = []string{"sh", "-c", loop}
		}
		h.Start("broker", cleanEnv(), argv...)
	}
	waitOnline(t, bin, filepath.Join(c.Hosts[0].Dir, "run"), len(c.Hosts), 60*time.Second)
}

// waitOnline polls rank 0 until its overlay is full (every broker
// joined).
func waitOnline(t *testing.T, bin, rundir string, size int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var out string
	for time.Now().Before(deadline) {
		var err error
		out, err = fluxCmd(t, bin, rundir, "overlay", "status", "--summary", "--no-pretty")
		if err == nil && strings.Contains(out, "full") {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the %d brokers did not all join within %v; overlay status:\n%s", size, timeout, out)
}

func writeKey(t *testing.T, path string) {
	t.Helper()
	key, err := broker.GenerateKey("fluxgo-cluster")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSeed004Boot boots three hosts from seed 004's boot.conf with
// seed 004's command line (flux broker -Sboot.method=config
// -Sboot.config_file=boot.conf; the instance key, which the slide's
// file does not name, from -Stbon.cert): each broker finds its rank by
// its own address, and flux run -N3 hostname runs on all three.
func TestSeed004Boot(t *testing.T) {
	bin := testinstance.Binary(t)
	c := cluster.New(t, cluster.Options{Hosts: 3, Subnet: netip.MustParsePrefix("192.168.1.0/24")})
	conf := filepath.Join(c.Dir, "boot.conf")
	if err := os.WriteFile(conf, []byte(seedBootConf), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(c.Dir, "curve.cert")
	writeKey(t, key)
	start := time.Now()
	bootCluster(t, c, bin, false, func(h *cluster.Host) []string {
		return []string{"-Sboot.method=config", "-Sboot.config_file=" + conf, "-Stbon.cert=" + key}
	})
	t.Logf("3 brokers joined in %v", time.Since(start).Round(time.Millisecond))
	rundir := filepath.Join(c.Hosts[0].Dir, "run")
	out, err := fluxCmd(t, bin, rundir, "run", "-N3", "hostname")
	if err != nil {
		t.Fatalf("flux run -N3 hostname: %v\n%s", err, out)
	}
	t.Logf("flux run -N3 hostname:\n%s", out)
	got := strings.Fields(out)
	slices.Sort(got)
	want := []string{c.Hosts[0].Name, c.Hosts[1].Name, c.Hosts[2].Name}
	if !slices.Equal(got, want) {
		t.Errorf("flux run -N3 hostname printed %q, want %q", got, want)
	}
	// the file names addresses; the brokers give their hostnames as
	// they join
	for attr, want := range map[string]string{"size": "3", "broker.boot-method": "config", "hostlist": "node[0-2]"} {
		out, _ := fluxCmd(t, bin, rundir, "getattr", attr)
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("%s = %q, want %q", attr, got, want)
		}
	}
	out, _ = fluxCmd(t, bin, rundir, "resource", "list")
	t.Logf("flux resource list:\n%s", out)
	if !strings.Contains(out, "node[0-2]") {
		t.Errorf("flux resource list does not show node[0-2]")
	}
}

// poll runs check every 100ms until it returns true or timeout passes;
// it returns how long that took.
func poll(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		var ok bool
		if ok, last = check(); ok {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v; last:\n%s", what, timeout, last)
	return 0
}

// TestLinkDown: a host whose link goes down is found lost by rank 0
// within tbon.timeout, and its node goes offline; when the link comes
// back its broker (restarted, as a service manager would) rejoins and
// the node is online again. The time each took is logged.
func TestLinkDown(t *testing.T) {
	bin := testinstance.Binary(t)
	c := cluster.New(t, cluster.Options{Hosts: 3, Subnet: netip.MustParsePrefix("192.168.1.0/24")})
	conf := filepath.Join(c.Dir, "boot.conf")
	if err := os.WriteFile(conf, []byte(seedBootConf), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(c.Dir, "curve.cert")
	writeKey(t, key)
	const timeout = 2 * time.Second
	bootCluster(t, c, bin, true, func(h *cluster.Host) []string {
		return []string{"-Sboot.method=config", "-Sboot.config_file=" + conf, "-Stbon.cert=" + key,
			"-Stbon.timeout=" + timeout.String()}
	})
	rundir := filepath.Join(c.Hosts[0].Dir, "run")
	offline := func() (bool, string) {
		out, _ := fluxCmd(t, bin, rundir, "resource", "status", "-s", "offline", "-n", "-o", "{nodelist}")
		return strings.TrimSpace(out) == c.Hosts[2].Name, out
	}
	if ok, out := offline(); ok {
		t.Fatalf("host 2 offline before its link went down:\n%s", out)
	}
	if err := c.Hosts[2].LinkDown(); err != nil {
		t.Fatal(err)
	}
	lost := poll(t, 3*timeout+5*time.Second, "rank 2 lost", func() (bool, string) {
		out, _ := fluxCmd(t, bin, rundir, "overlay", "status", "--no-pretty")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "2 ") && strings.HasSuffix(l, ": lost") {
				return true, out
			}
		}
		return false, out
	})
	t.Logf("link down: rank 2 lost after %v (tbon.timeout %v)", lost.Round(time.Millisecond), timeout)
	poll(t, 5*time.Second, "host 2's node offline", offline)
	out, _ := fluxCmd(t, bin, rundir, "overlay", "status")
	t.Logf("overlay status with host 2's link down:\n%s", out)

	if err := c.Hosts[2].LinkUp(); err != nil {
		t.Fatal(err)
	}
	back := poll(t, 30*time.Second, "rank 2 back", func() (bool, string) {
		out, err := fluxCmd(t, bin, rundir, "overlay", "status", "--summary", "--no-pretty")
		return err == nil && strings.Contains(out, "full"), out
	})
	t.Logf("link up: rank 2 rejoined after %v", back.Round(time.Millisecond))
	poll(t, 5*time.Second, "host 2's node online", func() (bool, string) {
		ok, out := offline()
		return !ok && strings.TrimSpace(out) == "", out
	})
	out, err := fluxCmd(t, bin, rundir, "run", "-N3", "hostname")
	if err != nil {
		t.Fatalf("flux run -N3 hostname after the link came back: %v\n%s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if want := []string{c.Hosts[0].Name, c.Hosts[1].Name, c.Hosts[2].Name}; !slices.Equal(got, want) {
		t.Errorf("flux run -N3 hostname printed %q, want %q", got, want)
	}
}

// TestBootstrapTableBoot boots the same three hosts from flux-core's
// [bootstrap] table (flux broker -c DIR): each broker finds itself by
// its hostname in bootstrap.hosts and binds on its eth0.
func TestBootstrapTableBoot(t *testing.T) {
	bin := testinstance.Binary(t)
	c := cluster.New(t, cluster.Options{Hosts: 3, Subnet: netip.MustParsePrefix("192.168.1.0/24")})
	confDir := filepath.Join(c.Dir, "conf.d")
	if err := os.Mkdir(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeKey(t, filepath.Join(confDir, "curve.cert"))
	text := `[bootstrap]
curve_cert = "curve.cert"
default_port = 8050
default_bind = "tcp://eth0:%p"
hosts = [
    { host = "node0", connect = "tcp://192.168.1.1:%p" },
    { host = "node1", connect = "tcp://192.168.1.2:%p" },
    { host = "node2", connect = "tcp://192.168.1.3:%p" },
]
`
	if err := os.WriteFile(filepath.Join(confDir, "bootstrap.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	bootCluster(t, c, bin, false, func(h *cluster.Host) []string { return []string{"-c", confDir} })
	rundir := filepath.Join(c.Hosts[0].Dir, "run")
	out, err := fluxCmd(t, bin, rundir, "run", "-N3", "hostname")
	if err != nil {
		t.Fatalf("flux run -N3 hostname: %v\n%s", err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if want := []string{"node0", "node1", "node2"}; !slices.Equal(got, want) {
		t.Errorf("flux run -N3 hostname printed %q, want %q", got, want)
	}
	if out, _ := fluxCmd(t, bin, rundir, "getattr", "hostlist"); strings.TrimSpace(out) != "node[0-2]" {
		t.Errorf("hostlist = %q", out)
	}
}
