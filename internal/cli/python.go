package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// newPythonCmd is flux python: run a Python interpreter with fluxgo's
// Python package (python/flux) on PYTHONPATH, so scripts written for
// flux-core's bindings ("import flux; h = flux.Flux()") run as is.
func newPythonCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "python [ARGS...]",
		Short: "Run python3 with the flux Python package on PYTHONPATH",
		Long: `Run python3 (or $FLUXGO_PYTHON) with ARGS, with fluxgo's Python package
on PYTHONPATH. The package directory is $FLUXGO_PYTHONPATH if set, else
the python directory next to the flux executable's directory (../python,
../lib/fluxgo/python or ../share/fluxgo/python relative to bin/flux).`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) >= 1 && args[0] == "--list-versions" {
				// flux-core: the flux-pythonX.Y commands on the exec path
				for _, name := range pythonVersions() {
					fmt.Fprintln(cmd.OutOrStdout(), name)
				}
				return nil
			}
			if len(args) >= 1 && (args[0] == "--get-path" || args[0] == "--path") {
				dir, err := pythonPackageDir()
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), dir)
				return nil
			}
			return runPython(cmd, args)
		},
	}
}

// pythonPackageDir finds the directory holding the flux Python package.
func pythonPackageDir() (string, error) {
	if dir := os.Getenv("FLUXGO_PYTHONPATH"); dir != "" {
		return dir, nil
	}
	exe := fluxExecutable()
	if exe == "" {
		return "", fmt.Errorf("cannot locate the flux executable; set FLUXGO_PYTHONPATH")
	}
	prefix := filepath.Dir(filepath.Dir(exe))
	var tried []string
	for _, rel := range []string{"python", "lib/fluxgo/python", "share/fluxgo/python"} {
		dir := filepath.Join(prefix, rel)
		if fi, err := os.Stat(filepath.Join(dir, "flux", "__init__.py")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	return "", fmt.Errorf("cannot find the flux Python package (tried %s); set FLUXGO_PYTHONPATH",
		strings.Join(tried, ", "))
}

// pythonEnv returns env with dir prepended to PYTHONPATH.
func pythonEnv(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	pp := dir
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if v != "" {
				pp = dir + string(os.PathListSeparator) + v
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PYTHONPATH="+pp)
}

func runPython(cmd *cobra.Command, args []string) error {
	dir, err := pythonPackageDir()
	if err != nil {
		return err
	}
	interp := os.Getenv("FLUXGO_PYTHON")
	if interp == "" {
		interp = "python3"
	}
	path, err := exec.LookPath(interp)
	if err != nil {
		return fmt.Errorf("%s not found: %w", interp, err)
	}
	c := exec.Command(path, args...)
	c.Env = pythonEnv(os.Environ(), dir)
	c.Stdin = cmd.InOrStdin()
	c.Stdout = cmd.OutOrStdout()
	c.Stderr = cmd.ErrOrStderr()
	err = c.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitCode(128 + int(ws.Signal()))
		}
		return exitCode(ee.ExitCode())
	}
	return err
}

// pythonVersions lists the executables named flux-python<digit>... in
// FLUX_EXEC_PATH_PREPEND's directories and beside the flux binary, less
// their "flux-" prefix (flux python --list-versions).
func pythonVersions() []string {
	var dirs []string
	if p := os.Getenv("FLUX_EXEC_PATH_PREPEND"); p != "" {
		dirs = append(dirs, filepath.SplitList(p)...)
	}
	if exe := fluxExecutable(); exe != "" {
		dirs = append(dirs, filepath.Dir(exe))
	}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			rest, ok := strings.CutPrefix(name, "flux-python")
			if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
				continue
			}
			if unix.Access(filepath.Join(d, name), unix.X_OK) != nil {
				continue
			}
			out = append(out, strings.TrimPrefix(name, "flux-"))
		}
	}
	return out
}
