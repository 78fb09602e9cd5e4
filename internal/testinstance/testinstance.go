// Package testinstance starts real fluxgo instances (flux start -s N with
// real broker processes) for integration tests, and runs the real flux
// command against them.
package testinstance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of the flux binary under test: $FLUX_TEST_BINARY
// (set by make check), or one built once per test process.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FLUX_TEST_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		// One directory per user, a binary per test process in it (a
		// test process has no hook that runs when it exits): those of
		// test processes that have ended are removed here.
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("fluxgo-test-bin-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		// tests run clients as other users too
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		removeStaleBinaries(dir)
		// named flux: tests put its directory on PATH
		own := filepath.Join(dir, strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(own, 0o755); err != nil {
			buildErr = err
			return
		}
		// laid out as an install: own/bin/flux finds the Python package
		// at own/python (a link to the tree's), as bin/flux does
		if err := os.MkdirAll(filepath.Join(own, "bin"), 0o755); err != nil {
			buildErr = err
			return
		}
		if err := os.Symlink(filepath.Join(root, "python"), filepath.Join(own, "python")); err != nil && !os.IsExist(err) {
			buildErr = err
			return
		}
		binPath = filepath.Join(own, "bin", "flux")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/flux")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building flux: %v", buildErr)
	}
	return binPath
}

// removeStaleBinaries removes the binaries in dir (PID/flux) built by
// test processes that no longer run.
func removeStaleBinaries(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// Options configure an instance.
type Options struct {
	Size  int               // number of brokers (default 1)
	Attrs map[string]string // -S NAME=VALUE for every broker
	Args  []string          // extra flux start arguments
	Env   []string          // extra environment
}

// Instance is a running test instance.
type Instance struct {
	t      testing.TB
	URI    string
	Bin    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	done   chan struct{}
	code   int
}

// Start launches an instance and waits until its initial program runs
// (so every broker has joined). It is stopped when the test ends.
func Start(t testing.TB, o Options) *Instance {
	t.Helper()
	bin := Binary(t)
	if o.Size == 0 {
		o.Size = 1
	}
	args := []string{"start", "-s", fmt.Sprint(o.Size)}
	for k, v := range o.Attrs {
		args = append(args, "-S", k+"="+v)
	}
	args = append(args, o.Args...)
	// The initial program reports the URI, then waits for stdin to close.
	args = append(args, "sh", "-c", `echo "$FLUX_URI"; exec cat >/dev/null`)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), o.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	inst := &Instance{t: t, Bin: bin, cmd: cmd, stdin: stdin, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: inst.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("flux start: %v", err)
	}
	go func() {
		err := cmd.Wait()
		if cmd.ProcessState != nil {
			inst.code = cmd.ProcessState.ExitCode()
		} else if err != nil {
			inst.code = -1
		}
		close(inst.done)
	}()
	uriC := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		uriC <- strings.TrimSpace(line)
		io.Copy(io.Discard, r)
	}()
	select {
	case inst.URI = <-uriC:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("instance did not start in 60s; stderr:\n%s", inst.Stderr())
	}
	if inst.URI == "" {
		<-inst.done
		t.Fatalf("instance exited before starting (code %d); stderr:\n%s", inst.code, inst.Stderr())
	}
	t.Cleanup(func() { inst.Stop() })
	return inst
}

// cleanEnv is the environment without an enclosing instance's variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLUX_URI=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Stderr returns what the instance wrote to stderr so far.
func (inst *Instance) Stderr() string {
	if lw, ok := inst.cmd.Stderr.(*lockedWriter); ok {
		lw.mu.Lock()
		defer lw.mu.Unlock()
	}
	return inst.stderr.String()
}

// Stop ends the initial program and waits for the instance to exit. It
// returns flux start's exit code.
func (inst *Instance) Stop() int {
	select {
	case <-inst.done:
		return inst.code
	default:
	}
	inst.stdin.Close()
	select {
	case <-inst.done:
	case <-time.After(60 * time.Second):
		inst.cmd.Process.Kill()
		<-inst.done
		inst.t.Errorf("instance did not stop within 60s; stderr:\n%s", inst.Stderr())
	}
	return inst.code
}

// Kill kills flux start with SIGKILL, and with it every broker (they die
// with it): a crash of the whole instance. It waits for flux start.
func (inst *Instance) Kill() {
	select {
	case <-inst.done:
		return
	default:
	}
	inst.cmd.Process.Kill()
	<-inst.done
}

// Done is closed when the instance has exited.
func (inst *Instance) Done() <-chan struct{} { return inst.done }

// Handle connects to rank 0's broker; it is closed when the test ends.
func (inst *Instance) Handle(t testing.TB) *flux.Handle {
	t.Helper()
	h, err := flux.Open(inst.URI)
	if err != nil {
		t.Fatalf("connect to %s: %v", inst.URI, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// Result is the outcome of a flux command.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the flux command with args against the instance.
func (inst *Instance) Run(t testing.TB, args ...string) Result {
	t.Helper()
	return inst.RunInput(t, "", args...)
}

// RunInput runs the flux command with stdin.
func (inst *Instance) RunInput(t testing.TB, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, inst.Bin, args...)
	cmd.Env = append(cleanEnv(), "FLUX_URI="+inst.URI)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errb.String()}
	if cmd.ProcessState != nil {
		res.Code = cmd.ProcessState.ExitCode()
	} else if err != nil {
		t.Fatalf("flux %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// MustRun runs a flux command and fails the test unless it exits 0.
func (inst *Instance) MustRun(t testing.TB, args ...string) string {
	t.Helper()
	r := inst.Run(t, args...)
	if r.Code != 0 {
		t.Fatalf("flux %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
