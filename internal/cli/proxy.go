package cli

// flux proxy TARGET [COMMAND...]: run COMMAND (a shell by default) with
// FLUX_URI pointing at another instance: a URI, or a job that runs a
// Flux instance (flux batch, flux alloc), by id or id path. fluxgo's
// instances on this host are reached through their own local:// sockets,
// so no relay socket is needed: the command talks to the instance
// directly. flux proxy keeps a connection open while the command runs;
// if it is lost (the instance ended), it says so and sends SIGHUP and
// SIGCONT to the command (unless --nohup), then waits for it to exit.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/version"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

type proxyOptions struct {
	force     bool
	nohup     bool
	reconnect bool
}

func newProxyCmd() *cobra.Command {
	var o proxyOptions
	cmd := &cobra.Command{
		Use:   "proxy [OPTIONS] TARGET [COMMAND [ARGS...]]",
		Short: "Run a command (a shell by default) connected to another Flux instance",
		Long: `Connect to the Flux instance TARGET names (a URI, or a job id or id path
of a job running a Flux instance, e.g. ƒQBfmbm, jobid:ƒQBfmbm/ƒQ8ho35)
and run COMMAND, or $SHELL, with FLUX_URI set to it. When the connection
is lost the command gets SIGHUP and SIGCONT (not with --nohup).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProxy(o, args[0], args[1:], cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.BoolVarP(&o.force, "force", "f", false, "Connect to a broker of another version with a warning instead of an error")
	f.BoolVarP(&o.nohup, "nohup", "n", false, "Do not send SIGHUP and SIGCONT to the command when the connection is lost")
	f.BoolVar(&o.reconnect, "reconnect", false, "Accepted for compatibility; a lost connection is not re-established")
	return cmd
}

func runProxy(o proxyOptions, target string, command []string, errw io.Writer) error {
	ctx, cancel := cmdContext()
	defer cancel()
	uri, err := resolveTarget(ctx, target)
	if err != nil {
		return err
	}
	h, err := flux.Open(uri)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	defer h.Close()
	v, err := h.Attr(ctx, "version")
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if v != version.Version {
		if !o.force {
			return fmt.Errorf("%s runs version %s, this is %s (use --force to connect anyway)", target, v, version.Version)
		}
		fmt.Fprintf(errw, "flux-proxy: warning: %s runs version %s, this is %s\n", target, v, version.Version)
	}
	if len(command) == 0 {
		shell := os.Getenv("SHELL")
		if shell == "" {
			shell = "/bin/sh"
		}
		command = []string{shell}
	}
	c := exec.Command(command[0], command[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = append(os.Environ(), "FLUX_URI="+uri)
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	// the command handles terminal interrupts; flux proxy outlives them
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT)
	defer func() {
		signal.Stop(sigs)
		close(sigs)
	}()
	go func() {
		for range sigs {
		}
	}()
	select {
	case err = <-done:
	case <-h.Done():
		fmt.Fprintf(errw, "flux-proxy: lost connection to %s: %v\n", target, h.Err())
		if !o.nohup {
			c.Process.Signal(syscall.SIGHUP)
			c.Process.Signal(syscall.SIGCONT)
		}
		err = <-done
	}
	if code := cmdExitCode(c, err); code != 0 {
		return exitCode(code)
	}
	return nil
}
