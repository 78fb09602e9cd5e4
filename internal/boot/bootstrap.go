package boot

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

// Bootstrap is a validated [bootstrap] table, in either of its forms:
// the hosts array of flux-config-bootstrap(5), or the older
// tbon-endpoints array.
type Bootstrap struct {
	CurveCert  string // absolute (resolved against the config directory)
	EnableIPv6 bool
	// Hosts has one entry per rank, hostlists expanded, defaults and
	// %h/%p substituted.
	Hosts []HostEntry

	// Legacy form: tbon-endpoints (each rank binds and is reached at
	// its endpoint), with the optional session-id and rank keys.
	Legacy    bool
	SessionID string
	Rank      int // -1 unless bootstrap.rank is set
}

// HostEntry is one rank's line of the expanded hosts array.
type HostEntry struct {
	Host    string
	Bind    string // "" when neither bind nor default_bind applies
	Connect string // "" when neither connect nor default_connect applies
	Parent  string // the parent key, "" if not given
	// key names the hosts[] entry this came from, for errors.
	key string
}

// TBON is the validated [tbon] table.
type TBON struct {
	Fanout         uint32 // 0 = not configured
	Flat           bool   // topo = "custom" without parent keys: rank 0 is every broker's parent
	ConnectTimeout time.Duration
}

// MaxBrokers bounds the size of a configured instance.
const MaxBrokers = 1 << 20

const bootstrapKeys = "curve_cert, default_bind, default_connect, default_port, enable_ipv6, hosts; older form: rank, session-id, tbon-endpoints"

// ParseBootstrap validates a [bootstrap] table.
func ParseBootstrap(c *Config, t map[string]any) (*Bootstrap, error) {
	f := newFields("bootstrap", t)
	bs := &Bootstrap{Rank: -1}
	var err error
	if bs.EnableIPv6, err = f.boolean("enable_ipv6"); err != nil {
		return nil, err
	}
	cert, ok, err := f.str("curve_cert")
	if err != nil {
		return nil, err
	}
	if ok {
		if cert == "" {
			return nil, fmt.Errorf("%w: bootstrap.curve_cert: empty path", ErrConfig)
		}
		bs.CurveCert = c.Resolve(cert)
	}
	port, havePort, err := f.integer("default_port")
	if err != nil {
		return nil, err
	}
	if havePort && (port < 1 || port > 65535) {
		return nil, fmt.Errorf("%w: bootstrap.default_port: %d is not a port number 1-65535", ErrConfig, port)
	}
	defBind, _, err := f.str("default_bind")
	if err != nil {
		return nil, err
	}
	defConnect, _, err := f.str("default_connect")
	if err != nil {
		return nil, err
	}
	hosts, haveHosts, err := f.tables("hosts")
	if err != nil {
		return nil, err
	}
	endpoints, haveEndpoints, err := f.stringList("tbon-endpoints")
	if err != nil {
		return nil, err
	}
	sid, haveSID, err := f.str("session-id")
	if err != nil {
		return nil, err
	}
	rank, haveRank, err := f.integer("rank")
	if err != nil {
		return nil, err
	}
	if err := f.unknown(bootstrapKeys); err != nil {
		return nil, err
	}
	if haveHosts && haveEndpoints {
		return nil, fmt.Errorf("%w: bootstrap.tbon-endpoints: set either bootstrap.hosts or the older bootstrap.tbon-endpoints, not both", ErrConfig)
	}
	if (haveSID || haveRank) && !haveEndpoints {
		k := "session-id"
		if haveRank {
			k = "rank"
		}
		return nil, fmt.Errorf("%w: bootstrap.%s: only used with bootstrap.tbon-endpoints", ErrConfig, k)
	}
	if haveEndpoints {
		if defBind != "" || defConnect != "" || havePort {
			return nil, fmt.Errorf("%w: bootstrap.tbon-endpoints: default_port, default_bind and default_connect apply to bootstrap.hosts only", ErrConfig)
		}
		return bs.parseLegacy(endpoints, sid, haveSID, rank, haveRank)
	}
	if bs.Hosts, err = parseHosts(hosts, defBind, defConnect, port); err != nil {
		return nil, err
	}
	return bs, nil
}

// hostSpec is one bootstrap.hosts[] table before expansion.
type hostSpec struct {
	key                 string
	hosts               *hostlist.Hostlist
	bind, bindKey       string
	connect, connectKey string
	parent              string
}

