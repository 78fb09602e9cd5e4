package cli

// flux alloc runs a new Flux instance as a job (see batch.go) with
// COMMAND, or an interactive shell, as its initial program, and stays
// attached to it: our stdin goes to the initial program, its output comes
// back, and flux alloc exits with its exit code. There is no
// pseudo-terminal: the shell reads a pipe (with -i when our stdin is a
// terminal, so it prompts), so line editing and job control are those of
// the local terminal's line discipline, and full-screen programs do not
// work. With --bg, flux alloc prints the jobid once the instance is
// ready and leaves it running.

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newAllocCmd() *cobra.Command {
	return instanceCommand("alloc [OPTIONS...] [COMMAND [ARGS...]]",
		"Allocate resources and start a new Flux instance, with COMMAND or a shell as its initial program",
		`Start a new Flux instance on the allocated resources with COMMAND (an
interactive shell if none) as its initial program, attach to it, and
exit with its exit code when it exits. With --bg, print the jobid once
the instance is ready to accept jobs and leave it running (until its
time limit, flux cancel, or flux shutdown inside it).

Resources are slots (-n, default 1 core each, -c cores per slot, -g
GPUs per slot) spread over -N nodes; one broker runs per node.`,
		"alloc", false, func(cmd *cobra.Command, args []string) error {
			return runAlloc(args, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
}

func runAlloc(args []string, stdin *os.File, out, errw io.Writer) error {
	o := newInstanceOptions("alloc")
	fs := instanceFlags("alloc", o, false)
	if err := fs.Parse(args); err != nil {
		return err
	}
	command := fs.Args()
	if len(command) == 0 && !o.bg {
		shell := os.Getenv("SHELL")
		if shell == "" {
			shell = "/bin/sh"
		}
		command = []string{shell}
		if isTerminal(stdin) {
			command = append(command, "-i")
		}
	}
	js, err := instanceJobspec(o, command)
	if err != nil {
		return err
	}
	id, err := submitInstance(o, js, out)
	if err != nil || id == 0 {
		return err
	}
	h, err := openHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	if o.bg {
		ctx, cancel := cmdContext()
		defer cancel()
		if _, err := jobURI(ctx, h, id); err != nil {
			return fmt.Errorf("%s: %w", id.String(), err)
		}
		fmt.Fprintln(out, id.String())
		return nil
	}
	code, err := attachJob(h, id, attachOptions{stdinRanks: "0"}, stdin, out, errw)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}
