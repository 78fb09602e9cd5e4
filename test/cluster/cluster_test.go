package cluster_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/test/cluster"
)

// TestMain lets the test binary serve as a tiny TCP peer inside a host
// (CLUSTER_HELPER=listen ADDR or dial ADDR), so the self-test needs no
// tools beyond those New needs.
func TestMain(m *testing.M) {
	switch os.Getenv("CLUSTER_HELPER") {
	case "listen":
		ln, err := net.Listen("tcp", os.Args[len(os.Args)-1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("listening")
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		name, _ := os.Hostname()
		fmt.Fprint(c, name)
		c.Close()
		os.Exit(0)
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[len(os.Args)-1], time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(c)
		fmt.Print(string(b))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCluster: each host has its own name and address, reaches the
// others over the bridge, is cut off by LinkDown and back after LinkUp,
// and nothing of the cluster is left after its test ends.
func TestCluster(t *testing.T) {
	var netns []string
	var bridge string
	t.Run("hosts", func(t *testing.T) {
		c := cluster.New(t, cluster.Options{Hosts: 2, Subnet: netip.MustParsePrefix("10.251.7.0/24")})
		bridge = c.Bridge
		for _, h := range c.Hosts {
			netns = append(netns, h.NetNS)
			out, err := h.Command("hostname").Output()
			if err != nil || strings.TrimSpace(string(out)) != h.Name {
				t.Errorf("host %d: hostname %q, %v; want %q", h.Index, out, err, h.Name)
			}
			out, err = h.Command("ip", "-o", "-4", "addr", "show", "dev", "eth0").Output()
			if err != nil || !strings.Contains(string(out), " "+h.Addr.String()+"/24 ") {
				t.Errorf("host %d: eth0 %q, %v; want %s", h.Index, out, err, h.Addr)
			}
		}
		if t.Failed() {
			return
		}
		if got, want := c.Hosts[1].Addr.String(), "10.251.7.2"; got != want {
			t.Errorf("host 1 address %s, want %s", got, want)
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		server := netip.AddrPortFrom(c.Hosts[0].Addr, 7000).String()
		dial := func() (string, error) {
			cmd := c.Hosts[1].Command(exe, "dial", server)
			cmd.Env = append(os.Environ(), "CLUSTER_HELPER=dial")
			out, err := cmd.Output()
			return string(out), err
		}
		listen := func() *cluster.Proc {
			p := c.Hosts[0].Start("listen", append(os.Environ(), "CLUSTER_HELPER=listen"), exe, "listen", server)
			for i := 0; !strings.Contains(p.Stdout(), "listening"); i++ {
				if i == 100 {
					t.Fatalf("listener did not start: %s", p.Stderr())
				}
				time.Sleep(20 * time.Millisecond)
			}
			return p
		}
		listen()
		if got, err := dial(); err != nil || got != c.Hosts[0].Name {
			t.Errorf("host 1 dialing host 0: %q, %v", got, err)
		}
		if err := c.Hosts[0].LinkDown(); err != nil {
			t.Fatal(err)
		}
		listen()
		if got, err := dial(); err == nil {
			t.Errorf("host 1 reached host 0 with its link down: %q", got)
		}
		if err := c.Hosts[0].LinkUp(); err != nil {
			t.Fatal(err)
		}
		if got, err := dial(); err != nil || got != c.Hosts[0].Name {
			t.Errorf("host 1 dialing host 0 after link up: %q, %v", got, err)
		}
	})
	if len(netns) == 0 {
		return // skipped
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range netns {
		if strings.Contains(string(out), ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	if exec.Command("ip", "link", "show", bridge).Run() == nil {
		t.Errorf("bridge %s left behind", bridge)
	}
}
