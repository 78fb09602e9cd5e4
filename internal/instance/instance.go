// Package instance assembles one broker of a Flux instance and runs it:
// the composition root of the broker process. From the command line's
// attributes and configuration it decides how the broker boots (a
// [bootstrap] table, PMI, a test instance's placement, or alone), which
// modules it runs (modules.Registry, modules.DefaultRC1), what
// configuration it serves and checks, and whether it is nested in an
// enclosing instance (a job of another). internal/cli parses flags and
// calls Run; nothing else builds a broker.
package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fluxgo/fluxgo/internal/boot"
	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/modules"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Options are what the command line gives a broker.
type Options struct {
	// Attrs are the broker attributes set with -S NAME=VALUE.
	Attrs map[string]string
	// ConfigPath is the TOML configuration (a file or a directory).
	ConfigPath string
	// Conf are --conf values applied over the configuration, in order
	// (confopt.go).
	Conf []string
	// JobConfig loads the configuration the enclosing job carries
	// (flux batch/alloc --conf) instead.
	JobConfig bool
	// InitialProgram is run by rank 0 once every broker has joined.
	InitialProgram []string
	// Test, when set, places the broker in a test instance (flux start
	// --test-size) instead of booting from configuration or PMI.
	Test *Placement
}

// Placement is a broker's place in a test instance.
type Placement struct {
	Rank, Size int
	Parent     string   // the parent's overlay URI (ranks above 0)
	Hosts      []string // every rank's hostname, or nil
	Listener   *os.File // an inherited overlay listening socket, or nil
}

