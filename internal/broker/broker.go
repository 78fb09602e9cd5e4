// Package broker implements the fluxgo broker: one process per node that
// owns the local connector socket, the tree-based overlay network links to
// its parent and children, the service table and router, broker
// attributes, logging, and the modules that provide the instance's
// services.
package broker

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/version"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/taskmap"
	"golang.org/x/sys/unix"
)

// ModuleSpec names a module rc1 loads and the ranks that load it.
type ModuleSpec struct {
	Name  string
	Ranks string // "all", "0", or "1-" style; empty means all
	Args  []string
	// IfConfig, if set, loads the module only when the instance
	// configuration has this top-level table (an optional service that
	// is configured to be used, e.g. [archive]).
	IfConfig string
	// Builtin marks a service flux-core has in the broker itself (rexec,
	// the job shells' host): loaded even when broker.rc1_path replaces
	// the module list, after rc1 has run.
	Builtin bool
}

// onRank reports whether the module loads on rank r.
func (s ModuleSpec) onRank(r uint32) bool {
	switch s.Ranks {
	case "", "all":
		return true
	case "0":
		return r == 0
	case "!0", "1-":
		return r != 0
	}
	n, err := strconv.ParseUint(s.Ranks, 10, 32)
	return err == nil && uint32(n) == r
}

// Config is everything a broker needs to start.
type Config struct {
	Rank   uint32
	Size   uint32
	Fanout uint32
	// Rundir is this broker's runtime directory; its local socket is
	// Rundir/local. Created (and removed at exit) when empty.
	Rundir   string
	Statedir string
	// ParentURI is the parent's overlay endpoint (ranks > 0). A broker
	// joining a running instance beyond its size (growing it, see
	// resize.go) is configured as any other: Rank R, the Size it
	// believes in (greater than R), and the endpoint of rank
	// (R-1)/Fanout here.
	ParentURI string
	// BindURI is where this broker accepts its children; empty means
	// ipc://Rundir/tbon. Every broker listens, a leaf too, so a broker
	// can join below it later.
	BindURI string
	// ListenFile, when set, is an already-bound listening socket for
	// BindURI inherited from flux start (children can connect before this
	// broker has even started).
	ListenFile *os.File
	// CertPath is the instance key pair for TCP overlay links.
	CertPath string
	// Hostlist lists every rank's hostname in rank order.
	Hostlist []string
	// Attrs are extra attributes from -S name=value.
	Attrs map[string]string
	// InitialProgram runs on rank 0 once the instance is up; nil means no
	// initial program (the broker runs until flux shutdown).
	InitialProgram []string
	// Modules are loaded in order by rc1 and unloaded in reverse by rc3.
	Modules []ModuleSpec
	// Startlog: rank 0 records its start and finish in the KVS
	// admin.eventlog (startlog.go), as a full instance's rc1 and rc3
	// do; test brokers running a few modules leave it out.
	Startlog bool
	Registry *module.Registry
	// TBONTimeout is how long an overlay peer may be silent before it is
	// declared lost.
	TBONTimeout time.Duration
	// TorpidMin is how often a broker sends keepalives on an idle link
	// (tbon.torpid_min, 5s by default); TorpidMax is how long a child
	// may be silent before its parent marks it torpid (tbon.torpid_max,
	// 30s by default; negative: never). A torpid child gets no new work
	// until it is heard again (overlay_torpid.go).
	TorpidMin, TorpidMax time.Duration
	// ConnectTimeout bounds how long a child retries reaching its parent.
	ConnectTimeout time.Duration
	// QuorumTimeout bounds how long rank 0 waits for all brokers to join
	// before starting the initial program anyway.
	QuorumTimeout time.Duration
	// Logger receives a copy of broker log entries at or above its level
	// (stderr by default, errors only).
	LogStderrLevel int
	// TOML is the instance configuration (--config-path), served by
	// config.get.
	TOML map[string]any
	// ReloadTOML reads the configuration again for config.reload (flux
	// config reload), checked as it was at start; nil when the broker
	// was started without one (a reload then empties it).
	ReloadTOML func() (map[string]any, error)
	// CheckTOML checks a configuration given to config.load before any
	// module sees it; nil checks nothing.
	CheckTOML func(map[string]any) error
	// NoteTOML lists what a configuration sets that is accepted but not
	// acted on; each is logged (warning) when the configuration is
	// applied, at start and on a reload. nil notes nothing.
	NoteTOML func(map[string]any) []string
}

