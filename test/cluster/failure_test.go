package cluster_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/test/cluster"
)

// The failure tests' timing: keepalives every torpid_min, a child
// silent for torpid_max torpid, for tbon.timeout lost; a job shell out
// of reach for job-exec.reattach-timeout ends its job (node-failure).
const (
	failTorpidMin = 500 * time.Millisecond
	failTorpidMax = 1500 * time.Millisecond
	failTimeout   = 5 * time.Second
	failReattach  = 3 * time.Second
)

// failureCluster boots n hosts from a boot.conf listing them (with
// tbon.fanout fanout), each broker restarted when it exits (as systemd
// would), with the failure tests' timing.
func failureCluster(t *testing.T, n, fanout int) (*cluster.Cluster, string) {
	t.Helper()
	bin := testinstance.Binary(t)
	c := cluster.New(t, cluster.Options{Hosts: n, Subnet: netip.MustParsePrefix("192.168.1.0/24")})
	var eps []string
	for _, h := range c.Hosts {
		eps = append(eps, fmt.Sprintf("%q", "tcp://"+h.Addr.String()+":8020"))
	}
	conf := filepath.Join(c.Dir, "boot.conf")
	text := fmt.Sprintf("session-id = \"failures\"\ntbon-endpoints = [%s]\n", strings.Join(eps, ", "))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(c.Dir, "curve.cert")
	writeKey(t, key)
	bootCluster(t, c, bin, true, func(h *cluster.Host) []string {
		return []string{"-Sboot.method=config", "-Sboot.config_file=" + conf, "-Stbon.cert=" + key,
			"-Stbon.fanout=" + strconv.Itoa(fanout),
			// a statedir, as a system instance has: job shells keep
			// their jobs across a broker's restart
			"-Sstatedir=" + filepath.Join(h.Dir, "state"),
			"-Stbon.timeout=" + failTimeout.String(),
			"-Stbon.torpid_min=" + failTorpidMin.String(), "-Stbon.torpid_max=" + failTorpidMax.String(),
			"-Sjob-exec.reattach-timeout=" + failReattach.String()}
	})
	return c, bin
}

func rundirOf(h *cluster.Host) string { return filepath.Join(h.Dir, "run") }

// resourceSet is flux resource status's nodelist in state (e.g. "torpid").
func resourceSet(t *testing.T, bin, rundir, state string) string {
	out, _ := fluxCmd(t, bin, rundir, "resource", "status", "-s", state, "-n", "-o", "{nodelist}")
	return strings.TrimSpace(out)
}

// brokerPID is the pid of the broker serving rundir.
func brokerPID(t *testing.T, bin, rundir string) int {
	t.Helper()
	out, err := fluxCmd(t, bin, rundir, "getattr", "broker.pid")
	if err != nil {
		t.Fatalf("getattr broker.pid: %v: %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("broker.pid %q: %v", out, err)
	}
	return pid
}

// overlayLine is rank's line of rank 0's flux overlay status
// ("2 node2: lost"), "" if none.
func overlayState(t *testing.T, bin, rundir string, rank int) string {
	out, _ := fluxCmd(t, bin, rundir, "overlay", "status", "--no-pretty", "--timeout=1s")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, strconv.Itoa(rank)+" ") {
			if _, st, ok := strings.Cut(l, ": "); ok {
				return st
			}
		}
	}
	return ""
}

// TestTorpid: a leaf broker made silent (SIGSTOP: its process stops,
// its link stays up) is marked torpid by its parent after
// tbon.torpid_max: flux resource status lists it torpid and the
// scheduler gives it no new work (a 3-node job waits); heard again
// (SIGCONT) before tbon.timeout it is torpid no longer and the job
// runs. Stopped again for longer, it is torpid and then lost, and its
// broker, started again, rejoins.
func TestTorpid(t *testing.T) {
	t.Parallel() // its own hosts and bridge
	c, bin := failureCluster(t, 3, 2)
	r0 := rundirOf(c.Hosts[0])
	leaf := c.Hosts[2]
	if got := resourceSet(t, bin, r0, "torpid"); got != "" {
		t.Fatalf("torpid before anything happened: %q", got)
	}
	for attr, want := range map[string]string{"tbon.torpid_min": "0.5s", "tbon.torpid_max": "1.5s"} {
		if out, _ := fluxCmd(t, bin, r0, "getattr", attr); strings.TrimSpace(out) != want {
			t.Errorf("%s = %q, want %q", attr, strings.TrimSpace(out), want)
		}
	}
	pid := brokerPID(t, bin, rundirOf(leaf))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	torpid := poll(t, failTimeout, "rank 2 torpid", func() (bool, string) {
		got := resourceSet(t, bin, r0, "torpid")
		return got == leaf.Name, got
	})
	t.Logf("SIGSTOP: rank 2 torpid after %v (tbon.torpid_max %v)", torpid.Round(time.Millisecond), failTorpidMax)
	if st := overlayState(t, bin, r0, 2); st == "lost" {
		t.Fatalf("rank 2 lost while only torpid")
	}
	// the scheduler has it down: a job on all three nodes waits
	if out, _ := fluxCmd(t, bin, r0, "resource", "list", "-s", "down", "-n", "-o", "{nodelist}"); strings.TrimSpace(out) != leaf.Name {
		t.Errorf("flux resource list -s down: %q, want %s", strings.TrimSpace(out), leaf.Name)
	}
	out, err := fluxCmd(t, bin, r0, "submit", "-N3", "hostname")
	if err != nil {
		t.Fatalf("flux submit -N3: %v: %s", err, out)
	}
	id := strings.TrimSpace(out)
	poll(t, 10*time.Second, "the 3-node job waiting for resources", func() (bool, string) {
		out, _ := fluxCmd(t, bin, r0, "jobs", "-n", "-o", "{state}", id)
		switch st := strings.TrimSpace(out); st {
		case "SCHED":
			return true, st
		case "RUN", "CLEANUP", "INACTIVE":
			t.Fatalf("a 3-node job with a node torpid got its nodes: %s", st)
		}
		return false, out
	})
	out, _ = fluxCmd(t, bin, r0, "resource", "status")
	t.Logf("flux resource status with rank 2 torpid:\n%s", out)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	back := poll(t, failTimeout, "rank 2 no longer torpid", func() (bool, string) {
		got := resourceSet(t, bin, r0, "torpid")
		return got == "", got
	})
	t.Logf("SIGCONT: rank 2 no longer torpid after %v", back.Round(time.Millisecond))
	if out, err := fluxCmd(t, bin, r0, "job", "attach", id); err != nil {
		t.Errorf("the 3-node job after rank 2 came back: %v: %s", err, out)
	}
	if st := overlayState(t, bin, r0, 2); st != "full" {
		t.Errorf("rank 2 is %q after SIGCONT, want full", st)
	}

	// silent past tbon.timeout: torpid, then lost
	pid = brokerPID(t, bin, rundirOf(leaf))
	syscall.Kill(pid, syscall.SIGSTOP)
	stopped = true
	start := time.Now()
	poll(t, failTimeout, "rank 2 torpid again", func() (bool, string) {
		got := resourceSet(t, bin, r0, "torpid")
		return got == leaf.Name, got
	})
	torpid = time.Since(start)
	poll(t, 3*failTimeout, "rank 2 lost", func() (bool, string) {
		st := overlayState(t, bin, r0, 2)
		return st == "lost", st
	})
	lost := time.Since(start)
	t.Logf("SIGSTOP held: rank 2 torpid after %v, lost after %v (tbon.timeout %v)",
		torpid.Round(time.Millisecond), lost.Round(time.Millisecond), failTimeout)
	poll(t, 5*time.Second, "rank 2 offline and not torpid", func() (bool, string) {
		off, tor := resourceSet(t, bin, r0, "offline"), resourceSet(t, bin, r0, "torpid")
		return off == leaf.Name && tor == "", "offline " + off + ", torpid " + tor
	})
	syscall.Kill(pid, syscall.SIGCONT)
	stopped = false
	start = time.Now()
	poll(t, 30*time.Second, "rank 2 rejoined", func() (bool, string) {
		st := overlayState(t, bin, r0, 2)
		return st == "full", st
	})
	t.Logf("SIGCONT after it was lost: rank 2 rejoined after %v", time.Since(start).Round(time.Millisecond))
}
