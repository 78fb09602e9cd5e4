package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// execOptions are flux exec's options (flux-exec(1)).
type execOptions struct {
	rank      string
	exclude   string
	dir       string
	labelIO   bool
	noInput   bool
	verbose   bool
	quiet     bool
	bg        bool
	waitable  bool
	attach    bool
	label     string
	labelSet  bool
	service   string
	setopt    []string
	stdinFlow string
	withImp   bool
}

func newExecCmd() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [OPTIONS] COMMAND...",
		Short: "Execute processes across flux broker ranks",
		Long: `Run COMMAND on every broker of the instance (or the ranks chosen with
--rank and --exclude) as a direct child of the broker. Standard input is
broadcast to every copy; their standard output and error are copied to
ours. SIGINT and SIGTERM are forwarded to the remote processes; a second
Ctrl-C within 2 seconds forces flux exec to exit.

The exit code is the largest exit code of the remote processes (128+signal
for one a signal killed), or 68 when a rank is not in the instance.

With --bg the processes run in the background: flux exec prints
"RANK: PID" for each and exits; their output and exit go to the broker
log. --waitable keeps such a process as a zombie once it ends, until
"flux sproc wait" (or an attach) collects its status. --attach PID|LABEL
connects to a background process instead of starting one: its output from
then on is copied to ours and the exit code is its own; Ctrl-C detaches
and leaves it running.`,
		Args:                  cobra.ArbitraryArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.labelSet = cmd.Flags().Changed("label")
			if err := o.check(args); err != nil {
				return err
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			var stdin io.Reader = cmd.InOrStdin()
			if o.noInput {
				stdin = nil
			}
			code := runExec(context.Background(), h, o, args, execIO{
				env:    os.Environ(),
				stdin:  stdin,
				stdout: cmd.OutOrStdout(),
				stderr: cmd.ErrOrStderr(),
				sigs:   sigs,
			})
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false) // options after COMMAND are COMMAND's
	f := cmd.Flags()
	f.StringVarP(&o.rank, "rank", "r", "all", "target ranks in IDSET, or \"all\"")
	f.StringVarP(&o.exclude, "exclude", "x", "", "exclude ranks in IDSET")
	f.StringVarP(&o.dir, "dir", "d", "", "working directory of COMMAND (default: ours)")
	f.BoolVarP(&o.labelIO, "label-io", "l", false, "label lines of output with the source RANK")
	f.BoolVarP(&o.noInput, "noinput", "n", false, "do not forward stdin: remote stdin is at EOF")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "report each process's start and end")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not report per-rank errors and exit statuses")
	f.BoolVar(&o.bg, "bg", false, "run the processes in the background, print RANK: PID for each, and exit")
	f.BoolVar(&o.waitable, "waitable", false, "with --bg: keep each process as a zombie until its status is collected")
	f.BoolVar(&o.attach, "attach", false, "attach to the running background process PID|LABEL (the only argument)")
	f.StringVar(&o.label, "label", "", "name the remote process `LABEL` (unique on its broker)")
	f.StringVar(&o.service, "service", "rexec", "subprocess server `NAME`")
	f.StringArrayVar(&o.setopt, "setopt", nil, "set subprocess option `NAME=VALUE` (may be repeated)")
	f.StringVar(&o.stdinFlow, "stdin-flow", "", "stdin flow control, on|off (fluxgo's client always uses the server's credits)")
	f.BoolVar(&o.withImp, "with-imp", false, "run COMMAND under 'flux-imp run' (exec.imp from the configuration)")
	f.MarkHidden("service")
	f.MarkHidden("setopt")
	f.MarkHidden("stdin-flow")
	return cmd
}

// execIO is flux exec's environment: what the remote commands inherit,
// the streams, and the signals to forward.
type execIO struct {
	env            []string
	stdin          io.Reader // nil: --noinput
	stdout, stderr io.Writer
	sigs           <-chan os.Signal
}

