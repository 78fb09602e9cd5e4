package boot

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// expand substitutes the %h (host) and %p (bootstrap.default_port)
// tokens of a bind or connect template. key names the template's
// configuration key for errors.
func expand(tmpl, host string, port int64, key string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(tmpl) {
			return "", fmt.Errorf("%w: %s: %q ends with a lone %%", ErrConfig, key, tmpl)
		}
		i++
		switch tmpl[i] {
		case 'h':
			b.WriteString(host)
		case 'p':
			if port == 0 {
				return "", fmt.Errorf("%w: %s: %q uses %%p but bootstrap.default_port is not set", ErrConfig, key, tmpl)
			}
			b.WriteString(strconv.FormatInt(port, 10))
		default:
			return "", fmt.Errorf("%w: %s: %q: unknown token %%%c (only %%h and %%p are substituted)", ErrConfig, key, tmpl, tmpl[i])
		}
	}
	return b.String(), nil
}

// endpoint is a parsed overlay URI: tcp://HOST:PORT or ipc://PATH.
type endpoint struct {
	scheme string
	host   string // tcp
	port   string // tcp
	path   string // ipc
}

// parseEndpoint checks a bind (bind=true) or connect URI. A tcp bind
// address is *, an IP address or an interface name; a tcp connect
// address is a DNS name or an IP address; both need a port 1-65535. An
// ipc URI needs an absolute socket path.
func parseEndpoint(uri string, bind bool, key string) (endpoint, error) {
	bad := func(why string) (endpoint, error) {
		return endpoint{}, fmt.Errorf("%w: %s: %q: %s", ErrConfig, key, uri, why)
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return bad("want tcp://HOST:PORT or ipc://PATH")
	}
	switch scheme {
	case "ipc":
		if !filepath.IsAbs(rest) {
			return bad("ipc socket path must be absolute")
		}
		if len(rest) > MaxSocketPath {
			return bad(fmt.Sprintf("ipc socket path is longer than a unix socket allows (%d bytes)", MaxSocketPath))
		}
		return endpoint{scheme: scheme, path: rest}, nil
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return bad(err.Error())
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %q must be a number 1-65535", port))
		}
		switch {
		case host == "":
			return bad("missing address")
		case bind && host == "*":
		case net.ParseIP(host) != nil:
		case bind && validIfaceName(host):
		case !bind && validDNSName(host):
		case bind:
			return bad(fmt.Sprintf("%q is not *, an IP address or an interface name", host))
		default:
			return bad(fmt.Sprintf("%q is not a host name or IP address", host))
		}
		return endpoint{scheme: scheme, host: host, port: port}, nil
	}
	return bad(fmt.Sprintf("unsupported scheme %q (want tcp or ipc)", scheme))
}

func validIfaceName(s string) bool {
	if len(s) == 0 || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' || c == ':' {
			return false
		}
	}
	return true
}

func validDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// resolveBind turns this host's bind endpoint into one the overlay can
// listen on: * becomes the wildcard address, an interface name its
// address.
func resolveBind(ep endpoint, h Host, ipv6 bool, key string) (string, error) {
	if ep.scheme == "ipc" {
		return "ipc://" + ep.path, nil
	}
	var ip net.IP
	switch {
	case ep.host == "*" && ipv6:
		ip = net.IPv6unspecified
	case ep.host == "*":
		ip = net.IPv4zero
	case net.ParseIP(ep.host) != nil:
		ip = net.ParseIP(ep.host)
	default:
		var err error
		if ip, err = h.ifaceAddr(ep.host, ipv6); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
		}
	}
	return "tcp://" + hostPort(ip, ep.port), nil
}