// parseHosts checks the hosts array and expands it to one entry per
// rank, applying the defaults and the %h/%p substitutions.
func parseHosts(tables []map[string]any, defBind, defConnect string, port int64) ([]HostEntry, error) {
	specs := make([]hostSpec, 0, len(tables))
	total := 0
	for i, ht := range tables {
		sp := hostSpec{key: fmt.Sprintf("bootstrap.hosts[%d]", i)}
		hf := newFields(sp.key, ht)
		spec, ok, err := hf.str("host")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s.host: required", ErrConfig, sp.key)
		}
		bind, haveBind, err := hf.str("bind")
		if err != nil {
			return nil, err
		}
		connect, haveConnect, err := hf.str("connect")
		if err != nil {
			return nil, err
		}
		parent, haveParent, err := hf.str("parent")
		if err != nil {
			return nil, err
		}
		if err := hf.unknown("host, bind, connect, parent"); err != nil {
			return nil, err
		}
		if haveParent && parent == "" {
			return nil, fmt.Errorf("%w: %s.parent: empty host name", ErrConfig, sp.key)
		}
		if sp.hosts, err = hostlist.Parse(spec); err != nil {
			return nil, fmt.Errorf("%w: %s.host: %v", ErrConfig, sp.key, err)
		}
		if sp.hosts.Len() == 0 {
			return nil, fmt.Errorf("%w: %s.host: %q names no hosts", ErrConfig, sp.key, spec)
		}
		if total += sp.hosts.Len(); total > MaxBrokers {
			return nil, fmt.Errorf("%w: %s.host: more than %d hosts in bootstrap.hosts", ErrConfig, sp.key, MaxBrokers)
		}
		sp.bind, sp.bindKey = bind, sp.key+".bind"
		if !haveBind {
			sp.bind, sp.bindKey = defBind, "bootstrap.default_bind"
		}
		sp.connect, sp.connectKey = connect, sp.key+".connect"
		if !haveConnect {
			sp.connect, sp.connectKey = defConnect, "bootstrap.default_connect"
		}
		sp.parent = parent
		specs = append(specs, sp)
	}
	out := make([]HostEntry, 0, total)
	seen := make(map[string]string, total) // host -> key of its entry
	var err error
	for _, sp := range specs {
		for h := range sp.hosts.All() {
			if prev, dup := seen[h]; dup {
				return nil, fmt.Errorf("%w: %s.host: duplicate host %q (already in %s)", ErrConfig, sp.key, h, prev)
			}
			seen[h] = sp.key
			e := HostEntry{Host: h, Parent: sp.parent, key: sp.key}
			if sp.bind != "" {
				if e.Bind, err = expand(sp.bind, h, port, sp.bindKey); err != nil {
					return nil, err
				}
				if _, err := parseEndpoint(e.Bind, true, sp.bindKey); err != nil {
					return nil, err
				}
			}
			if sp.connect != "" {
				if e.Connect, err = expand(sp.connect, h, port, sp.connectKey); err != nil {
					return nil, err
				}
				if _, err := parseEndpoint(e.Connect, false, sp.connectKey); err != nil {
					return nil, err
				}
			}
			out = append(out, e)
		}
	}
	for _, e := range out {
		if e.Parent != "" {
			if _, ok := seen[e.Parent]; !ok {
				return nil, fmt.Errorf("%w: %s.parent: %q is not in bootstrap.hosts", ErrConfig, e.key, e.Parent)
			}
		}
	}
	return out, nil
}

func (bs *Bootstrap) parseLegacy(endpoints []string, sid string, haveSID bool, rank int64, haveRank bool) (*Bootstrap, error) {
	bs.Legacy = true
	if haveSID && sid == "" {
		return nil, fmt.Errorf("%w: bootstrap.session-id: empty", ErrConfig)
	}
	bs.SessionID = sid
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: bootstrap.tbon-endpoints: empty array", ErrConfig)
	}
	if len(endpoints) > MaxBrokers {
		return nil, fmt.Errorf("%w: bootstrap.tbon-endpoints: more than %d entries", ErrConfig, MaxBrokers)
	}
	if haveRank {
		if rank < 0 || rank >= int64(len(endpoints)) {
			return nil, fmt.Errorf("%w: bootstrap.rank: %d is not a rank of the %d tbon-endpoints", ErrConfig, rank, len(endpoints))
		}
		bs.Rank = int(rank)
	}
	seen := make(map[string]int)
	for i, uri := range endpoints {
		key := fmt.Sprintf("bootstrap.tbon-endpoints[%d]", i)
		ep, err := parseEndpoint(uri, false, key)
		if err != nil {
			return nil, err
		}
		if ep.scheme == "tcp" && net.ParseIP(ep.host) == nil {
			return nil, fmt.Errorf("%w: %s: %q: the address must be numeric (this form binds it too)", ErrConfig, key, uri)
		}
		if j, dup := seen[uri]; dup {
			return nil, fmt.Errorf("%w: %s: duplicate endpoint %q (already bootstrap.tbon-endpoints[%d])", ErrConfig, key, uri, j)
		}
		seen[uri] = i
		host := ep.path
		if ep.scheme == "tcp" {
			host = ep.host
		}
		bs.Hosts = append(bs.Hosts, HostEntry{Host: host, Bind: uri, Connect: uri, key: key})
	}
	return bs, nil
}

// ParseTBON validates a [tbon] table (nil when absent).
func ParseTBON(t map[string]any) (*TBON, error) {
	tb := &TBON{}
	if t == nil {
		return tb, nil
	}
	f := newFields("tbon", t)
	n, haveFanout, err := f.integer("fanout")
	if err != nil {
		return nil, err
	}
	if haveFanout {
		if n < 1 || n > 1<<16 {
			return nil, fmt.Errorf("%w: tbon.fanout: %d must be 1-65536", ErrConfig, n)
		}
		tb.Fanout = uint32(n)
	}
	topo, haveTopo, err := f.str("topo")
	if err != nil {
		return nil, err
	}
	if haveTopo {
		switch {
		case topo == "custom":
			tb.Flat = true
		case strings.HasPrefix(topo, "kary:"):
			k, err := strconv.ParseUint(strings.TrimPrefix(topo, "kary:"), 10, 32)
			if err != nil || k < 1 || k > 1<<16 {
				return nil, fmt.Errorf("%w: tbon.topo: %q: want kary:K with K 1-65536", ErrConfig, topo)
			}
			if haveFanout && uint32(k) != tb.Fanout {
				return nil, fmt.Errorf("%w: tbon.topo: %q contradicts tbon.fanout = %d", ErrConfig, topo, tb.Fanout)
			}
			tb.Fanout = uint32(k)
		default:
			return nil, fmt.Errorf("%w: tbon.topo: %q: supported topologies are kary:K and custom", ErrConfig, topo)
		}
		if tb.Flat && haveFanout {
			return nil, fmt.Errorf("%w: tbon.topo: \"custom\" contradicts tbon.fanout = %d", ErrConfig, tb.Fanout)
		}
	}
	ct, haveCT, err := f.str("connect_timeout")
	if err != nil {
		return nil, err
	}
	if haveCT {
		if tb.ConnectTimeout, err = fsd.ParseDuration(ct); err != nil {
			return nil, fmt.Errorf("%w: tbon.connect_timeout: %v", ErrConfig, err)
		}
	}
	// flux-core's other keys, checked and accepted: fluxgo's overlay has
	// no ZeroMQ queues to tune, and its liveness timing is its own
	for _, k := range []string{"tcp_user_timeout", "torpid_min", "torpid_max"} {
		if v, ok, err := f.str(k); err != nil {
			return nil, err
		} else if ok {
			if _, err := fsd.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("%w: tbon.%s: %v", ErrConfig, k, err)
			}
		}
	}
	for _, k := range []string{"zmqdebug", "child_rcvhwm"} {
		if _, _, err := f.integer(k); err != nil {
			return nil, err
		}
	}
	if _, _, err := f.str("interface-hint"); err != nil {
		return nil, err
	}
	if err := f.unknown("child_rcvhwm, connect_timeout, fanout, interface-hint, tcp_user_timeout, topo, torpid_max, torpid_min, zmqdebug"); err != nil {
		return nil, err
	}
	return tb, nil
}

// parentOf is the k-ary tree the broker uses: rank r's parent is
// (r-1)/k.
func parentOf(r, k int) int { return (r - 1) / k }

func hasChildren(r, k, size int) bool { return r*k+1 < size }

