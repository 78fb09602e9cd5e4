package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/boot"
	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/modules"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// brokerOptions are the flux broker command line.
type brokerOptions struct {
	setattrs   []string
	configPath string
	jobConfig  bool // --job-config: the enclosing job's --conf (batch_conf.go)
	// private boot parameters set by flux start --test-size
	bootRank   int
	bootSize   int
	bootParent string
	bootHosts  string
	bootListen int
	fromStart  bool
}

func newBrokerCmd() *cobra.Command {
	var o brokerOptions
	cmd := &cobra.Command{
		Use:   "broker [OPTIONS] [INITIAL-PROGRAM...]",
		Short: "Run a Flux message broker (one per node of an instance)",
		Long: `flux broker runs one broker of a Flux instance. Brokers are normally
started by 'flux start' (a test instance on one host, or under PMI from
mpiexec/srun/a parent instance) or by a system service booting from a
TOML [bootstrap] configuration. Rank 0 runs INITIAL-PROGRAM, if given, once
every broker has joined, and the instance exits with its exit code.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBroker(o, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringArrayVarP(&o.setattrs, "setattr", "S", nil, "set broker attribute `NAME=VALUE`")
	f.StringVarP(&o.configPath, "config-path", "c", "", "load TOML configuration from `PATH` (file or directory)")
	f.BoolVar(&o.jobConfig, "job-config", false, "load the configuration the enclosing job carries (flux batch/alloc --conf)")
	f.IntVar(&o.bootRank, "boot-rank", -1, "test boot: this broker's rank")
	f.IntVar(&o.bootSize, "boot-size", 0, "test boot: instance size")
	f.StringVar(&o.bootParent, "boot-parent", "", "test boot: parent overlay URI")
	f.StringVar(&o.bootHosts, "boot-hosts", "", "test boot: comma-separated hostname of each rank")
	f.BoolVar(&o.fromStart, "boot-from-start", false, "started by flux start (ignore terminal SIGINT)")
	f.IntVar(&o.bootListen, "boot-listen-fd", -1, "test boot: inherited overlay listening socket `FD`")
	for _, n := range []string{"boot-rank", "boot-size", "boot-parent", "boot-hosts", "boot-from-start", "boot-listen-fd"} {
		f.MarkHidden(n)
	}
	return cmd
}

// parseSetattrs turns NAME=VALUE strings into a map.
func parseSetattrs(list []string) (map[string]string, error) {
	m := make(map[string]string, len(list))
	for _, kv := range list {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--setattr %q: want NAME=VALUE", kv)
		}
		m[name] = value
	}
	return m, nil
}

func runBroker(o brokerOptions, args []string) error {
	attrs, err := parseSetattrs(o.setattrs)
	if err != nil {
		return err
	}
	// GC and memory limit policy (broker.memory-limit): process-wide.
	stopMemoryTuning, err := broker.TuneMemory(attrs)
	if err != nil {
		return err
	}
	defer stopMemoryTuning()
	cfg := broker.Config{
		Size:           1,
		Attrs:          attrs,
		InitialProgram: args,
		Registry:       modules.Registry(),
		Modules:        modules.DefaultRC1(),
		Startlog:       true,
		Rundir:         attrs["rundir"],
		Statedir:       attrs["statedir"],
	}
	if v, ok := attrs["tbon.fanout"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("tbon.fanout=%q: must be a positive integer", v)
		}
		cfg.Fanout = uint32(n)
	}
	if v, ok := attrs["tbon.timeout"]; ok {
		d, err := fsd.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("tbon.timeout: %w", err)
		}
		cfg.TBONTimeout = d
	}
	if v, ok := attrs["tbon.cert"]; ok {
		cfg.CertPath = v
	}
	if v, ok := attrs["log-stderr-level"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 7 {
			return fmt.Errorf("log-stderr-level=%q: must be 0-7", v)
		}
		cfg.LogStderrLevel = n
	}
	if cfg.Rundir == "" {
		dir, err := jobRundir()
		if err != nil {
			return err
		}
		if dir != "" {
			cfg.Rundir = dir
			defer os.RemoveAll(dir)
		}
	}
	if o.configPath != "" {
		conf, err := loadConfig(o.configPath)
		if err != nil {
			return err
		}
		cfg.TOML = conf.Table
		applyConfigAttrs(conf.Table, cfg.Attrs)
		path, err := filepath.Abs(o.configPath)
		if err != nil {
			return err
		}
		cfg.ReloadTOML = func() (map[string]any, error) {
			conf, err := loadConfig(path)
			if err != nil {
				return nil, err
			}
			return conf.Table, nil
		}
	}
	cfg.CheckTOML = checkConfig
	if o.bootRank < 0 {
		// Not placed by flux start --test-size: boot from the [bootstrap]
		// configuration, from PMI, or as a standalone broker.
		cleanup, err := boot.Configure(context.Background(), &cfg, boot.Options{
			ConfigPath:    o.configPath,
			CertPath:      cfg.CertPath,
			Fanout:        cfg.Fanout,
			InterfaceHint: attrs["tbon.interface-hint"],
			Rundir:        cfg.Rundir,
		})
		if err != nil {
			return err
		}
		defer cleanup()
	} else {
		cfg.Rank = uint32(o.bootRank)
		cfg.Size = uint32(o.bootSize)
		cfg.ParentURI = o.bootParent
		if o.bootHosts != "" {
			cfg.Hostlist = strings.Split(o.bootHosts, ",")
		}
		if o.bootListen >= 0 {
			cfg.ListenFile = os.NewFile(uintptr(o.bootListen), "tbon-listener")
			cfg.BindURI = attrs["tbon.endpoint"]
		}
	}
	if o.fromStart {
		// A terminal Ctrl-C reaches the whole process group: the initial
		// program handles it; the broker shuts down when that exits.
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		go func() {
			for range ch {
			}
		}()
	}
	enc := detectEnclosing()
	if enc != nil {
		enc.apply(&cfg)
	}
	if o.jobConfig {
		if o.configPath != "" {
			return fmt.Errorf("--job-config and --config-path: give one")
		}
		ctx, cancel := context.WithTimeout(context.Background(), parentLevelTimeout)
		table, err := enc.jobConfig(ctx)
		cancel()
		if err != nil {
			return err
		}
		if err := checkConfig(table); err != nil {
			return fmt.Errorf("--job-config: %w", err)
		}
		cfg.TOML = table
		applyConfigAttrs(table, cfg.Attrs)
		cfg.ReloadTOML = func() (map[string]any, error) { return table, nil }
	}
	b, err := broker.New(cfg)
	if err != nil {
		return err
	}
	if enc != nil {
		enc.announce(b, &cfg)
	}
	code, err := b.Run()
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// loadConfig reads the TOML configuration at path and checks the tables
// modules read from it (config.get) before any starts: a bad value is an
// error here rather than a module that fails to load in an instance that
// runs without it.
func loadConfig(path string) (*boot.Config, error) {
	conf, err := boot.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(conf.Table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := conf.Check(); err != nil {
		return nil, err
	}
	return conf, nil
}

// checkConfig checks the tables of a configuration that modules read
// (the job manager's are a superset of job-ingest's and sched-simple's).
func checkConfig(table map[string]any) error {
	raw, err := json.Marshal(table)
	if err != nil {
		return err
	}
	if err := jobmanager.ValidateConfig(raw); err != nil {
		return err
	}
	_, err = resource.TableAttrs(table)
	return err
}

// jobRundir makes the rundir of a broker started by a job without -S
// rundir inside the job's FLUX_JOB_TMPDIR, which the job shell removes
// when the job ends: the directory goes even when the broker is killed
// before it can remove it. It returns "" outside a job, or when the
// sockets' paths there would be too long for a unix socket.
func jobRundir() (string, error) {
	base := os.Getenv("FLUX_JOB_TMPDIR")
	if base == "" {
		return "", nil
	}
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		return "", nil
	}
	// <base>/flux-NNNNNNNNNN/local, and tbon beside it
	if len(base)+len("/flux-1234567890/local") > boot.MaxSocketPath {
		return "", nil
	}
	dir, err := os.MkdirTemp(base, "flux-")
	if err != nil {
		return "", fmt.Errorf("rundir in FLUX_JOB_TMPDIR: %w", err)
	}
	return dir, nil
}

// applyConfigAttrs turns configuration tables that modules read as
// attributes into those attributes, unless -S already set them: the
// [resource] table (resource.TableAttrs; checked by checkConfig).
func applyConfigAttrs(table map[string]any, attrs map[string]string) {
	res, _ := resource.TableAttrs(table)
	for k, v := range res {
		if _, set := attrs[k]; !set {
			attrs[k] = v
		}
	}
}
