package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Run starts the broker and blocks until it has shut down. It returns the
// instance's exit code: the initial program's on rank 0, 0 elsewhere
// unless the broker failed.
func (b *Broker) Run() (int, error) {
	defer b.cancel()
	defer b.coarse.stop()
	if b.rmRundir {
		defer RemoveRundir(b.cfg.Rundir)
	}
	lc, err := listenLocal(b, b.localPath())
	if err != nil {
		return 1, err
	}
	b.local = lc
	go lc.serve()
	defer lc.close()

	b.svc = newBuiltins(b)
	if err := b.svc.start(); err != nil {
		return 1, err
	}

	// Every broker listens for children, a leaf too: a broker joining
	// beyond the instance's size connects to the rank the k-ary tree
	// makes its parent (resize.go). A leaf's own socket failing is
	// logged, not fatal: the instance as booted does not need it.
	needBind := b.cfg.BindURI != "" || len(b.topo().children(b.rank)) > 0
	bind := b.cfg.BindURI
	if bind == "" {
		bind = "ipc://" + filepath.Join(b.cfg.Rundir, "tbon")
	}
	if err := b.overlay.listen(bind, b.cfg.ListenFile); err != nil {
		if needBind {
			return 1, err
		}
		b.log.Warn("overlay: no endpoint for brokers joining later", "err", err)
	} else if b.cfg.BindURI == "" {
		b.cfg.BindURI = bind
		b.attrs.set("tbon.endpoint", bind, attrImmutable)
	}
	if b.rank > 0 {
		if err := b.joinParent(); err != nil {
			b.overlay.close()
			return 1, err
		}
		if err := b.svc.syncConfig(); err != nil { // config.go
			b.log.Warn("keeping this broker's own configuration: fetching its parent's", "err", err)
		}
	}
	stopKA := make(chan struct{})
	go b.overlay.keepalive(stopKA)
	defer close(stopKA)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// rc1: load the configured modules, or run broker.rc1_path
	b.state.Store("init")
	var loaded []string
	rc1, haveRC1 := b.rcCommand("broker.rc1_path")
	if haveRC1 && rc1 != "" {
		if code := b.runShell("rc1", rc1); code != 0 {
			b.teardown()
			return 1, fmt.Errorf("rc1: %q exited with code %d", rc1, code)
		}
	}
	for _, spec := range b.cfg.Modules {
		if haveRC1 && !spec.Builtin {
			continue // rc1 loaded what it wanted
		}
		if !spec.onRank(b.rank) {
			continue
		}
		if spec.IfConfig != "" {
			if _, ok := b.svc.conf.get()[spec.IfConfig]; !ok {
				continue
			}
		}
		if err := b.modules.load(spec.Name, spec.Args); err != nil {
			b.log.Error(fmt.Sprintf("rc1: load %s: %v", spec.Name, err))
			b.teardown()
			return 1, fmt.Errorf("rc1: load module %s: %w", spec.Name, err)
		}
		loaded = append(loaded, spec.Name)
	}
	// A module that fails while it starts (a bad configuration value,
	// say) stops the broker, naming it: an instance without it would
	// look up and never run a job. A shutdown asked meanwhile (rank 0
	// whose own rc1 failed, a parent lost) ends the wait: a module that
	// waits on another broker may never finish starting.
	waitCtx, stopWait := context.WithCancel(b.ctx)
	type stopAsk struct {
		code    int
		overlay bool
	}
	asked := make(chan stopAsk, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case code := <-b.shutdownC:
			asked <- stopAsk{code: code}
		case code := <-b.overlay.shutdown:
			asked <- stopAsk{code: code, overlay: true}
		case <-waitCtx.Done():
			return
		}
		stopWait()
	}()
	rc1Err := b.waitModules(waitCtx, loaded)
	stopWait()
	<-watched
	select {
	case a := <-asked:
		b.exitCode = a.code
		if a.overlay && a.code < 0 {
			b.exitCode = 1
		}
		b.log.Info("shutdown asked while modules were starting")
		b.teardown()
		return b.exitCode, nil
	default:
	}
	if rc1Err != nil {
		b.log.Error(fmt.Sprintf("rc1: %v", rc1Err))
		b.teardown()
		return 1, fmt.Errorf("rc1: %w", rc1Err)
	}
	if err := b.runRCExtra("rc1"); err != nil {
		b.log.Error(err.Error())
		b.teardown()
		return 1, err
	}
	close(b.rc1Done)
	b.state.Store("quorum")
	if b.rank == 0 {
		select {
		case <-b.overlay.joined:
		case <-time.After(b.cfg.QuorumTimeout):
			b.log.Warn("quorum not reached: starting with brokers missing", "timeout", b.cfg.QuorumTimeout)
		case code := <-b.shutdownC:
			b.exitCode = code
			b.teardown()
			return b.exitCode, nil
		}
	}
	b.postStart() // startlog.go
	b.state.Store("run")
	close(b.running)
	b.log.Debug("broker running", "rank", b.rank, "size", b.Size())

	var progDone chan progResult
	var prog *exec.Cmd
	if b.rank == 0 && len(b.cfg.InitialProgram) > 0 {
		prog, progDone, err = b.startInitialProgram()
		if err != nil {
			b.log.Error(err.Error())
			b.exitCode = execFailureCode(err)
			fmt.Fprintf(os.Stderr, "flux-broker: %v\n", err)
			b.teardown()
			return b.exitCode, nil
		}
	}
	for {
		select {
		case r := <-progDone:
			b.exitCode = r.code
			// FLUX_DISABLE_JOB_CLEANUP (flux-core's): running jobs
			// outlive the end of the initial program, for the next
			// start from the statedir to take back
			if os.Getenv("FLUX_DISABLE_JOB_CLEANUP") != "" && b.cfg.Statedir != "" {
				b.keepJobs.Store(true)
			}
			if r.err != nil {
				b.log.Error(r.err.Error())
			}
			b.teardown()
			return b.exitCode, nil
		case code := <-b.shutdownC:
			b.exitCode = code
			if prog != nil {
				terminate(prog, progDone, 5*time.Second)
			}
			b.teardown()
			return b.exitCode, nil
		case code := <-b.overlay.shutdown:
			if code < 0 {
				b.exitCode = 1
			}
			b.teardown()
			return b.exitCode, nil
		case sig := <-sigs:
			b.log.Info(fmt.Sprintf("received %v, shutting down", sig))
			// a service manager stopping the instance: like flux
			// shutdown, running jobs outlive it when it can restart
			b.keepJobs.Store(b.cfg.Statedir != "")
			b.exitCode = 128 + int(sig.(syscall.Signal))
			if prog != nil {
				terminate(prog, progDone, 5*time.Second)
			}
			b.teardown()
			return b.exitCode, nil
		}
	}
}