func (c *Config) setDefaults() {
	if c.Size == 0 {
		c.Size = 1
	}
	if c.Fanout == 0 {
		c.Fanout = 2
	}
	if c.TBONTimeout == 0 {
		c.TBONTimeout = 30 * time.Second
	}
	if c.TorpidMin == 0 {
		c.TorpidMin = defaultTorpidMin
	}
	if c.TorpidMax == 0 {
		c.TorpidMax = defaultTorpidMax
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 30 * time.Second
	}
	if c.QuorumTimeout == 0 {
		c.QuorumTimeout = 60 * time.Second
	}
	if c.LogStderrLevel == 0 {
		c.LogStderrLevel = sevErr
	}
}

// Validate reports a configuration that can't work.
func (c *Config) Validate() error {
	if c.Rank >= c.Size {
		return fmt.Errorf("rank %d is not less than size %d", c.Rank, c.Size)
	}
	if c.Size > maxInstanceSize {
		return fmt.Errorf("size %d is larger than an instance may be (%d)", c.Size, maxInstanceSize)
	}
	if c.Rank > 0 && c.ParentURI == "" {
		return fmt.Errorf("rank %d needs a parent URI", c.Rank)
	}
	if err := c.validateTorpid(); err != nil { // overlay_torpid.go
		return err
	}
	if len(c.Hostlist) != 0 && uint32(len(c.Hostlist)) != c.Size {
		return fmt.Errorf("hostlist has %d hosts for %d ranks", len(c.Hostlist), c.Size)
	}
	return nil
}

// Broker is one running broker.
type Broker struct {
	cfg  Config
	rank uint32
	// size is the instance's current size: it grows as brokers join
	// beyond it and shrinks by overlay.shrink (resize.go). Read it with
	// Size or topo; change it only through resize.go under sizeMu.
	size  atomic.Uint32
	owner uint32
	// sizeMu serializes changes of size and hosts (resize.go). Lock
	// order: sizeMu, then overlay.mu, router.evmu or attrs.
	sizeMu sync.Mutex
	hosts  []string // every rank's hostname, in rank order (under sizeMu)
	// shrinking is set while overlay.shrink runs (rank 0)
	shrinking atomic.Bool
	// maxUserConns bounds each guest's local connections at once
	// (access.max-user-connections)
	maxUserConns atomic.Int64
	// maxUserPending bounds the bytes of a guest's messages still
	// arriving (access.max-user-pending)
	maxUserPending atomic.Int64
	access         atomic.Pointer[accessConfig] // the [access] table (applyAccess)

	ctx    context.Context
	cancel context.CancelFunc
	// rc1Done is closed once this broker's modules have started
	rc1Done chan struct{}

	// coarse is a clock for per-message bookkeeping (coarse.go)
	coarse coarseClock

	log     *slog.Logger
	ring    *logRing
	attrs   *attrTable
	router  *router
	overlay *overlay
	local   *localConnector
	modules *moduleHost
	svc     *builtins
	tracer  tracer // overlay_trace.go

	tlsOnce sync.Once
	tlsCfg  *tls.Config
	tlsErr  error

	started   time.Time
	running   chan struct{} // closed when rc1 is done and the broker runs
	stopping  atomic.Bool
	shutdownC chan int // exit code requested by flux shutdown
	state     atomic.Value
	rmRundir  bool
	exitCode  int
	// cleanup: the commands pushed for the cleanup phase (runat.go)
	runatMu sync.Mutex
	cleanup []string
	// keepJobs: this shutdown leaves running jobs running (drainJobs)
	keepJobs atomic.Bool
}

func versionString() string { return version.Version }