// Run builds the broker and runs it until it exits, returning its exit
// code.
func Run(o Options) (code int, err error) {
	attrs := o.Attrs
	if attrs == nil {
		attrs = make(map[string]string)
	}
	// GC and memory limit policy (broker.memory-limit): process-wide.
	stopMemoryTuning, err := broker.TuneMemory(attrs)
	if err != nil {
		return 1, err
	}
	defer stopMemoryTuning()
	cfg := broker.Config{
		Size:           1,
		Attrs:          attrs,
		InitialProgram: o.InitialProgram,
		Registry:       modules.Registry(),
		Modules:        modules.DefaultRC1(),
		Startlog:       true,
		Rundir:         attrs["rundir"],
		Statedir:       attrs["statedir"],
	}
	if v, ok := attrs["tbon.fanout"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return 1, fmt.Errorf("tbon.fanout=%q: must be a positive integer", v)
		}
		cfg.Fanout = uint32(n)
	}
	if v, ok := attrs["tbon.timeout"]; ok {
		d, err := fsd.ParseDuration(v)
		if err != nil {
			return 1, fmt.Errorf("tbon.timeout: %w", err)
		}
		cfg.TBONTimeout = d
	}
	if v, ok := attrs["tbon.cert"]; ok {
		cfg.CertPath = v
	}
	if v, ok := attrs["log-stderr-level"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 7 {
			return 1, fmt.Errorf("log-stderr-level=%q: must be 0-7", v)
		}
		cfg.LogStderrLevel = n
	}
	if cfg.Rundir == "" {
		dir, err := jobRundir()
		if err != nil {
			return 1, err
		}
		if dir != "" {
			cfg.Rundir = dir
			defer os.RemoveAll(dir)
		}
	}
	if o.ConfigPath != "" {
		conf, err := LoadConfig(o.ConfigPath)
		if err != nil {
			return 1, err
		}
		cfg.TOML = conf.Table
		applyConfigAttrs(conf.Table, cfg.Attrs)
		path, err := filepath.Abs(o.ConfigPath)
		if err != nil {
			return 1, err
		}
		cfg.ReloadTOML = func() (map[string]any, error) {
			conf, err := LoadConfig(path)
			if err != nil {
				return nil, err
			}
			return conf.Table, nil
		}
	}
	if len(o.Conf) > 0 {
		table := cfg.TOML
		if table == nil {
			table = map[string]any{}
		}
		for _, v := range o.Conf {
			if err := applyConf(table, v); err != nil {
				return 1, fmt.Errorf("--conf=%s: %w", v, err)
			}
		}
		if err := CheckConfig(table); err != nil {
			return 1, fmt.Errorf("--conf: %w", err)
		}
		cfg.TOML = table
		applyConfigAttrs(table, cfg.Attrs)
		if cfg.ReloadTOML == nil {
			// no files to read again: a reload keeps what --conf gave
			cfg.ReloadTOML = func() (map[string]any, error) { return table, nil }
		}
	}
	if err := applyTorpid(attrs, cfg.TOML, &cfg); err != nil { // torpid.go
		return 1, err
	}
	cfg.CheckTOML = CheckConfig
	cfg.NoteTOML = ConfigNotes
	if m, ok := attrs["broker.boot-method"]; ok && !knownBootMethods[m] {
		return 1, fmt.Errorf("broker.boot-method=%s: unknown boot method (want config, simple, single, libpmi or pmix)", m)
	}
	if o.Test == nil {
		// Not placed by flux start --test-size: boot from the [bootstrap]
		// configuration, from PMI, or as a standalone broker.
		bootFile, err := legacyBootFile(attrs)
		if err != nil {
			return 1, err
		}
		cleanup, err := boot.Configure(context.Background(), &cfg, boot.Options{
			ConfigPath:    o.ConfigPath,
			BootFile:      bootFile,
			Rank:          attrs["boot.rank"],
			CertPath:      cfg.CertPath,
			Fanout:        cfg.Fanout,
			InterfaceHint: attrs["tbon.interface-hint"],
			Rundir:        cfg.Rundir,
		})
		if err != nil {
			return 1, err
		}
		defer cleanup()
	} else {
		if _, ok := cfg.Attrs["broker.boot-method"]; !ok {
			// flux start --test-size hands out PMI-1 ranks ("simple"),
			// unless the PMI client is told to be a singleton
			method := "simple"
			if os.Getenv("FLUX_PMI_CLIENT_METHODS") == "single" {
				method = "single"
			}
			cfg.Attrs["broker.boot-method"] = method
		}
		shareHost(o.Test.Size, o.Test.Rank, cfg.Attrs) // hostshare.go
		cfg.Rank = uint32(o.Test.Rank)
		cfg.Size = uint32(o.Test.Size)
		cfg.ParentURI = o.Test.Parent
		cfg.Hostlist = o.Test.Hosts
		if o.Test.Listener != nil {
			cfg.ListenFile = o.Test.Listener
			cfg.BindURI = attrs["tbon.endpoint"]
		}
	}
	var enc *enclosing
	if o.Test == nil {
		// brokers of flux start --test-size are not the job's brokers,
		// even inside a job: no parent-uri (as flux-core's PMI from
		// flux start, not from the job shell)
		enc = detectEnclosing()
	}
	if enc != nil {
		enc.apply(&cfg)
	}
	if o.JobConfig {
		if o.ConfigPath != "" {
			return 1, fmt.Errorf("--job-config and --config-path: give one")
		}
		ctx, cancel := context.WithTimeout(context.Background(), parentLevelTimeout)
		table, err := enc.jobConfig(ctx)
		cancel()
		if err != nil {
			return 1, err
		}
		if err := CheckConfig(table); err != nil {
			return 1, fmt.Errorf("--job-config: %w", err)
		}
		cfg.TOML = table
		applyConfigAttrs(table, cfg.Attrs)
		cfg.ReloadTOML = func() (map[string]any, error) { return table, nil }
	}
	b, err := broker.New(cfg)
	if err != nil {
		return 1, err
	}
	if enc != nil {
		enc.announce(b, &cfg)
	}
	return b.Run()
}

// knownBootMethods are the broker.boot-method values flux-core takes.
var knownBootMethods = map[string]bool{"config": true, "simple": true, "single": true, "libpmi": true, "pmix": true, "pmi": true}

// legacyBootFile reads flux-core 0.11's -S boot.method and -S
// boot.config_file (seed 004's "flux broker -Sboot.method=config
// -Sboot.config_file=boot.conf"): the file to boot from, or "".
// Today's spelling is -c PATH with a [bootstrap] table.
func legacyBootFile(attrs map[string]string) (string, error) {
	method, haveMethod := attrs["boot.method"]
	file, haveFile := attrs["boot.config_file"]
	switch {
	case !haveMethod && !haveFile:
		return "", nil
	case haveMethod && method != "config" && method != "pmi":
		return "", fmt.Errorf("boot.method=%s: unknown (flux-core 0.11 took config or pmi; today use -c PATH with a [bootstrap] table, or PMI)", method)
	case method == "config" && file == "":
		return "", fmt.Errorf("boot.method=config needs boot.config_file=FILE (a TOML file with session-id and tbon-endpoints; today's spelling is -c PATH with a [bootstrap] table)")
	case haveFile && method != "config":
		return "", fmt.Errorf("boot.config_file=%s needs boot.method=config", file)
	}
	return file, nil
}