// Exit codes (sysexits.h and the shell's conventions).
const (
	exNoHost    = 68  // EX_NOHOST: a target rank is not in the instance
	exNoExec    = 126 // found but could not run
	exNotFound  = 127 // no such command
	forceWindow = 2 * time.Second
)

// execTargets resolves --rank and --exclude against the instance size.
func execTargets(rank, exclude string, size uint) (idset.Set, error) {
	var targets idset.Set
	if rank == "all" {
		targets = idset.Range(0, size-1)
	} else {
		s, err := idset.Parse(rank)
		if err != nil {
			return idset.Set{}, fmt.Errorf("--rank: %w", err)
		}
		targets = s
	}
	if exclude != "" {
		x, err := idset.Parse(exclude)
		if err != nil {
			return idset.Set{}, fmt.Errorf("--exclude: %w", err)
		}
		targets = targets.Difference(x)
	}
	return targets, nil
}

// runExec runs argv on the chosen ranks and returns flux exec's exit
// code; it reports problems on io.stderr.
func runExec(ctx context.Context, h *flux.Handle, o execOptions, argv []string, eio execIO) int {
	errorf := func(format string, args ...any) {
		fmt.Fprintf(eio.stderr, "flux-exec: "+format+"\n", args...)
	}
	sizeStr, err := h.Attr(ctx, "size")
	if err != nil {
		errorf("%v", err)
		return 1
	}
	var size uint
	if _, err := fmt.Sscan(sizeStr, &size); err != nil || size == 0 {
		errorf("broker attribute size=%q is not a positive number", sizeStr)
		return 1
	}
	targets, err := execTargets(o.rank, o.exclude, size)
	if err != nil {
		errorf("%v", err)
		return 1
	}
	if last, ok := targets.Last(); ok && last >= size {
		errorf("Error: rank %d is not in the instance (size %d)", last, size)
		return exNoHost
	}
	if targets.Empty() {
		errorf("No targets specified")
		return 1
	}
	if o.attach {
		return runAttach(h, o, argv[0], targets, eio)
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			errorf("%v", err)
			return 1
		}
	} else if dir == "none" {
		dir = "" // the server's own working directory
	}
	env := make(map[string]string, len(eio.env))
	for _, kv := range eio.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	delete(env, "FLUX_PROXY_REMOTE")
	if _, ok := env["DBUS_SESSION_BUS_ADDRESS"]; !ok {
		// systemctl --user in the instance owner's session (as flux-core)
		if owner, err := h.Attr(ctx, "security.owner"); err == nil {
			env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/run/user/" + owner + "/bus"
		}
	}
	opts, err := execSetopts(o.setopt)
	if err != nil {
		errorf("%v", err)
		return 1
	}
	if o.withImp {
		imp, err := execImpPath(ctx, h)
		if err != nil {
			errorf("--with-imp: %v", err)
			return 1
		}
		argv = append([]string{imp, "run"}, argv...)
	}
	base := subprocess.Command{Args: argv, Env: env, Dir: dir, Opts: opts, Label: o.label, Service: o.service}
	if o.bg {
		return runBackground(ctx, h, base, o.waitable, targets, eio)
	}

	stdout := &syncWriter{w: eio.stdout}
	stderr := &syncWriter{w: eio.stderr}
	remotes := newExecRemotes(targets, stdout, stderr, o.labelIO)

	// Start every copy at once.
	start := time.Now()
	var wg sync.WaitGroup
	for _, rm := range remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := base
			c.Stdout, c.Stderr = rm.out, rm.err
			p, err := subprocess.Exec(ctx, h, uint32(rm.rank), c)
			if err != nil {
				rm.code = execErrorCode(err)
				errorf("Error: rank %d: %s: %s", rm.rank, argv[0], flux.ErrorText(err))
				return
			}
			rm.p = p
			if o.verbose {
				pid, _ := p.Pid()
				errorf("rank %d: started pid %d (%.3fs)", rm.rank, pid, time.Since(start).Seconds())
			}
		}()
	}
	wg.Wait()
	running := runningRemotes(remotes)

	// Broadcast stdin.
	if eio.stdin == nil {
		for _, p := range running {
			p.CloseStdin()
		}
	} else if len(running) > 0 {
		go forwardStdin(eio.stdin, running)
	}

	// Wait for the copies, forwarding signals meanwhile.
	allDone := waitRemotes(remotes, func(rm *execRemote, st subprocess.Status, err error) {
		if err != nil {
			errorf("Error: rank %d: %v", rm.rank, err)
		} else if o.verbose {
			errorf("rank %d: %s: %s", rm.rank, argv[0], st)
		}
	})
	var lastInt time.Time
	for done := false; !done; {
		select {
		case <-allDone:
			done = true
		case sig := <-eio.sigs:
			s, _ := sig.(syscall.Signal)
			if s == syscall.SIGINT {
				if !lastInt.IsZero() && time.Since(lastInt) < forceWindow {
					errorf("killing remote processes and exiting")
					signalAll(running, syscall.SIGKILL)
					return 128 + int(syscall.SIGINT)
				}
				lastInt = time.Now()
				errorf("forwarding SIGINT to remote processes (Ctrl-C again within %v to force exit)", forceWindow)
			}
			if s != 0 {
				signalAll(running, s)
			}
		}
	}
	return finishRemotes(remotes, o.quiet, eio.stderr)
}

