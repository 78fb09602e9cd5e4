package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// flux help's extras from flux-core: command lists from the JSON files
// FLUX_CMDHELP_PATTERN matches, and man pages (flux help CMD shows man
// flux-CMD when there is one; flux help flux_foo shows man flux_foo).

// maxCmdhelpFiles and maxCmdhelpSize bound what FLUX_CMDHELP_PATTERN
// reads.
const (
	maxCmdhelpFiles = 64
	maxCmdhelpSize  = 1 << 20
)

type cmdhelpSection struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Commands    []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"commands"`
}

// writeCmdhelp appends the sections of the FLUX_CMDHELP_PATTERN files:
// "DESCRIPTION" then "   NAME   DESCRIPTION" for each command.
func writeCmdhelp(w io.Writer) {
	pattern := os.Getenv("FLUX_CMDHELP_PATTERN")
	if pattern == "" {
		return
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		fmt.Fprintf(w, "flux-help: FLUX_CMDHELP_PATTERN=%s: %v\n", pattern, err)
		return
	}
	if len(files) > maxCmdhelpFiles {
		files = files[:maxCmdhelpFiles]
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) > maxCmdhelpSize {
			continue
		}
		var sections []cmdhelpSection
		if err := json.Unmarshal(data, &sections); err != nil {
			fmt.Fprintf(w, "flux-help: %s: %v\n", f, err)
			continue
		}
		for _, s := range sections {
			fmt.Fprintf(w, "\n%s\n", s.Description)
			for _, c := range s.Commands {
				fmt.Fprintf(w, "   %-18s %s\n", c.Name, c.Description)
			}
		}
	}
}

// manHelp shows the man page of name with man(1) when there is one; ok
// is false when there is none (or no man), and code is man's exit code.
func manHelp(name string, mustShow bool) (code int, ok bool) {
	man, err := exec.LookPath("man")
	if err != nil {
		return 0, false
	}
	if !mustShow {
		if exec.Command(man, "-w", name).Run() != nil {
			return 0, false
		}
	}
	cmd := exec.Command(man, name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), true
	}
	if err != nil {
		return 1, true
	}
	return 0, true
}

// execPathCommand runs "flux /path/to/prog ARGS": the program with the
// environment flux sets up for the commands it runs (flux-core's): a
// MANPATH that still finds the system's pages (a trailing ':'), and the
// rc path lists without repeats.
func execPathCommand(args []string) error {
	prog := args[0]
	env := os.Environ()
	setenv := func(k, v string) {
		for i, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				env[i] = k + "=" + v
				return
			}
		}
		env = append(env, k+"="+v)
	}
	if mp := os.Getenv("MANPATH"); !strings.HasSuffix(mp, ":") {
		setenv("MANPATH", mp+":")
	}
	for _, k := range []string{"FLUX_RC_EXTRA", "FLUX_SHELL_RC_PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			setenv(k, dedupePathList(v))
		}
	}
	if err := syscall.Exec(prog, args, env); err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	return nil
}

// dedupePathList drops repeated entries of a colon-separated list.
func dedupePathList(v string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range strings.Split(v, ":") {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return strings.Join(out, ":")
}
