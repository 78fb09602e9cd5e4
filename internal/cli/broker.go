package cli

import (
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/instance"
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
	verbose    int
	conf       []string
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
	f.StringArrayVar(&o.conf, "conf", nil, "update the configuration from `VALUE`: KEY=VAL, inline JSON or TOML, or a .json or TOML file (may be repeated)")
	f.BoolVar(&o.jobConfig, "job-config", false, "load the configuration the enclosing job carries (flux batch/alloc --conf)")
	f.IntVar(&o.bootRank, "boot-rank", -1, "test boot: this broker's rank")
	f.IntVar(&o.bootSize, "boot-size", 0, "test boot: instance size")
	f.StringVar(&o.bootParent, "boot-parent", "", "test boot: parent overlay URI")
	f.StringVar(&o.bootHosts, "boot-hosts", "", "test boot: comma-separated hostname of each rank")
	f.BoolVar(&o.fromStart, "boot-from-start", false, "started by flux start (ignore terminal SIGINT)")
	f.IntVar(&o.bootListen, "boot-listen-fd", -1, "test boot: inherited overlay listening socket `FD`")
	f.CountVarP(&o.verbose, "verbose", "v", "log more of the broker's start-up (debug messages to stderr)")
	for _, n := range []string{"boot-rank", "boot-size", "boot-parent", "boot-hosts", "boot-from-start", "boot-listen-fd"} {
		f.MarkHidden(n)
	}
	return cmd
}

// runBroker turns the command line into instance options and runs the
// broker (internal/instance assembles it).
func runBroker(o brokerOptions, args []string) error {
	attrs, err := instance.ParseSetattrs(o.setattrs)
	if err != nil {
		return err
	}
	if _, ok := attrs["log-stderr-level"]; !ok && o.verbose > 0 {
		attrs["log-stderr-level"] = "7" // -v: the broker's debug messages too
	}
	if o.configPath == "" && !o.jobConfig {
		// flux-core's broker reads FLUX_CONF_DIR when -c is not given
		o.configPath = os.Getenv("FLUX_CONF_DIR")
	}
	opts := instance.Options{Attrs: attrs, ConfigPath: o.configPath, Conf: o.conf, JobConfig: o.jobConfig, InitialProgram: args}
	if o.bootRank >= 0 {
		p := &instance.Placement{Rank: o.bootRank, Size: o.bootSize, Parent: o.bootParent}
		if o.bootHosts != "" {
			p.Hosts = strings.Split(o.bootHosts, ",")
		}
		if o.bootListen >= 0 {
			p.Listener = os.NewFile(uintptr(o.bootListen), "tbon-listener")
		}
		opts.Test = p
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
	code, err := instance.Run(opts)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}