// planConfig places host in the instance a [bootstrap] table describes.
// fanout is the tree's fanout (already chosen); certPath the instance
// key from the command line, which overrides bootstrap.curve_cert.
func planConfig(bs *Bootstrap, h Host, fanout uint32, certPath string) (*Plan, error) {
	size := len(bs.Hosts)
	p := &Plan{Method: "config", Size: 1, Fanout: fanout, CertPath: certPath}
	if p.CertPath == "" {
		p.CertPath = bs.CurveCert
	}
	if size == 0 {
		// An empty hosts array is a standalone broker.
		p.Hostlist = []string{h.Name}
		return p, nil
	}
	k := int(fanout)
	rank, err := bs.findRank(h)
	if err != nil {
		return nil, err
	}
	// Check the whole tree, not just this broker's corner of it, so every
	// broker rejects a bad configuration the same way.
	needCert := false
	for r, e := range bs.Hosts {
		if e.Parent != "" && r > 0 {
			if want := bs.Hosts[parentOf(r, k)].Host; e.Parent != want {
				return nil, fmt.Errorf("%w: %s.parent: %q is not the parent of %s in the k-ary tree with fanout %d (%q is); custom trees are not supported",
					ErrConfig, e.key, e.Parent, e.Host, k, want)
			}
		}
		if r == 0 && e.Parent != "" {
			return nil, fmt.Errorf("%w: %s.parent: %s is rank 0, the root of the tree", ErrConfig, e.key, e.Host)
		}
		if !hasChildren(r, k, size) {
			continue
		}
		if e.Bind == "" {
			return nil, fmt.Errorf("%w: %s: host %s has brokers below it in the tree but no bind URI (set bind, or bootstrap.default_bind)", ErrConfig, e.key, e.Host)
		}
		if e.Connect == "" {
			return nil, fmt.Errorf("%w: %s: host %s has brokers below it in the tree but no connect URI (set connect, or bootstrap.default_connect)", ErrConfig, e.key, e.Host)
		}
		if strings.HasPrefix(e.Connect, "tcp://") {
			needCert = true
		}
	}
	if needCert && p.CertPath == "" {
		return nil, fmt.Errorf("%w: bootstrap.curve_cert: required for %d brokers linked over tcp:// (make a key with flux keygen, give every broker the same file, and name it in curve_cert or with -S tbon.cert)", ErrNeedCert, size)
	}
	if needCert {
		key := "bootstrap.curve_cert"
		if certPath != "" {
			key = "tbon.cert"
		}
		if st, err := os.Stat(p.CertPath); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s: %s is not a regular file", ErrConfig, key, p.CertPath)
		}
	}
	p.Rank, p.Size = uint32(rank), uint32(size)
	for _, e := range bs.Hosts {
		p.Hostlist = append(p.Hostlist, e.Host)
	}
	if bs.Legacy && h.Name != "" {
		// tbon-endpoints name addresses, not hosts: this broker is
		// known by its hostname, which it gives its parent on joining,
		// so rank 0's hostlist fills with names as the brokers join
		p.Hostlist[rank] = h.Name
	}
	me := bs.Hosts[rank]
	if rank > 0 {
		p.ParentURI = bs.Hosts[parentOf(rank, k)].Connect
	}
	if hasChildren(rank, k, size) {
		key := me.key + ".bind"
		ep, err := parseEndpoint(me.Bind, true, key)
		if err != nil {
			return nil, err
		}
		if p.BindURI, err = resolveBind(ep, h, bs.EnableIPv6, key); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// overrideRank applies -S boot.rank (v; "" for none) to the older
// form's rank.
func (bs *Bootstrap) overrideRank(v string) error {
	if v == "" {
		return nil
	}
	if !bs.Legacy {
		return fmt.Errorf("%w: boot.rank=%s: only used with tbon-endpoints (bootstrap.hosts finds a broker by its hostname)", ErrConfig, v)
	}
	r, err := strconv.Atoi(v)
	if err != nil || r < 0 || r >= len(bs.Hosts) {
		return fmt.Errorf("%w: boot.rank=%s: not a rank of the %d tbon-endpoints (0-%d)", ErrConfig, v, len(bs.Hosts), len(bs.Hosts)-1)
	}
	bs.Rank = r
	return nil
}

// findRank locates this host: by hostname in bootstrap.hosts; in the
// older form by bootstrap.rank, or else the one endpoint whose address
// is this host's.
func (bs *Bootstrap) findRank(h Host) (int, error) {
	if !bs.Legacy {
		for r, e := range bs.Hosts {
			if e.Host == h.Name {
				return r, nil
			}
		}
		return 0, fmt.Errorf("%w: bootstrap.hosts: this host %q is not listed (hostname, or $%s)", ErrNotListed, h.Name, FakeHostnameEnv)
	}
	if bs.Rank >= 0 {
		return bs.Rank, nil
	}
	found := -1
	for r, e := range bs.Hosts {
		ip := net.ParseIP(e.Host)
		if ip == nil || !h.hasAddr(ip) {
			continue
		}
		if found >= 0 {
			return 0, fmt.Errorf("%w: bootstrap.tbon-endpoints: entries %d and %d are both addresses of this host; set bootstrap.rank or -S boot.rank", ErrConfig, found, r)
		}
		found = r
	}
	if found < 0 {
		return 0, fmt.Errorf("%w: bootstrap.tbon-endpoints: no entry is an address of this host; set bootstrap.rank or -S boot.rank", ErrNotListed)
	}
	return found, nil
}