// New prepares a broker: directories, attributes, logging. Run starts it.
func New(cfg Config) (*Broker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	access, err := parseAccess(cfg.TOML)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	b := &Broker{
		cfg:       cfg,
		rank:      cfg.Rank,
		owner:     uint32(os.Getuid()),
		started:   time.Now(),
		shutdownC: make(chan int, 1),
		running:   make(chan struct{}),
		rc1Done:   make(chan struct{}),
	}
	b.size.Store(cfg.Size)
	b.access.Store(&access)
	b.state.Store("join")
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.coarse.onQuiet = releaseWhenQuiet // filepages.go
	b.ring = newLogRing(1024, b.rank)
	b.ring.stderrSev = cfg.LogStderrLevel
	b.log = slog.New(&ringHandler{ring: b.ring, name: "broker", level: slog.LevelDebug})
	if b.cfg.Rundir == "" {
		dir, err := os.MkdirTemp("", "flux-")
		if err != nil {
			return nil, fmt.Errorf("rundir: %w", err)
		}
		b.cfg.Rundir = dir
		b.rmRundir = true
	} else if err := os.MkdirAll(b.cfg.Rundir, 0o755); err != nil {
		return nil, fmt.Errorf("rundir: %w", err)
	}
	if b.cfg.Statedir != "" {
		if err := os.MkdirAll(b.cfg.Statedir, 0o700); err != nil {
			return nil, fmt.Errorf("statedir: %w", err)
		}
	}
	if err := b.checkCommandLineAttrs(); err != nil {
		return nil, err
	}
	b.attrs = newAttrTable()
	if err := b.initAttrs(); err != nil {
		return nil, err
	}
	b.router = newRouter(b)
	b.overlay = newOverlay(b)
	b.modules = newModuleHost(b, cfg.Registry)
	return b, nil
}

// LocalURI returns the URI of this broker's local socket.
func (b *Broker) LocalURI() string { return "local://" + b.localPath() }

// localPath is the local socket's path: rundir/local, or the path of
// the local-uri attribute given on the command line.
func (b *Broker) localPath() string {
	if u, ok := b.cfg.Attrs["local-uri"]; ok {
		return strings.TrimPrefix(u, "local://")
	}
	return filepath.Join(b.cfg.Rundir, "local")
}

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 107

// brokerOwnedAttrs are attributes only the broker sets: giving one on
// the command line is an error, as in flux-core.
var brokerOwnedAttrs = []string{"broker.pid", "broker.state", "broker.uptime", "broker.starttime",
	"version", "security.owner", "tbon.level", "tbon.maxlevel", "tbon.descendants"}

// checkCommandLineAttrs refuses command-line attributes the broker owns
// and checks those it takes (local-uri, broker.critical-ranks).
func (b *Broker) checkCommandLineAttrs() error {
	for _, k := range brokerOwnedAttrs {
		if _, ok := b.cfg.Attrs[k]; ok {
			return fmt.Errorf("%s: attribute is immutable (set by the broker)", k)
		}
	}
	if u, ok := b.cfg.Attrs["local-uri"]; ok {
		path, found := strings.CutPrefix(u, "local://")
		if !found || path == "" {
			return fmt.Errorf("local-uri=%s: malformed local-uri (want local://PATH)", u)
		}
		if len(path) > maxSocketPath {
			return fmt.Errorf("local-uri=%s: the socket path exceeds max length %d (buffer overflow)", u, maxSocketPath)
		}
		dir := filepath.Dir(path)
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			var en syscall.Errno
			errors.As(err, &en)
			return fmt.Errorf("local-uri=%s: cannot stat %s: %s", u, dir, strerrorText(en, err))
		case !fi.IsDir():
			return fmt.Errorf("local-uri=%s: %s: Not a directory", u, dir)
		case fi.Mode().Perm()&0o200 == 0 || unix.Access(dir, unix.W_OK|unix.X_OK) != nil:
			return fmt.Errorf("local-uri=%s: directory %s is not writable: check its permissions", u, dir)
		}
	} else if p := filepath.Join(b.cfg.Rundir, "local"); len(p) > maxSocketPath {
		return fmt.Errorf("rundir=%s: the local socket path %s exceeds max length %d", b.cfg.Rundir, p, maxSocketPath)
	}
	if v, ok := b.cfg.Attrs["broker.critical-ranks"]; ok {
		ranks, err := idset.Parse(v)
		if err != nil {
			return fmt.Errorf("broker.critical-ranks=%s: %w", v, err)
		}
		if last, ok := ranks.Last(); ok && last >= uint(b.Size()) {
			return fmt.Errorf("broker.critical-ranks=%s: rank %d is not in the instance (size %d)", v, last, b.Size())
		}
	}
	return nil
}

func (b *Broker) initAttrs() error {
	a := b.attrs
	imm := attrImmutable
	hostname, _ := os.Hostname()
	hosts := append([]string(nil), b.cfg.Hostlist...)
	if len(hosts) == 0 {
		hosts = make([]string, b.Size())
		for i := range hosts {
			hosts[i] = hostname
		}
	}
	b.hosts = hosts
	a.set("rank", strconv.FormatUint(uint64(b.rank), 10), imm)
	a.set("rundir", b.cfg.Rundir, imm)
	a.set("local-uri", b.LocalURI(), imm)
	a.set("broker.pid", strconv.Itoa(os.Getpid()), imm)
	a.set("version", version.Version, imm)
	a.set("tbon.fanout", strconv.FormatUint(uint64(b.cfg.Fanout), 10), imm)
	a.set("tbon.level", strconv.Itoa(b.topo().depth(b.rank)), imm)
	a.set("tbon.timeout", b.cfg.TBONTimeout.String(), imm)
	b.setTorpidAttrs() // overlay_torpid.go
	a.set("hostname", hosts[b.rank], imm)
	b.setSizeAttrs(b.Size(), hosts) // size, hostlist, tbon.maxlevel ... (resize.go)
	a.set("security.owner", strconv.FormatUint(uint64(b.owner), 10), imm)
	// A broker of an instance running as a job of another learns its
	// place from its command line (flux broker sets these from the job
	// shell's environment; see internal/cli/broker_nested.go).
	a.set("instance-level", attrOr(b.cfg.Attrs, "instance-level", "0"), imm)
	for _, k := range []string{"parent-uri", "jobid", "parent-kvs-namespace"} {
		if v := b.cfg.Attrs[k]; v != "" {
			a.set(k, v, imm)
		}
	}
	if p, ok := b.topo().parent(b.rank); ok {
		a.set("tbon.parent-endpoint", b.cfg.ParentURI, imm)
		a.set("tbon.parent-rank", strconv.FormatUint(uint64(p), 10), imm)
	}
	if b.cfg.BindURI != "" {
		a.set("tbon.endpoint", b.cfg.BindURI, imm)
	}
	if b.cfg.Statedir != "" {
		a.set("statedir", b.cfg.Statedir, imm)
	}
	a.setFunc("broker.state", attrReadOnly, func() string { return b.state.Load().(string) })
	a.setFunc("broker.uptime", attrReadOnly, func() string {
		return strconv.FormatFloat(time.Since(b.started).Seconds(), 'f', 3, 64)
	})
	// Seconds since the epoch, two decimals as flux-core writes it
	// (flux jobs --since and flux uptime read it as a float).
	a.set("broker.starttime", strconv.FormatFloat(float64(b.started.UnixNano())/1e9, 'f', 2, 64), imm)
	b.initLogAttrs()
	for k, v := range b.cfg.Attrs {
		if _, flags, err := a.get(k); err == nil {
			if flags == 0 {
				// a runtime setting (log-level ...): apply the
				// command line's value
				if err := a.userSet(k, v); err != nil {
					return err
				}
			}
			continue // command-line settings can't override broker facts
		}
		a.set(k, v, 0)
	}
	return nil
}

// brokerMapping returns the RFC 34 task map of broker ranks onto the
// distinct hosts of hosts (in rank order), e.g. [[0,1,4,1]] for four
// brokers on one host.
func brokerMapping(hosts []string) string {
	index := map[string]int{}
	var ranks [][]int
	for rank, h := range hosts {
		i, ok := index[h]
		if !ok {
			i = len(ranks)
			index[h] = i
			ranks = append(ranks, nil)
		}
		ranks[i] = append(ranks[i], rank)
	}
	m, err := taskmap.FromNodeTasks(ranks)
	if err != nil {
		return ""
	}
	return m.EncodeArray()
}

