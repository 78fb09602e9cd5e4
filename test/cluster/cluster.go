// Package cluster is a test bed of hosts made of Linux namespaces, for
// tests and benchmarks that need brokers on separate machines: each host
// is a network namespace with one veth linked to a shared bridge and its
// own address on a subnet the test chooses, its own hostname (a UTS
// namespace) and its own run directory. Commands run inside a host see
// only its network and its name; they share the file system, so the
// test reaches a broker through its local:// socket.
//
// Creating namespaces needs root, ip (iproute2), unshare and nsenter
// (util-linux); New skips the test when any is missing. Everything New
// creates (namespaces, veths, the bridge, the processes started in the
// hosts) is removed by the test's cleanup, whether it passed or not.
package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Options describe the cluster to create.
type Options struct {
	// Hosts is the number of hosts (1-200).
	Hosts int
	// Subnet is the hosts' network; host i gets the subnet's address
	// i+1 (192.168.1.0/24: 192.168.1.1, .2, ...). The namespaces are
	// private, so the subnet may be one the machine itself uses.
	Subnet netip.Prefix
	// Hostname names host i; nil means "node0", "node1", ...
	Hostname func(i int) string
}

// Cluster is a set of hosts on one bridge.
type Cluster struct {
	Hosts  []*Host
	Bridge string // the bridge's interface name in the test's namespace
	Dir    string // holds every host's directory
}

// Host is one namespace-made machine.
type Host struct {
	Index int
	Name  string     // its hostname
	Addr  netip.Addr // its address on the cluster subnet
	Dir   string     // its own directory (run directories, state)
	NetNS string     // the network namespace's name (ip netns)
	Veth  string     // the bridge side of its link, in the test's namespace

	t      testing.TB
	holder *exec.Cmd // keeps the UTS namespace alive
}

// tools New needs on the PATH.
var tools = []string{"ip", "unshare", "nsenter", "hostname"}

var seq atomic.Int32

// New creates the cluster, or skips the test when it cannot (not root,
// tools missing, namespaces not permitted). Every resource is released
// by t's cleanup.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cluster: needs root (network and UTS namespaces)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("cluster: %s not found (iproute2, util-linux)", tool)
		}
	}
	if o.Hosts < 1 || o.Hosts > 200 {
		t.Fatalf("cluster: %d hosts: want 1-200", o.Hosts)
	}
	if !o.Subnet.IsValid() || !o.Subnet.Addr().Is4() {
		t.Fatalf("cluster: subnet %v: want an IPv4 prefix", o.Subnet)
	}
	if o.Subnet.Bits() > 24 {
		t.Fatalf("cluster: subnet %v: want /24 or wider", o.Subnet)
	}
	if o.Hostname == nil {
		o.Hostname = func(i int) string { return fmt.Sprintf("node%d", i) }
	}
	// names unique to this process and call (interface names are at
	// most 15 bytes)
	tag := fmt.Sprintf("%04x%x", os.Getpid()&0xffff, seq.Add(1)&0xf)
	c := &Cluster{Bridge: "fgb" + tag, Dir: t.TempDir()}

	// probe: a namespace this process may create (a container may
	// refuse even root)
	probe := "fluxgo-" + tag + "-probe"
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("cluster: cannot create a network namespace: %v: %s", err, bytes.TrimSpace(out))
	}
	exec.Command("ip", "netns", "del", probe).Run()

	ipcmd(t, "link", "add", c.Bridge, "type", "bridge")
	t.Cleanup(func() { exec.Command("ip", "link", "del", c.Bridge).Run() })
	// a host firewall's FORWARD rules (Docker's drop them) must not see
	// the cluster's bridged traffic: best effort, older kernels lack it
	exec.Command("ip", "link", "set", c.Bridge, "type", "bridge",
		"nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0").Run()
	ipcmd(t, "link", "set", c.Bridge, "up")

	base := o.Subnet.Masked().Addr()
	for i := 0; i < o.Hosts; i++ {
		addr := base
		for j := 0; j <= i; j++ {
			addr = addr.Next()
		}
		h := &Host{Index: i, Name: o.Hostname(i), Addr: addr, t: t,
			Dir:   filepath.Join(c.Dir, o.Hostname(i)),
			NetNS: fmt.Sprintf("fluxgo-%s-%d", tag, i),
			Veth:  fmt.Sprintf("fgv%s.%d", tag, i)}
		if err := os.MkdirAll(h.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		peer := fmt.Sprintf("fgp%s.%d", tag, i)
		ipcmd(t, "netns", "add", h.NetNS)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", h.NetNS).Run() })
		ipcmd(t, "link", "add", h.Veth, "type", "veth", "peer", "name", peer)
		// deleting one end deletes both; the namespace's removal does
		// it too, this is for a failure in between
		t.Cleanup(func() { exec.Command("ip", "link", "del", h.Veth).Run() })
		ipcmd(t, "link", "set", h.Veth, "master", c.Bridge, "up")
		ipcmd(t, "link", "set", peer, "netns", h.NetNS)
		ipcmd(t, "-n", h.NetNS, "link", "set", peer, "name", "eth0")
		ipcmd(t, "-n", h.NetNS, "addr", "add", fmt.Sprintf("%s/%d", addr, o.Subnet.Bits()), "dev", "eth0")
		ipcmd(t, "-n", h.NetNS, "link", "set", "eth0", "up")
		ipcmd(t, "-n", h.NetNS, "link", "set", "lo", "up")
		// a default route out of eth0, as a machine has: brokers of
		// nested instances pick the interface it leaves by
		// (tbon.interface-hint's default)
		ipcmd(t, "-n", h.NetNS, "route", "add", "default", "dev", "eth0")
		h.startHolder()
		c.Hosts = append(c.Hosts, h)
	}
	return c
}

func ipcmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// startHolder starts the process that owns the host's UTS namespace
// (its hostname); commands join it by nsenter.
func (h *Host) startHolder() {
	t := h.t
	t.Helper()
	cmd := exec.Command("unshare", "--uts", "--", "sh", "-c", `hostname "$1" && echo ready && exec sleep 1000000`, "sh", h.Name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("cluster: %s: %v", h.Name, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("cluster: %s: could not set the hostname: %s", h.Name, bytes.TrimSpace(stderr.Bytes()))
	}
	h.holder = cmd
}

// Command returns a command that runs inside the host: in its network
// namespace with its hostname. The environment is the test's; set
// cmd.Env to change it.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	argv := append([]string{
		"--net=/run/netns/" + h.NetNS,
		fmt.Sprintf("--uts=/proc/%d/ns/uts", h.holder.Process.Pid),
		"--", name}, args...)
	cmd := exec.Command("nsenter", argv...)
	cmd.Dir = h.Dir
	return cmd
}

// LinkDown takes the host's link to the bridge down, as a pulled cable
// would: packets to and from the host are dropped, its processes keep
// running.
func (h *Host) LinkDown() error { return h.link("down") }

// LinkUp brings the host's link back.
func (h *Host) LinkUp() error { return h.link("up") }

func (h *Host) link(state string) error {
	if out, err := exec.Command("ip", "link", "set", h.Veth, state).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s %s: %v: %s", h.Veth, state, err, bytes.TrimSpace(out))
	}
	return nil
}

// Proc is a process started in a host; the test's cleanup kills its
// whole process group.
type Proc struct {
	Name string
	Cmd  *exec.Cmd

	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

// Start starts a command in the host with the environment env (nil:
// the test's), and arranges for its process group to be killed when the
// test ends (its output is logged if the test failed).
func (h *Host) Start(name string, env []string, args ...string) *Proc {
	t := h.t
	t.Helper()
	p := &Proc{Name: h.Name + ": " + name, done: make(chan struct{})}
	p.Cmd = h.Command(args[0], args[1:]...)
	p.Cmd.Env = env
	p.Cmd.Stdout = writerFunc(func(b []byte) { p.mu.Lock(); p.stdout.Write(b); p.mu.Unlock() })
	p.Cmd.Stderr = writerFunc(func(b []byte) { p.mu.Lock(); p.stderr.Write(b); p.mu.Unlock() })
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	go func() {
		p.Cmd.Wait()
		p.code = p.Cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", p.Name, p.Stdout(), p.Name, p.Stderr())
		}
	})
	return p
}

// Stdout and Stderr are what the process has written so far.
func (p *Proc) Stdout() string { p.mu.Lock(); defer p.mu.Unlock(); return p.stdout.String() }
func (p *Proc) Stderr() string { p.mu.Lock(); defer p.mu.Unlock(); return p.stderr.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits up to timeout for the process to exit and returns its exit
// code; ok is false if it is still running.
func (p *Proc) Wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.code, true
	case <-time.After(timeout):
		return -1, false
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }
