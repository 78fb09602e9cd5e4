package broker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"golang.org/x/sys/unix"
)

// Shell commands the broker runs at points of its life, as flux-core's
// runat does:
//
//   - rc1 (attribute broker.rc1_path), on every broker before it runs: a
//     command that loads the modules (flux modprobe run FILE, say) in
//     place of the built-in module list; empty: no modules at all.
//   - cleanup, on rank 0 after the initial program ends: the commands
//     pushed with runat.push (flux-core's test rc1 files push
//     "flux queue idle", "flux cancel --states RUN", ...).
//   - rc3 (broker.rc3_path), on every broker as it finalizes, once its
//     children are gone: a command that unloads the modules; whatever is
//     left is removed after it.
//
// Without broker.rc1_path and broker.rc3_path the broker loads and
// removes its configured modules itself (Config.Modules).

// rcCommand returns the command of attribute name (broker.rc1_path or
// broker.rc3_path) and whether it is set at all.
func (b *Broker) rcCommand(name string) (string, bool) {
	v, _, err := b.attrs.get(name)
	return v, err == nil
}

// shellPath is the shell that runs the rc and cleanup commands and a
// one-word initial program: $SHELL, else bash, else sh.
func shellPath() string {
	if s := os.Getenv("SHELL"); s != "" {
		return s
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// runShell runs command with $SHELL -c, its output logged line by line
// (stdout at info, stderr at error, as flux-core's runat logs it), and
// returns its exit code.
func (b *Broker) runShell(phase, command string) int {
	cmd := exec.Command(shellPath(), "-c", command)
	cmd.Env = append(os.Environ(), "FLUX_URI="+b.LocalURI())
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.log.Error(fmt.Sprintf("%s: %v", phase, err))
		return 1
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.log.Error(fmt.Sprintf("%s: %v", phase, err))
		return 1
	}
	if err := cmd.Start(); err != nil {
		b.log.Error(fmt.Sprintf("%s: %s: %v", phase, command, err))
		return 127
	}
	var wg sync.WaitGroup
	logLines := func(r io.Reader, errors bool) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 4096), 1<<20)
		for sc.Scan() {
			if errors {
				b.log.Error(phase + ": " + sc.Text())
			} else {
				b.log.Info(phase + ": " + sc.Text())
			}
		}
	}
	wg.Add(2)
	go logLines(stdout, false)
	go logLines(stderr, true)
	wg.Wait()
	err = cmd.Wait()
	code := exitStatus(cmd, err)
	if code != 0 {
		b.log.Error(fmt.Sprintf("%s: %q exited with code %d", phase, command, code))
	} else {
		b.log.Debug(fmt.Sprintf("%s: %q completed", phase, command))
	}
	return code
}

// runCleanup runs the commands pushed for "cleanup", in order; a
// failing one is logged and the rest still run.
func (b *Broker) runCleanup() {
	b.runatMu.Lock()
	cmds := b.cleanup
	b.cleanup = nil
	b.runatMu.Unlock()
	for _, c := range cmds {
		b.runShell("cleanup", c)
	}
}

// maxRunatCommands bounds what runat.push keeps.
const maxRunatCommands = 64

// pushCleanup adds commands to the cleanup phase (runat.push).
func (b *Broker) pushCleanup(name string, cmds []string) error {
	if name != "cleanup" {
		return fmt.Errorf("runat.push: %q: only the cleanup phase takes commands: %w", name, syscall.EINVAL)
	}
	b.runatMu.Lock()
	defer b.runatMu.Unlock()
	if len(b.cleanup)+len(cmds) > maxRunatCommands {
		return fmt.Errorf("runat.push: more than %d cleanup commands: %w", maxRunatCommands, syscall.E2BIG)
	}
	for _, c := range cmds {
		if c == "" {
			return fmt.Errorf("runat.push: empty command: %w", syscall.EINVAL)
		}
	}
	b.cleanup = append(b.cleanup, cmds...)
	return nil
}

// initialArgv is how the initial program runs, flux-core's rule: several
// words are executed as they are; one word that is a shell's name
// (an interactive shell) or a readable, executable regular file with no
// whitespace in its name is executed directly; any other one word is a
// shell command line, run with $SHELL -c.
func initialArgv(argv []string) []string {
	if len(argv) != 1 {
		return argv
	}
	a := argv[0]
	if isShellName(a) {
		return argv
	}
	if !strings.ContainsAny(a, " \t\n\r\v\f") {
		if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() && unix.Access(a, unix.X_OK|unix.R_OK) == nil {
			return argv
		}
	}
	return []string{shellPath(), "-c", a}
}

// isShellName reports whether cmd is one of /etc/shells (by path or
// name), true and false aside.
func isShellName(cmd string) bool {
	data, err := os.ReadFile("/etc/shells")
	if err != nil {
		return cmd == "sh" || cmd == "bash" || cmd == "/bin/sh" || cmd == "/bin/bash"
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		base := filepath.Base(line)
		if base == "true" || base == "false" {
			continue
		}
		if cmd == line || cmd == base {
			return true
		}
	}
	return false
}

// runatPush answers runat.push {name, commands}: commands for the
// cleanup phase, from the instance owner, on rank 0.
func (s *builtins) runatPush(r *flux.Request) {
	var req struct {
		Name     string   `json:"name"`
		Commands []string `json:"commands"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	if s.b.rank != 0 {
		r.Errorf(syscall.EINVAL, "runat.push: the cleanup phase runs on rank 0 only")
		return
	}
	if err := s.b.pushCleanup(req.Name, req.Commands); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

// runRCExtra runs the site's extra rc scripts of phase (rc1 or rc3): the
// executable files of rc1.d (rc3.d) in each directory of FLUX_RC_EXTRA,
// in name order, as flux-core's rc scripts do. An rc1 script that fails
// fails the broker's start; rc3 failures are reported.
func (b *Broker) runRCExtra(phase string) error {
	extra := os.Getenv("FLUX_RC_EXTRA")
	if extra == "" {
		return nil
	}
	var failed []string
	for _, dir := range filepath.SplitList(extra) {
		if dir == "" {
			continue
		}
		d := filepath.Join(dir, phase+".d")
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents { // ReadDir sorts by name
			p := filepath.Join(d, e.Name())
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() || unix.Access(p, unix.X_OK) != nil {
				continue
			}
			quoted := "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
			if code := b.runShell(phase, quoted); code != 0 {
				failed = append(failed, fmt.Sprintf("%s (exit %d)", p, code))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: FLUX_RC_EXTRA scripts failed: %s", phase, strings.Join(failed, ", "))
	}
	return nil
}
