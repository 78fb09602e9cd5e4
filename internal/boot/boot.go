// Package boot decides a broker's place in its Flux instance before the
// broker starts: its rank, the instance size, the tree fanout, the URI
// of its parent, the URI it binds for its children, every rank's
// hostname, and the instance key for TCP links.
//
// The decision comes from, in order of precedence:
//
//   - a [bootstrap] table in the TOML configuration (flux broker -c PATH;
//     flux-config-bootstrap(5)): the broker finds its hostname in
//     bootstrap.hosts (or its address in the older tbon-endpoints array);
//   - PMI-1 (PMI_FD or PMI_PORT in the environment, as mpiexec, srun and
//     Flux itself provide): the brokers exchange hostnames and endpoints
//     through the process manager's KVS;
//   - otherwise, a standalone broker of size 1.
//
// flux start --test-size brokers are placed by flux start itself and do
// not come here.
package boot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/pmi"
)

// Error kinds.
var (
	// ErrConfig: the configuration is malformed or inconsistent.
	ErrConfig = errors.New("invalid configuration")
	// ErrNotListed: this host is not part of the configured instance.
	ErrNotListed = errors.New("host not in configuration")
	// ErrNeedCert: TCP overlay links are needed but no instance key is
	// configured.
	ErrNeedCert = errors.New("instance key required")
	// ErrPMI: the PMI exchange failed.
	ErrPMI = errors.New("pmi boot failed")
)

// Options are the broker command-line settings boot takes into account.
type Options struct {
	// ConfigPath is the -c PATH (a TOML file or directory); "" for none.
	ConfigPath string
	// BootFile is -S boot.config_file with -S boot.method=config, the
	// 2018 spelling (flux-core 0.11): a TOML file of bootstrap keys at
	// its top level (session-id, tbon-endpoints ...), read as the
	// [bootstrap] table.
	BootFile string
	// Rank is -S boot.rank, this broker's rank among the tbon-endpoints
	// (either spelling), for a host that holds more than one of the
	// listed addresses; "" finds it by address. It overrides
	// bootstrap.rank.
	Rank string
	// CertPath is -S tbon.cert; it overrides bootstrap.curve_cert.
	CertPath string
	// Fanout is -S tbon.fanout; 0 defers to [tbon] or the default, 2.
	Fanout uint32
	// InterfaceHint is -S tbon.interface-hint, used when PMI boot has to
	// pick a TCP address (see Host.hintAddr).
	InterfaceHint string
	// Rundir is -S rundir, where PMI boot puts an ipc:// endpoint.
	Rundir string
	// Getenv reads the environment; nil means os.Getenv. Host describes
	// this machine; nil means LocalHost(Getenv). Tests set both.
	Getenv func(string) string
	Host   *Host
}

// Plan is the outcome: where this broker sits.
type Plan struct {
	Method    string // "config", "pmi" or "single"
	Rank      uint32
	Size      uint32
	Fanout    uint32
	ParentURI string   // ranks > 0
	BindURI   string   // where children connect (PMI boot: every rank; [bootstrap]: ranks with children)
	Hostlist  []string // hostname of every rank, in rank order
	CertPath  string
	// ConnectTimeout is [tbon] connect_timeout (0 if not set).
	ConnectTimeout time.Duration
	// Rundir is set when boot created the broker's rundir (PMI boot with
	// an ipc:// endpoint); Cleanup removes it.
	Rundir string

	cleanup func()
}

// Cleanup releases what boot created for the broker. Call it after the
// broker has exited.
func (p *Plan) Cleanup() { p.runCleanup() }

func (p *Plan) runCleanup() {
	if p != nil && p.cleanup != nil {
		p.cleanup()
		p.cleanup = nil
	}
}

// Decide works out this broker's plan from the configuration, the PMI
// environment, or neither. PMI boot consumes the PMI environment
// variables (they are removed from the process environment when Getenv
// is nil, so the initial program does not inherit them).
func Decide(ctx context.Context, o Options) (*Plan, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var conf *Config
	if o.ConfigPath != "" {
		var err error
		if conf, err = LoadConfig(o.ConfigPath); err != nil {
			return nil, err
		}
	}
	// errors about the [bootstrap] table say which file it came from
	// when that was a boot.config_file
	bsErr := func(err error) error { return err }
	if o.BootFile != "" {
		bc, topLevel, err := loadBootFile(o.BootFile)
		if err != nil {
			return nil, err
		}
		if topLevel {
			bsErr = func(err error) error {
				return fmt.Errorf("boot.config_file=%s (its keys are read as the [bootstrap] table): %w", o.BootFile, err)
			}
		}
		if conf == nil {
			conf = bc
		} else if _, dup := conf.Table["bootstrap"]; dup {
			return nil, fmt.Errorf("%w: boot.config_file=%s and a [bootstrap] table in the configuration: give one", ErrConfig, o.BootFile)
		} else {
			conf.Table["bootstrap"] = bc.Table["bootstrap"]
		}
	}
	tbonTable, _, err := conf.Section("tbon")
	if err != nil {
		return nil, err
	}
	tb, err := ParseTBON(tbonTable)
	if err != nil {
		return nil, err
	}
	host := o.Host
	if host == nil {
		h, err := LocalHost(getenv)
		if err != nil {
			return nil, err
		}
		host = &h
	}
	bsTable, haveBootstrap, err := conf.Section("bootstrap")
	if err != nil {
		return nil, err
	}
	var p *Plan
	switch {
	case haveBootstrap:
		bs, err := ParseBootstrap(conf, bsTable)
		if err != nil {
			return nil, bsErr(err)
		}
		if err := bs.overrideRank(o.Rank); err != nil {
			return nil, err
		}
		p, err = planConfig(bs, *host, chooseFanout(o.Fanout, tb, len(bs.Hosts)), o.CertPath)
		if err != nil {
			return nil, bsErr(err)
		}
	case o.Rank != "":
		return nil, fmt.Errorf("%w: boot.rank=%s: only used with tbon-endpoints (boot.config_file, or a [bootstrap] table)", ErrConfig, o.Rank)
	case pmi.Offered(getenv):
		c, err := pmi.FromEnv(ctx, getenv)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPMI, err)
		}
		if o.Getenv == nil {
			for _, v := range pmi.EnvVars {
				os.Unsetenv(v)
			}
		}
		p, err = planPMI(ctx, c, *host, pmiParams{fanout: o.Fanout, tbon: tb, certPath: o.CertPath,
			hint: o.InterfaceHint, rundir: o.Rundir})
		if err != nil {
			return nil, err
		}
	default:
		p = &Plan{Method: "single", Size: 1, Fanout: chooseFanout(o.Fanout, tb, 1),
			Hostlist: []string{host.Name}, CertPath: o.CertPath}
	}
	p.ConnectTimeout = tb.ConnectTimeout
	return p, nil
}

// Apply copies the plan into a broker configuration.
func (p *Plan) Apply(cfg *broker.Config) {
	cfg.Rank, cfg.Size, cfg.Fanout = p.Rank, p.Size, p.Fanout
	cfg.ParentURI, cfg.BindURI = p.ParentURI, p.BindURI
	cfg.Hostlist = append([]string(nil), p.Hostlist...)
	if p.CertPath != "" {
		cfg.CertPath = p.CertPath
	}
	if p.ConnectTimeout != 0 && cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = p.ConnectTimeout
	}
	if p.Rundir != "" && cfg.Rundir == "" {
		cfg.Rundir = p.Rundir
	}
	if cfg.Attrs == nil {
		cfg.Attrs = make(map[string]string)
	}
	if _, ok := cfg.Attrs["broker.boot-method"]; !ok {
		cfg.Attrs["broker.boot-method"] = p.Method
	}
}

// Configure decides the plan and applies it to cfg. Call the returned
// cleanup after the broker has exited.
func Configure(ctx context.Context, cfg *broker.Config, o Options) (cleanup func(), err error) {
	p, err := Decide(ctx, o)
	if err != nil {
		return func() {}, err
	}
	p.Apply(cfg)
	return p.Cleanup, nil
}

// loadBootFile reads a boot.config_file (the keys of [bootstrap] at the
// top level of the file) as a configuration with that [bootstrap] table;
// topLevel is false for a file written with the [bootstrap] header.
func loadBootFile(path string) (c *Config, topLevel bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("%w: boot.config_file: %w", ErrConfig, err)
	}
	if c, err = ParseConfig(path, data); err != nil {
		return nil, false, err
	}
	c.Dir = filepath.Dir(path)
	_, nested := c.Table["bootstrap"]
	if !nested {
		c.Table = map[string]any{"bootstrap": c.Table}
	}
	// a relative curve_cert is the file's neighbour, also once the
	// table joins a -c configuration from another directory
	if bs, ok := c.Table["bootstrap"].(map[string]any); ok {
		if cert, ok := bs["curve_cert"].(string); ok {
			bs["curve_cert"] = c.Resolve(cert)
		}
	}
	return c, !nested, nil
}
