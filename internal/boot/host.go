package boot

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
)

// Host is what boot needs to know about the machine a broker runs on.
// LocalHost reads the real one; tests build their own.
type Host struct {
	// Name is the hostname that selects the broker's entry in
	// bootstrap.hosts and that other brokers see in the hostlist.
	Name string
	// Ifaces are the network interfaces and their addresses.
	Ifaces []Iface
	// DefaultIface names the interface of the default route ("" if
	// unknown).
	DefaultIface string
	// Lookup resolves a hostname (for tbon.interface-hint=hostname); nil
	// means net.LookupIP.
	Lookup func(name string) ([]net.IP, error)
}

// Iface is one network interface.
type Iface struct {
	Name     string
	Addrs    []net.IP
	Loopback bool
}

// FakeHostnameEnv overrides the hostname boot uses (tests run several
// "hosts" on one machine this way).
const FakeHostnameEnv = "FLUX_FAKE_HOSTNAME"

// LocalHost describes this machine: its hostname (or $FLUX_FAKE_HOSTNAME
// read through getenv), interfaces and default route.
func LocalHost(getenv func(string) string) (Host, error) {
	h := Host{Name: getenv(FakeHostnameEnv)}
	if h.Name == "" {
		name, err := os.Hostname()
		if err != nil {
			return h, fmt.Errorf("hostname: %w", err)
		}
		h.Name = name
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return h, fmt.Errorf("network interfaces: %w", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		x := Iface{Name: ifc.Name, Loopback: ifc.Flags&net.FlagLoopback != 0}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				x.Addrs = append(x.Addrs, ipn.IP)
			}
		}
		h.Ifaces = append(h.Ifaces, x)
	}
	h.DefaultIface = defaultRouteIface("/proc/net/route")
	return h, nil
}

// defaultRouteIface reads the Linux routing table for the interface of
// the IPv4 default route (destination 00000000).
func defaultRouteIface(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 2 && fs[1] == "00000000" {
			return fs[0]
		}
	}
	return ""
}

func (h Host) iface(name string) (Iface, bool) {
	for _, x := range h.Ifaces {
		if x.Name == name {
			return x, true
		}
	}
	return Iface{}, false
}

// hasAddr reports whether ip is assigned to one of the interfaces.
func (h Host) hasAddr(ip net.IP) bool {
	for _, x := range h.Ifaces {
		for _, a := range x.Addrs {
			if a.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// pick returns the first address of the wanted family (IPv4 unless ipv6
// is allowed, in which case IPv4 is still preferred).
func pick(addrs []net.IP, ipv6 bool) net.IP {
	for _, a := range addrs {
		if a.To4() != nil {
			return a
		}
	}
	if ipv6 {
		for _, a := range addrs {
			if !a.IsLinkLocalUnicast() {
				return a
			}
		}
	}
	return nil
}

// ifaceAddr is the address to bind on a named interface.
func (h Host) ifaceAddr(name string, ipv6 bool) (net.IP, error) {
	x, ok := h.iface(name)
	if !ok {
		return nil, fmt.Errorf("no network interface %q on this host", name)
	}
	ip := pick(x.Addrs, ipv6)
	if ip == nil {
		return nil, fmt.Errorf("network interface %q has no usable address", name)
	}
	return ip, nil
}

// hintAddr chooses the address a broker binds when none is configured,
// following tbon.interface-hint: "default-route" (the default), the
// address of the default route's interface; "hostname", an address the
// hostname resolves to; an interface name; or a CIDR network, the first
// local address inside it.
func (h Host) hintAddr(hint string, ipv6 bool) (net.IP, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("tbon.interface-hint=%s: %s", hint, fmt.Sprintf(format, a...))
	}
	switch {
	case hint == "" || hint == "default-route":
		if h.DefaultIface == "" {
			return nil, bad("this host has no default route (set tbon.interface-hint to an interface, a network, or hostname)")
		}
		ip, err := h.ifaceAddr(h.DefaultIface, ipv6)
		if err != nil {
			return nil, bad("%v", err)
		}
		return ip, nil
	case hint == "hostname":
		lookup := h.Lookup
		if lookup == nil {
			lookup = net.LookupIP
		}
		ips, err := lookup(h.Name)
		if err != nil {
			return nil, bad("%v", err)
		}
		if ip := pick(ips, ipv6); ip != nil {
			return ip, nil
		}
		return nil, bad("%s has no usable address", h.Name)
	case strings.Contains(hint, "/"):
		_, network, err := net.ParseCIDR(hint)
		if err != nil {
			return nil, bad("not a network address: %v", err)
		}
		for _, x := range h.Ifaces {
			for _, a := range x.Addrs {
				if network.Contains(a) {
					return a, nil
				}
			}
		}
		return nil, bad("no local address is in %s", network)
	}
	ip, err := h.ifaceAddr(hint, ipv6)
	if err != nil {
		return nil, bad("%v", err)
	}
	return ip, nil
}

// hostPort renders ip:port, bracketing IPv6.
func hostPort(ip net.IP, port string) string {
	return net.JoinHostPort(ip.String(), port)
}