// waitModules waits for each loaded module to have started, and returns
// the first one's failure; it returns nil early when ctx ends.
func (b *Broker) waitModules(ctx context.Context, loaded []string) error {
	for _, name := range loaded {
		for {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := b.modules.waitStarted(tctx, name)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, context.DeadlineExceeded) {
				b.log.Info(fmt.Sprintf("rc1: module %s is still starting", name))
				continue
			}
			return err
		}
	}
	return nil
}

// teardown runs the shutdown sequence: children first (so they can flush
// to us while we still serve), then rc3 here, then goodbye to our parent.
func (b *Broker) teardown() {
	b.state.Store("shutdown")
	if b.rank == 0 {
		b.runCleanup() // runat.go
	}
	b.drainJobs()
	b.postFinish() // startlog.go
	b.stopping.Store(true)
	b.overlay.shutdownChildren(b.exitCode, 30*time.Second)
	b.state.Store("finalize")
	if err := b.runRCExtra("rc3"); err != nil {
		b.log.Error(err.Error())
	}
	if rc3, ok := b.rcCommand("broker.rc3_path"); ok && rc3 != "" {
		b.runShell("rc3", rc3)
	}
	if dump, _, err := b.attrs.get("content.dump"); err == nil && dump != "" && b.rank == 0 {
		// flux-core's rc3: with everything but the content store
		// unloaded (their last state checkpointed), dump the KVS
		b.modules.removeAllBut(10*time.Second, func(name string) bool { return strings.HasPrefix(name, "content") })
		b.dumpContent(dump)
	}
	b.modules.removeAll(10 * time.Second)
	b.svc.stop()
	b.overlay.goodbye()
	b.overlay.close()
	b.state.Store("exit")
}

type progResult struct {
	code int
	err  error
}

func (b *Broker) startInitialProgram() (*exec.Cmd, chan progResult, error) {
	argv := initialArgv(b.cfg.InitialProgram) // runat.go
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "FLUX_URI="+b.LocalURI())
	// A broker that dies without its shutdown sequence (SIGKILL, a
	// crash) takes the initial program with it, as it does the tasks
	// and processes it runs for others: nothing is left orphaned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("initial program %s: %w", argv[0], err)
	}
	done := make(chan progResult, 1)
	go func() {
		err := cmd.Wait()
		done <- progResult{code: exitStatus(cmd, err)}
	}()
	return cmd, done, nil
}

