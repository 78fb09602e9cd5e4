package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/instance"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/taskmap"
)

type startOptions struct {
	changed     map[string]bool // the options given on the command line
	conf        []string
	testSize    int
	brokerOpts  []string
	setattrs    []string
	configPath  string
	testHosts   string
	exitTimeout string
	verbose     int
	noexec      bool
	exitMode    string // leader, any
	startMode   string // all, leader
	rundir      string // --rundir: made if missing, removed if made
	testRundir  string // --test-rundir: must exist
	rundirClean bool   // --test-rundir-cleanup
	pmiClique   string
	wrap        string
}

func newStartCmd() *cobra.Command {
	var o startOptions
	cmd := &cobra.Command{
		Use:   "start [OPTIONS] [COMMAND...]",
		Short: "Bootstrap a Flux instance and run COMMAND (or a shell) in it",
		Long: `flux start launches a Flux instance and runs COMMAND as its initial
program on rank 0; the instance shuts down when COMMAND exits, and flux start
exits with COMMAND's exit code. With no COMMAND an interactive shell runs.

With --test-size=N, N brokers are started on this host (a test instance
whose brokers talk over unix sockets). Otherwise a single broker starts,
taking its rank and size from PMI when launched by mpiexec, srun or a
parent Flux instance, or from a [bootstrap] table with --config-path.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.changed = map[string]bool{}
			cmd.Flags().Visit(func(f *pflag.Flag) { o.changed[f.Name] = true })
			return runStart(o, args, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.IntVarP(&o.testSize, "test-size", "s", 0, "start a test instance of `N` brokers on this host")
	f.StringArrayVarP(&o.brokerOpts, "broker-opts", "o", nil, "Pass `OPTIONS` (separated by commas) to each broker")
	f.StringArrayVarP(&o.setattrs, "setattr", "S", nil, "set broker attribute `NAME=VALUE` on every broker")
	f.StringVarP(&o.configPath, "config-path", "c", "", "broker configuration `PATH`")
	f.StringArrayVar(&o.conf, "conf", nil, "update the broker configuration from `VALUE` (KEY=VAL, inline JSON or TOML, or a file; may be repeated)")
	f.StringVar(&o.testHosts, "test-hosts", "", "Fake hostnames for the test brokers, a `HOSTLIST` (node[0-3] or node0,node1,...)")
	f.StringVar(&o.exitTimeout, "test-exit-timeout", "30s", "after rank 0 exits, wait this `FSD` for the other brokers")
	f.CountVarP(&o.verbose, "verbose", "v", "print what flux start does (may be given more than once)")
	f.BoolVarP(&o.noexec, "noexec", "X", false, "do not execute anything (with -v: show what would run)")
	f.StringVar(&o.rundir, "rundir", "", "(with --test-size) the instance's rundir `DIR`: made if missing, and then removed at the end")
	f.StringVar(&o.wrap, "wrap", "", "run each broker under the comma-separated `ARGS` (a debugger, valgrind ...)")
	f.StringVar(&o.exitMode, "test-exit-mode", "leader", "when the test instance ends: `leader` (rank 0 exits) or any (any broker exits)")
	f.StringVar(&o.startMode, "test-start-mode", "all", "which test brokers start: `all`, or leader (rank 0 only; the others are started later)")
	f.StringVar(&o.testRundir, "test-rundir", "", "use existing `DIR` as the test instance's rundir (kept unless --test-rundir-cleanup)")
	f.BoolVar(&o.rundirClean, "test-rundir-cleanup", false, "remove the --test-rundir directory when flux start ends")
	f.StringVar(&o.pmiClique, "test-pmi-clique", "single", "PMI clique `MODE`: single, per-broker, none, or an RFC 34 taskmap (fluxgo's test brokers do not bootstrap by PMI: checked, no other effect)")
	for _, name := range []string{"test-exit-mode", "test-start-mode", "test-rundir", "test-rundir-cleanup", "test-pmi-clique"} {
		f.MarkHidden(name) // testing options, hidden as flux-core's are
	}
	return cmd
}

func selfExe() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the flux executable: %w", err)
	}
	return exe, nil
}

// putSelfOnPath puts the directory of this flux executable first in PATH
// unless "flux" already finds it, so the initial program, rc scripts and
// jobs run the same flux as the instance (a build tree's bin/flux, say).
func putSelfOnPath(exe string) {
	if filepath.Base(exe) != "flux" {
		return // PATH could not name it
	}
	if found, err := exec.LookPath("flux"); err == nil {
		if a, err1 := filepath.EvalSymlinks(found); err1 == nil {
			if b, err2 := filepath.EvalSymlinks(exe); err2 == nil && a == b {
				return
			}
		}
	}
	path := filepath.Dir(exe)
	if old := os.Getenv("PATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	os.Setenv("PATH", path)
}

func runStart(o startOptions, args []string, stderr io.Writer) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	if _, err := os.Getwd(); err != nil {
		// run from a removed directory: nothing started could find it
		return fmt.Errorf("getcwd: %w", err)
	}
	putSelfOnPath(exe)
	implicitShell := len(args) == 0
	if implicitShell {
		shell := os.Getenv("SHELL")
		if shell == "" {
			shell = "/bin/sh"
		}
		args = []string{shell}
	}
	var common []string
	for _, s := range o.setattrs {
		common = append(common, "-S", s)
	}
	if o.configPath != "" {
		common = append(common, "-c", o.configPath)
	}
	for _, c := range o.conf {
		common = append(common, "--conf="+c)
	}
	for _, bo := range o.brokerOpts {
		// comma-separated, as flux-core's -o,-Sstatedir=DIR,-Sfoo=bar:
		// each item is one argument, spaces and all
		// (-o '-Sbroker.rc1_path=flux modprobe run rc1.py')
		for _, opt := range strings.Split(bo, ",") {
			if opt != "" {
				common = append(common, opt)
			}
		}
	}
	if err := o.checkTestOptions(); err != nil {
		return err
	}
	if o.testSize <= 0 {
		// A single broker: become it, so PMI and config boot see our
		// environment and the exit code passes straight through.
		argv := append([]string{exe, "broker"}, common...)
		if alt := execPathBroker(); alt != "" {
			argv = append([]string{alt}, argv[2:]...)
			exe = alt
		}
		if args[0] == "" || args[0][0] == '-' {
			argv = append(argv, "--") // a program named like an option
		}
		if o.verbose > 0 || o.noexec {
			// the broker's command, as flux-core prints it (the default
			// shell is the broker's initial program, not shown)
			shown := argv
			if !implicitShell {
				shown = append(shown[:len(shown):len(shown)], args...)
			}
			fmt.Fprintf(stderr, "flux-start: %s\n", strings.Join(shown, " "))
		}
		argv = append(argv, args...)
		if o.noexec {
			return nil
		}
		bin, wargv := o.wrapped(exe, argv[1:])
		if bin != exe {
			if p, err := exec.LookPath(bin); err == nil {
				bin = p
			}
			argv = append([]string{bin}, wargv...)
		}
		if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
			return fmt.Errorf("exec %s: %w", bin, err)
		}
		return nil
	}
	exitTimeout, err := fsd.ParseDuration(o.exitTimeout)
	if err != nil {
		return fmt.Errorf("--test-exit-timeout: %w", err)
	}
	if exitTimeout == 0 {
		exitTimeout = 1<<63 - 1 // 0: no limit, as flux-core's
	}
	if o.configPath != "" {
		// checked before any broker starts: a bad file is reported once
		// and nothing runs
		if _, err := instance.LoadConfig(o.configPath); err != nil {
			return err
		}
	}
	var hosts []string
	if o.testHosts != "" {
		hl, err := hostlist.Parse(o.testHosts)
		if err != nil {
			return fmt.Errorf("--test-hosts=%s: %v", o.testHosts, err)
		}
		hosts = hl.Hosts()
		if len(hosts) != o.testSize {
			return fmt.Errorf("--test-hosts lists %d hosts for --test-size=%d", len(hosts), o.testSize)
		}
	}
	return startTestInstance(exe, o, common, hosts, args, exitTimeout, stderr)
}

// startTestInstance runs size brokers on this host, rank 0 with the
// initial program, and waits for them all.
func startTestInstance(exe string, o startOptions, common, hosts, args []string, exitTimeout time.Duration, stderr io.Writer) error {
	// -Srundir=DIR names the brokers' parent directory (each broker's
	// is DIR/RANK): a stable one keeps the brokers' URIs across
	// restarts; otherwise a temporary one
	base, ownBase, removeAll := "", true, false
	// -S, --setattr and the same given through -o reach every broker:
	// the topology and rundir chosen here must agree with what the
	// brokers read (-o,-Stbon.fanout=16 is the usual spelling)
	attrsIn, err := instance.ParseSetattrs(setattrsIn(common))
	if err != nil {
		return err
	}
	switch {
	case o.testRundir != "":
		// it must exist; removed (all of it) only when asked
		if fi, err := os.Stat(o.testRundir); err != nil {
			var en syscall.Errno
			if errors.As(err, &en) {
				return fmt.Errorf("%s: %s", o.testRundir, strerror(en))
			}
			return err
		} else if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", o.testRundir)
		}
		base, ownBase, removeAll = o.testRundir, false, o.rundirClean
		common = withoutSetattr(common, "rundir")
	case o.rundir != "":
		// made if missing, and then removed at the end
		_, statErr := os.Stat(o.rundir)
		if err := os.MkdirAll(o.rundir, 0o755); err != nil {
			return fmt.Errorf("--rundir: %w", err)
		}
		base, ownBase = o.rundir, os.IsNotExist(statErr)
		common = withoutSetattr(common, "rundir")
	case attrsIn["rundir"] != "":
		dir := attrsIn["rundir"]
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("rundir: %w", err)
		}
		base, ownBase = dir, false
		common = withoutSetattr(common, "rundir")
	default:
		if base, err = os.MkdirTemp("", "flux-"); err != nil {
			return fmt.Errorf("creating rundir: %w", err)
		}
	}
	// what jobs that outlive the instance still use stays (a restart
	// from a statedir takes them back)
	defer func() {
		for rank := 0; rank < o.testSize; rank++ {
			broker.RemoveRundir(filepath.Join(base, strconv.Itoa(rank)))
		}
		if removeAll {
			os.RemoveAll(base)
		} else if ownBase {
			os.Remove(base)
		}
	}()
	// Other users must reach the brokers' sockets: the broker's
	// authentication decides whether they may connect (guests are
	// allowed into a root-owned instance).
	if err := os.Chmod(base, 0o755); err != nil {
		return fmt.Errorf("creating rundir: %w", err)
	}
	fanout := 2
	if v, ok := attrsIn["tbon.fanout"]; ok {
		if fanout, err = strconv.Atoi(v); err != nil || fanout < 1 {
			return fmt.Errorf("tbon.fanout=%q: must be a positive integer", v)
		}
	}
	size := o.testSize
	startURI := "local://" + filepath.Join(base, "start")
	// launch builds and starts rank's broker; start.run (startctl run)
	// calls it again for a rank that exited
	launch := func(rank int) (*exec.Cmd, error) {
		rundir := filepath.Join(base, strconv.Itoa(rank))
		argv := []string{"broker", "--boot-from-start",
			"--boot-rank", strconv.Itoa(rank), "--boot-size", strconv.Itoa(size),
			"-S", "rundir=" + rundir}
		if rank > 0 {
			parent := (rank - 1) / fanout
			argv = append(argv, "--boot-parent", "ipc://"+filepath.Join(base, strconv.Itoa(parent), "tbon"))
		}
		if hosts != nil {
			argv = append(argv, "--boot-hosts", strings.Join(hosts, ","))
		}
		argv = append(argv, common...)
		if rank == 0 {
			argv = append(argv, "--")
			argv = append(argv, args...)
		}
		var lnFile *os.File
		if rank*fanout+1 < size && !o.noexec {
			// Bind the overlay socket here so children can connect before
			// their parent broker has started.
			endpoint := filepath.Join(rundir, "tbon")
			if err := os.MkdirAll(rundir, 0o755); err != nil {
				return nil, err
			}
			removeStaleSocket(endpoint) // a broker killed with this rundir
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: endpoint, Net: "unix"})
			if err != nil {
				return nil, fmt.Errorf("overlay socket for rank %d: %w", rank, err)
			}
			lnFile, err = ln.File()
			ln.SetUnlinkOnClose(false)
			ln.Close()
			if err != nil {
				return nil, err
			}
			defer lnFile.Close()
			argv = append(argv[:2], append([]string{"--boot-listen-fd", "3", "-S", "tbon.endpoint=ipc://" + endpoint}, argv[2:]...)...)
		}
		brokerExe := exe
		if alt := execPathBroker(); alt != "" {
			brokerExe, argv = alt, argv[1:]
		}
		bin, argv := o.wrapped(brokerExe, argv)
		cmd := exec.Command(bin, argv...)
		if lnFile != nil {
			cmd.ExtraFiles = []*os.File{lnFile}
		}
		cmd.Env = append(os.Environ(), "FLUX_START_URI="+startURI)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if rank == 0 {
			cmd.Stdin = os.Stdin
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if o.verbose > 0 || o.noexec {
			fmt.Fprintf(stderr, "flux-start: %s %s\n", bin, strings.Join(argv, " "))
		}
		if o.noexec {
			return cmd, nil
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting broker rank %d: %w", rank, err)
		}
		return cmd, nil
	}
	if o.noexec {
		for rank := 0; rank < size; rank++ {
			if _, err := launch(rank); err != nil {
				return err
			}
		}
		return nil
	}
	procs := newStartProcs(size, launch)
	srv, err := procs.serveStart(filepath.Join(base, "start"))
	if err != nil {
		return err
	}
	defer func() {
		srv.Close()
		os.Remove(filepath.Join(base, "start"))
	}()
	for rank := 0; rank < size; rank++ {
		if rank > 0 && o.startMode == "leader" {
			continue // started by startctl run, if at all
		}
		if err := procs.start(rank); err != nil {
			procs.signal(syscall.SIGKILL, true)
			procs.waitAll()
			return err
		}
	}

	// Forward termination signals to the brokers; a terminal's SIGINT
	// already reaches the initial program directly.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGINT {
				continue
			}
			procs.signal(sig, true)
		}
	}()

	// Wait for rank 0 (any broker with --test-exit-mode=any), then give
	// the others exitTimeout to finish. A rank other than 0 that exits
	// may be started again (startctl run).
	for r := range procs.done {
		if r == 0 || o.exitMode == "any" {
			break
		}
	}
	allDone := make(chan struct{})
	go func() {
		procs.waitAll()
		close(allDone)
	}()
	// Rank 0 leaves last in a shutdown: a broker still running now is
	// cut off (rank 0 failed before it joined, say, and it would go on
	// retrying its parent): ask it to stop, then kill it after the
	// timeout.
	procs.signal(syscall.SIGTERM, o.exitMode == "any")
	select {
	case <-allDone:
	case <-time.After(exitTimeout):
		fmt.Fprintf(stderr, "flux-start: brokers did not exit within %v; killing them\n", exitTimeout)
		procs.signal(syscall.SIGKILL, true)
		<-allDone
	}
	if code := procs.exitCode(0); code != 0 {
		return exitCode(code)
	}
	return nil
}

// cmdExitCode converts a finished process to a shell-style exit code.
func cmdExitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// setattrsIn returns the NAME=VALUE of every attribute set in a broker
// command line, in order (-S X, -SX, --setattr X, --setattr=X).
func setattrsIn(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "-S" || a == "--setattr") && i+1 < len(args):
			out = append(out, args[i+1])
			i++
		case strings.HasPrefix(a, "--setattr="):
			out = append(out, strings.TrimPrefix(a, "--setattr="))
		case strings.HasPrefix(a, "-S") && len(a) > 2:
			out = append(out, a[2:])
		}
	}
	return out
}

// withoutSetattr drops the -S NAME=VALUE pairs of name from args.
func withoutSetattr(args []string, name string) []string {
	out := args[:0:0]
	for i := 0; i < len(args); i++ {
		if args[i] == "-S" && i+1 < len(args) && strings.HasPrefix(args[i+1], name+"=") {
			i++
			continue
		}
		if strings.HasPrefix(args[i], "-S"+name+"=") || strings.HasPrefix(args[i], "--setattr="+name+"=") {
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// removeStaleSocket removes the unix socket at path if nothing listens
// on it (its broker was killed): one in use is left for the bind to
// refuse.
func removeStaleSocket(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		os.Remove(path)
	}
}

// checkTestOptions refuses values of the testing options flux-core
// would refuse.
func (o startOptions) checkTestOptions() error {
	if o.changed["test-size"] && o.testSize < 1 {
		return fmt.Errorf("--test-size=%d: a test instance has at least 1 broker", o.testSize)
	}
	switch o.exitMode {
	case "leader", "any":
	default:
		return fmt.Errorf("--test-exit-mode=%s: must be leader or any", o.exitMode)
	}
	switch o.startMode {
	case "all", "leader":
	default:
		return fmt.Errorf("--test-start-mode=%s: must be all or leader", o.startMode)
	}
	switch o.pmiClique {
	case "single", "per-broker", "none":
	default:
		if _, err := taskmap.Decode([]byte(o.pmiClique)); err != nil {
			return fmt.Errorf("--test-pmi-clique=%s: not single, per-broker, none or an RFC 34 taskmap: %v", o.pmiClique, err)
		}
	}
	if o.testSize <= 0 {
		for name, set := range map[string]bool{"--rundir": o.rundir != "", "--test-rundir": o.testRundir != "",
			"--test-rundir-cleanup": o.rundirClean} {
			if set {
				return fmt.Errorf("%s is only for a test instance (--test-size)", name)
			}
		}
		for _, name := range []string{"test-pmi-clique", "test-hosts", "test-exit-timeout", "test-exit-mode", "test-start-mode"} {
			if o.changed[name] {
				return fmt.Errorf("--%s is only for a test instance (--test-size)", name)
			}
		}
	}
	if o.rundir != "" && o.testRundir != "" {
		return fmt.Errorf("--rundir and --test-rundir cannot be used together")
	}
	if o.rundirClean && o.testRundir == "" {
		return fmt.Errorf("--test-rundir-cleanup needs --test-rundir")
	}
	return nil
}

// wrapped returns the program and arguments that run a broker, under
// --wrap's comma-separated wrapper when given.
// execPathBroker returns an executable flux-broker in a directory of
// FLUX_EXEC_PATH_PREPEND, which flux start runs instead of its own
// broker (flux-core finds its broker on the exec path the same way), or
// "".
func execPathBroker() string {
	for _, d := range filepath.SplitList(os.Getenv("FLUX_EXEC_PATH_PREPEND")) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "flux-broker")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}

func (o startOptions) wrapped(exe string, argv []string) (string, []string) {
	if o.wrap == "" {
		return exe, argv
	}
	w := strings.Split(o.wrap, ",")
	return w[0], append(append(w[1:len(w):len(w)], exe), argv...)
}
