// Package pymod is the "pymod" broker module: a service module written in
// Python, as seed 004 loads one:
//
//	flux module load pymod --module=path/to/file.py [ARGS...]
//
// The module runs the file with fluxgo's Python bindings in a child
// process (flux python), connected to this broker: the file's
// mod_main(f, *args) gets a handle on which the service "pymod" is
// registered, so its message watchers receive pymod.* requests. The
// module ends when mod_main returns (an error if it raised) and, when the
// module is unloaded, the child is stopped (SIGTERM, then SIGKILL).
package pymod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the name pymod is loaded by.
const Name = "pymod"

// Module is the pymod module.
type Module struct{}

// New returns the module (a module.Factory).
func New() module.Module { return &Module{} }

// Name is the module's own service: the Python child registers "pymod"
// itself.
func (*Module) Name() string { return "pymod-host" }

// stopGrace is how long an unloaded child has between SIGTERM and
// SIGKILL.
const stopGrace = 5 * time.Second

// Run starts the Python file and waits for it.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	path, rest, err := parseArgs(args)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("pymod: --module=%s: %w", path, err)
	}
	uri, err := h.Attr(ctx, "local-uri")
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pymod: %w", err)
	}
	cmd := exec.Command(exe, append([]string{"python", "-m", "flux.pymod", path}, rest...)...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// the runner writes a byte here once mod_main first runs its
	// reactor, with "pymod" registered: the module counts as loaded then
	// (as flux-core's modules do once they enter their reactor), so a
	// request right after flux module load finds the service, and a
	// mod_main that raises before it makes flux module load fail
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pymod: %w", err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Env = append(cmd.Env, "FLUXGO_PYMOD_READY_FD=3")
	if err := cmd.Start(); err != nil {
		readyW.Close()
		return fmt.Errorf("pymod: %w", err)
	}
	readyW.Close()
	done := make(chan error, 1)
	serveCtx, stop := context.WithCancel(ctx)
	go func() {
		done <- cmd.Wait()
		stop()
	}()
	up := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := ready.Read(b[:]) // a byte, or EOF when the child ends first
		up <- n == 1
	}()
	started := false
	select {
	case started = <-up:
	case <-serveCtx.Done():
	}
	if !started && ctx.Err() == nil {
		// the child ended before it was up (mod_main raised at once, or
		// the file did not import): flux module load fails with it, as
		// for a module whose mod_main fails before it runs
		if err := <-done; err != nil {
			return fmt.Errorf("pymod %s: %w", path, err)
		}
		return nil // mod_main returned at once: done, not failed
	}
	h.Serve(serveCtx) // the module is up while the child runs
	stop()
	if ctx.Err() == nil { // the child ended: mod_main returned or raised
		if err := <-done; err != nil {
			return fmt.Errorf("pymod %s: %w", path, err)
		}
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopGrace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	return nil
}

// parseArgs takes --module=PATH (or --module PATH) and the arguments
// for mod_main.
func parseArgs(args []string) (string, []string, error) {
	var path string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--module="):
			path = strings.TrimPrefix(a, "--module=")
		case a == "--module" && i+1 < len(args):
			path = args[i+1]
			i++
		default:
			rest = append(rest, a)
		}
	}
	if path == "" {
		return "", nil, errors.New("pymod: --module=PATH (a Python file with mod_main) is required")
	}
	return path, rest, nil
}
