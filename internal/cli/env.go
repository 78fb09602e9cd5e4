package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// flux env [COMMAND...]: the environment flux commands run in (the flux
// executable's directory first on PATH, the Python package on
// PYTHONPATH), printed as shell exports or given to COMMAND.

func newEnvCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "env [COMMAND [ARGS...]]",
		Short: "Print the Flux environment as shell exports, or run COMMAND in it",
		Long: `Without COMMAND, print export lines for PATH (with the flux executable's
directory first) and PYTHONPATH (with fluxgo's Python package first), for
eval "$(flux env)". With COMMAND, run it in that environment.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			env := fluxEnv(os.Environ())
			if len(args) == 0 {
				for _, kv := range env {
					name, val, _ := strings.Cut(kv, "=")
					if name == "PATH" || name == "PYTHONPATH" {
						fmt.Fprintf(cmd.OutOrStdout(), "export %s='%s'\n", name, strings.ReplaceAll(val, "'", `'\''`))
					}
				}
				return nil
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				for _, kv := range env { // look on the new PATH too
					if p, ok := strings.CutPrefix(kv, "PATH="); ok {
						os.Setenv("PATH", p)
					}
				}
				if path, err = exec.LookPath(args[0]); err != nil {
					return err
				}
			}
			return syscall.Exec(path, args, env)
		},
	}
}

// fluxEnv returns env with the flux executable's directory first on PATH
// and the Python package (when found) first on PYTHONPATH.
func fluxEnv(env []string) []string {
	if exe := fluxExecutable(); exe != "" {
		bindir := filepath.Dir(exe)
		out := make([]string, 0, len(env)+1)
		path := bindir
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				if v != "" && v != bindir && !strings.HasPrefix(v, bindir+":") {
					path = bindir + ":" + v
				} else if v != "" {
					path = v
				}
				continue
			}
			out = append(out, kv)
		}
		env = append(out, "PATH="+path)
	}
	if dir, err := pythonPackageDir(); err == nil {
		env = pythonEnv(env, dir)
	}
	return env
}