// exitStatus converts a finished command to a shell-style exit code.
func exitStatus(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return 127
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return cmd.ProcessState.ExitCode()
}

// terminate stops a running initial program: SIGHUP, then SIGKILL after
// grace.
func terminate(cmd *exec.Cmd, done chan progResult, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGHUP)
	select {
	case r := <-done:
		done <- r
	case <-time.After(grace):
		cmd.Process.Kill()
	}
}

// drainTimeout bounds how long shutdown waits for running jobs to end.
const drainTimeout = 30 * time.Second

// drainJobs runs first in rank 0's shutdown: it stops every queue and
// cancels the running jobs, then waits (up to drainTimeout) for them to
// end, so each job's stored record is final (INACTIVE, with its
// exception, finish, release, free and clean) before the modules unload.
// flux-core's rc3 does the same with flux queue stop and flux cancel
// --states RUN. Pending jobs stay pending for the next start.
//
// An instance with a statedir that flux shutdown (without --cancel-jobs)
// or SIGTERM stops keeps its running jobs instead: their shells run on,
// and the next broker started from the statedir takes them back
// (docs/RESTART.md).
func (b *Broker) drainJobs() {
	if b.rank != 0 || !b.modules.isLoaded("job-manager") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	h := b.svc.h
	h.Call(ctx, "job-manager.queue-start", flux.NodeidAny, map[string]any{
		"all": true, "start": false, "nocheckpoint": true, "reason": "the instance is shutting down"}, nil)
	if b.keepJobs.Load() {
		var q struct {
			Running int `json:"running"`
		}
		if err := h.Call(ctx, "job-manager.alloc-query", flux.NodeidAny, nil, &q); err == nil && q.Running > 0 {
			b.log.Info(fmt.Sprintf("shutdown: %d running jobs keep running: the instance takes them back when it restarts from %s (flux shutdown --cancel-jobs ends them)",
				q.Running, b.cfg.Statedir))
		}
		return
	}
	const stateRun = 16 // RFC 21
	var raised struct {
		Count int `json:"count"`
	}
	err := h.Call(ctx, "job-manager.raiseall", flux.NodeidAny, map[string]any{
		"userid": -1, "states": stateRun, "severity": 0, "type": "cancel",
		"note": "the instance is shutting down"}, &raised)
	if err != nil || raised.Count == 0 {
		return
	}
	b.log.Info(fmt.Sprintf("shutdown: canceled %d running jobs, waiting for them to end", raised.Count))
	for {
		var q struct {
			Running int `json:"running"`
		}
		if err := h.Call(ctx, "job-manager.alloc-query", flux.NodeidAny, nil, &q); err != nil || q.Running == 0 {
			if ctx.Err() != nil {
				b.log.Warn(fmt.Sprintf("shutdown: %d jobs still running after %v", q.Running, drainTimeout))
			}
			return
		}
		select {
		case <-ctx.Done():
			b.log.Warn(fmt.Sprintf("shutdown: %d jobs still running after %v", q.Running, drainTimeout))
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// execFailureCode is the shell's exit code for a program that could not
// be started: 126 when it exists but cannot be run (permission, not an
// executable format), 127 otherwise.
func execFailureCode(err error) int {
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EPERM) {
		return 126
	}
	return 127
}

// dumpContent writes the KVS checkpoint to path (the content.dump
// attribute) with flux dump.
func (b *Broker) dumpContent(path string) {
	exe, err := os.Executable()
	if err != nil {
		b.log.Error("content.dump: " + err.Error())
		return
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	if code := b.runShell("rc3", q(exe)+" dump --quiet --checkpoint "+q(path)); code != 0 {
		b.log.Error(fmt.Sprintf("content.dump: flux dump %s exited with code %d", path, code))
	}
}

// rejoinWait bounds how long a broker retries a parent that says this
// rank is still leaving (EAGAIN): a broker that left and comes straight
// back may say hello before its parent has torn down the old link (its
// goodbye marks it offline first). A rank that is connected (EEXIST) is
// refused at once.
const rejoinWait = 5 * time.Second

// joinParent connects to the parent, retrying while it still tears
// down this rank's old link.
func (b *Broker) joinParent() error {
	deadline := time.Now().Add(rejoinWait)
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		err := b.overlay.connectParent(b.cfg.ParentURI)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}