// initLogAttrs adds the logging attributes flux setattr may change at
// runtime: log-level, log-stderr-level (severity thresholds 0-7, or a
// negative number for none) and log-ring-size.
func (b *Broker) initLogAttrs() {
	level := func(name string, which func(n int) (level, stderrSev *int), cur func() int) {
		b.attrs.setRuntime(name, func() string { return strconv.Itoa(cur()) }, func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n > sevDebug {
				return fmt.Errorf("invalid value %q: must be a severity number of at most %d: %w", v, sevDebug, syscall.EINVAL)
			}
			b.ring.setLevels(which(n))
			return nil
		})
	}
	level("log-level", func(n int) (*int, *int) { return &n, nil }, func() int { l, _ := b.ring.levels(); return l })
	level("log-stderr-level", func(n int) (*int, *int) { return nil, &n }, func() int { _, s := b.ring.levels(); return s })
	b.maxUserConns.Store(cmp.Or(b.accessConf().maxUserConns, defaultMaxUserConns))
	b.attrs.setRuntime("access.max-user-connections", func() string { return strconv.FormatInt(b.maxUserConns.Load(), 10) }, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("invalid value %q: must be a positive integer (the local connections one guest may hold at once): %w", v, syscall.EINVAL)
		}
		b.maxUserConns.Store(n)
		return nil
	})
	b.maxUserPending.Store(cmp.Or(b.accessConf().maxUserPending, defaultMaxUserPending))
	b.attrs.setRuntime("access.max-user-pending", func() string { return strconv.FormatInt(b.maxUserPending.Load(), 10) }, func(v string) error {
		n, err := size.Parse(v)
		if err != nil {
			return fmt.Errorf("invalid value %q: must be a size such as 64M (the bytes of messages still arriving one guest may hold): %v: %w", v, err, syscall.EINVAL)
		}
		if n < 64<<10 {
			return fmt.Errorf("invalid value %q: must be at least 64K: %w", v, syscall.EINVAL)
		}
		b.maxUserPending.Store(n)
		return nil
	})
	b.attrs.setRuntime("log-ring-size", func() string { return strconv.Itoa(b.ring.size()) }, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("invalid value %q: must be a positive integer: %w", v, syscall.EINVAL)
		}
		b.ring.setSize(n)
		return nil
	})
}

func attrOr(attrs map[string]string, name, def string) string {
	if v := attrs[name]; v != "" {
		return v
	}
	return def
}

// allowGuests reports whether users other than the owner may connect.
// accessConf returns the [access] table in force (empty before New sets
// one).
func (b *Broker) accessConf() *accessConfig {
	if ac := b.access.Load(); ac != nil {
		return ac
	}
	return &accessConfig{}
}

// applyAccess makes a reloaded configuration's [access] table the one
// new connections see (checked before, by CheckTOML or the reload); its
// limits replace the ones in force, as at start.
func (b *Broker) applyAccess(table map[string]any) {
	ac, err := parseAccess(table)
	if err != nil {
		b.log.Error("access: " + err.Error())
		return
	}
	b.access.Store(&ac)
	b.maxUserConns.Store(cmp.Or(ac.maxUserConns, defaultMaxUserConns))
	b.maxUserPending.Store(cmp.Or(ac.maxUserPending, defaultMaxUserPending))
}

func (b *Broker) allowGuests() bool {
	if v, _, err := b.attrs.get("access.allow-guest-user"); err == nil {
		return v == "1" || v == "true"
	}
	if ac := b.accessConf(); ac.allowGuest != nil {
		return *ac.allowGuest
	}
	return b.owner == 0
}

// Joined is closed once every broker of the instance has joined (on rank
// 0), or of this broker's subtree (elsewhere).
func (b *Broker) Joined() <-chan struct{} { return b.overlay.joined }

// Running is closed once rc1 has loaded the modules and the broker is in
// its run state (on rank 0: after every broker joined).
func (b *Broker) Running() <-chan struct{} { return b.running }

// Rank returns the broker's rank.
func (b *Broker) Rank() uint32 { return b.rank }

// Shutdown asks the broker to shut down with an exit code.
func (b *Broker) Shutdown(code int) {
	select {
	case b.shutdownC <- code:
	default:
	}
}

func compressHosts(hosts []string) string {
	return hostlist.New(hosts...).String() // RFC 29 form: node[0-3]
}

// strerrorText is the C library's words for en (err's text without one).
func strerrorText(en syscall.Errno, err error) string {
	if en == 0 {
		return err.Error()
	}
	t := en.Error()
	return strings.ToUpper(t[:1]) + t[1:]
}