// execErrorCode maps a failure to start a process to an exit code.
func execErrorCode(err error) int {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return exNotFound
	case errors.Is(err, syscall.EACCES):
		return exNoExec
	case errors.Is(err, syscall.EHOSTUNREACH):
		return exNoHost
	}
	return 1
}

// signalAll sends sig to every process without waiting for the answers
// (some will already have exited).
func signalAll(procs []*subprocess.Process, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Kill(ctx, sig)
		}()
	}
	go func() {
		wg.Wait()
		cancel()
	}()
}

// forwardStdin copies r to every process's stdin, then closes them. A
// process that ended just stops receiving.
func forwardStdin(r io.Reader, procs []*subprocess.Process) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			for _, p := range procs {
				p.Write(buf[:n]) // Write copies; ErrFinished is expected
			}
		}
		if err != nil {
			break
		}
	}
	for _, p := range procs {
		p.CloseStdin()
	}
}

// syncWriter serializes writes from the processes' goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// maxPartial is how much of an unterminated line is held back before it
// is written anyway.
const maxPartial = 64 * 1024

// lineWriter writes one rank's stream a whole line at a time, so lines
// from different ranks never interleave, optionally prefixed "RANK: ".
// It is used by one goroutine at a time (the process's delivery
// goroutine, then the waiter's flush).
type lineWriter struct {
	out     io.Writer
	prefix  []byte
	partial []byte
	scratch []byte
}

func newLineWriter(out io.Writer, rank uint, label bool) *lineWriter {
	w := &lineWriter{out: out}
	if label {
		w.prefix = fmt.Appendf(nil, "%d: ", rank)
	}
	return w
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		w.partial = append(w.partial, b...)
		if len(w.partial) >= maxPartial {
			w.emit(w.partial)
			w.partial = w.partial[:0]
		}
		return n, nil
	}
	whole := b[:i+1]
	if len(w.partial) > 0 {
		w.partial = append(w.partial, whole...)
		whole = w.partial
	}
	w.emit(whole)
	w.partial = append(w.partial[:0], b[i+1:]...)
	return n, nil
}

// emit writes complete lines (the last may lack its newline), labelled.
func (w *lineWriter) emit(lines []byte) {
	if len(w.prefix) == 0 {
		w.out.Write(lines)
		return
	}
	out := w.scratch[:0]
	for len(lines) > 0 {
		j := bytes.IndexByte(lines, '\n')
		line := lines
		if j >= 0 {
			line = lines[:j+1]
		}
		out = append(append(out, w.prefix...), line...)
		lines = lines[len(line):]
	}
	w.out.Write(out)
	w.scratch = out[:0]
}

// flush writes a last unterminated line.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
}
