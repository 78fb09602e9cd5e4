package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func TestExecTargets(t *testing.T) {
	tests := []struct {
		rank, exclude string
		want          string
		err           bool
	}{
		{"all", "", "0-3", false},
		{"1-2", "", "1-2", false},
		{"all", "0", "1-3", false},
		{"0,2", "0-2", "", false},
		{"[1,3]", "", "1,3", false},
		{"7", "", "7", false}, // range checked by the caller (exit 68)
		{"1-", "", "", true},
		{"all", "x", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.rank+"/"+tc.exclude, func(t *testing.T) {
			got, err := execTargets(tc.rank, tc.exclude, 4)
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if err == nil && got.String() != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		label  bool
		writes []string
		want   []string // output after each write, then after flush
	}{
		{"whole lines", false, []string{"a\nb\n"}, []string{"a\nb\n", "a\nb\n"}},
		{"partial held", false, []string{"ab", "c\nd"}, []string{"", "abc\n", "abc\nd"}},
		{"labelled", true, []string{"x\ny", "z\n", "tail"}, []string{"5: x\n", "5: x\n5: yz\n", "5: x\n5: yz\n", "5: x\n5: yz\n5: tail"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := newLineWriter(&out, 5, tc.label)
			for i, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				if out.String() != tc.want[i] {
					t.Fatalf("after %q: %q, want %q", s, out.String(), tc.want[i])
				}
			}
			w.flush()
			if got := out.String(); got != tc.want[len(tc.want)-1] {
				t.Fatalf("after flush: %q", got)
			}
		})
	}
	// A long line without newline is not held forever.
	var out bytes.Buffer
	w := newLineWriter(&out, 0, false)
	w.Write(bytes.Repeat([]byte("x"), maxPartial+1))
	if out.Len() != maxPartial+1 {
		t.Fatalf("held %d bytes back", maxPartial+1-out.Len())
	}
}

func TestExecErrorCode(t *testing.T) {
	for err, want := range map[error]int{
		flux.NewError(syscall.ENOENT, "x: no such file"): 127,
		fmt.Errorf("x: %w", syscall.EACCES):              126,
		flux.NewError(syscall.EHOSTUNREACH, ""):          68,
		flux.NewError(syscall.EPERM, "not owner"):        1,
		errors.New("other"):                              1,
	} {
		if got := execErrorCode(err); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
}

// TestExecInstance runs flux exec against a real 4-broker instance.
func TestExecInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 4})

	t.Run("getattr rank everywhere", func(t *testing.T) {
		out := inst.MustRun(t, "exec", inst.Bin, "getattr", "rank")
		lines := strings.Fields(out)
		slices.Sort(lines)
		if !slices.Equal(lines, []string{"0", "1", "2", "3"}) {
			t.Fatalf("got %q", out)
		}
	})
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string // sorted lines, joined by "|"
		stderr string // substring
	}{
		{"exit code", "", []string{"-r", "1", "sh", "-c", "exit 3"}, 3, "", "1: Exit 3\n"},
		{"exit sets", "", []string{"sh", "-c", "exit 2"}, 2, "", "[0-3]: Exit 2\n"},
		{"signal set", "", []string{"-r", "0-1", "sh", "-c", "kill -11 $$"}, 139, "", "[0-1]: Segmentation fault\n"},
		{"not found", "", []string{"-r", "0", "./fluxgo-nosuch"}, 127, "", "Error: rank 0: ./fluxgo-nosuch: error launching process: No such file or directory"},
		{"not executable", "", []string{"-r", "0", "/dev/null"}, 126, "", "error launching process: Permission denied"},
		{"dir none", "", []string{"-r", "0", "-d", "none", "true"}, 0, "", ""},
		{"dbus default", "", []string{"-r", "0", "printenv", "DBUS_SESSION_BUS_ADDRESS"}, 0, "unix:path=/run/user/" + fmt.Sprint(os.Getuid()) + "/bus", ""},
		{"setopt", "", []string{"-r", "0", "--setopt=stdin_BUFSIZE=8192", "true"}, 0, "", ""},
		{"setopt malformed", "", []string{"-r", "0", "--setopt=x", "true"}, 1, "", "want NAME=VALUE"},
		{"with-imp unconfigured", "", []string{"--with-imp", "true"}, 1, "", "exec.imp path not found in config"},
		{"waitable needs bg", "", []string{"--waitable", "true"}, 1, "", "--waitable can only be used with --bg"},
		{"empty label", "", []string{"--label=", "true"}, 1, "", "LABEL must not be empty"},
		{"attach needs target", "", []string{"--attach"}, 1, "", "--attach requires a pid or label argument"},
		{"attach one target", "", []string{"--attach", "x", "y"}, 1, "", "single pid or label"},
		{"attach not with bg", "", []string{"--attach", "--bg", "x"}, 1, "", "cannot be used with --bg"},
		{"attach pid many ranks", "", []string{"-r", "0-1", "--attach", "123456"}, 1, "", "single target rank"},
		{"attach pid overflow is a label", "", []string{"-r", "0", "--attach", "4294967297"}, 127, "", "label 4294967297"},
		{"attach unknown", "", []string{"-r", "0", "--attach", "nosuchlabel"}, 127, "", ""},
		{"largest exit code", "", []string{"sh", "-c", "exit $(" + inst.Bin + " getattr rank)"}, 3, "", ""},
		{"quiet", "", []string{"-q", "-r", "1", "sh", "-c", "exit 3"}, 3, "", ""},
		{"signal", "", []string{"-r", "2", "sh", "-c", "kill -TERM $$"}, 143, "", "2: Terminated"},
		{"stdin", "hello\nworld\n", []string{"-r", "0-1", "cat"}, 0, "hello|hello|world|world", ""},
		{"noinput", "hello\n", []string{"-n", "cat"}, 0, "", ""},
		{"label-io", "", []string{"-l", "-x", "0,3", "sh", "-c", "echo a; echo b >&2"}, 0, "1: a|2: a", "1: b"},
		{"dir", "", []string{"-r", "3", "-d", "/", "pwd"}, 0, "/", ""},
		{"env", "", []string{"-r", "1", "sh", "-c", "echo $FLUXGO_EXEC_TEST"}, 0, "marker", ""},
		{"rank not in instance", "", []string{"-r", "2-5", "true"}, 68, "", "rank 5 is not in the instance"},
		{"no such command", "", []string{"-r", "1", "fluxgo-no-such-command"}, 127, "", "rank 1: fluxgo-no-such-command"},
		{"options after command", "", []string{"-r", "0", "echo", "-n", "-r"}, 0, "-r", ""},
		{"bad idset", "", []string{"-r", "1-", "true"}, 1, "", "--rank"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := execRunEnv(t, inst, tc.stdin, []string{"FLUXGO_EXEC_TEST=marker"}, append([]string{"exec"}, tc.args...)...)
			if res.Code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.Code, tc.code, res.Stdout, res.Stderr)
			}
			lines := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
			slices.Sort(lines)
			if got := strings.Join(lines, "|"); got != tc.stdout {
				t.Fatalf("stdout %q, want %q", res.Stdout, tc.stdout)
			}
			if !strings.Contains(res.Stderr, tc.stderr) {
				t.Fatalf("stderr %q lacks %q", res.Stderr, tc.stderr)
			}
		})
	}

	t.Run("killed client leaves no process", func(t *testing.T) {
		marker := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()%1000000)
		cmd := execClient(inst, "exec", "-n", "sleep", marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		execPgrep(t, "^sleep "+marker, 4)
		cmd.Process.Kill()
		cmd.Wait()
		execPgrep(t, "^sleep "+marker, 0)
	})

	t.Run("SIGINT is forwarded", func(t *testing.T) {
		var out testinstance.Buffer
		cmd := execClient(inst, "exec", "-n", "-r", "1-2", "sh", "-c", `trap "echo caught; exit 7" INT; echo ready; while :; do sleep 0.05; done`)
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		execWaitFor(t, func() bool { return strings.Count(out.String(), "ready") == 2 })
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		if code := execExitCode(err); code != 7 || strings.Count(out.String(), "caught") != 2 {
			t.Fatalf("exit %d (%v), output %q", code, err, out.String())
		}
	})

	t.Run("second Ctrl-C forces exit", func(t *testing.T) {
		marker := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()%1000000+1)
		var out testinstance.Buffer
		cmd := execClient(inst, "exec", "-n", "-r", "0", "sh", "-c", `trap "" INT; echo ready; exec sleep `+marker)
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		execWaitFor(t, func() bool { return strings.Contains(out.String(), "ready") })
		execPgrep(t, "^sleep "+marker, 1)
		cmd.Process.Signal(os.Interrupt)
		time.Sleep(100 * time.Millisecond)
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := execExitCode(err); code != 130 {
				t.Fatalf("exit %d, want 130", code)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("flux exec did not exit after two SIGINTs")
		}
		execPgrep(t, "^sleep "+marker, 0)
	})

	t.Run("guest refused", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to run a client as another user")
		}
		bin := execGuestBinary(t, inst)
		cmd := exec.Command(bin, "exec", "-r", "0", "true")
		cmd.Env = append(os.Environ(), "FLUX_URI="+inst.URI)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		if execExitCode(err) == 0 || !strings.Contains(errb.String(), "only the instance owner") {
			t.Fatalf("guest: %v, stderr %q", err, errb.String())
		}
	})
}

// TestExecShutdownKills checks that stopping the instance leaves none of
// flux exec's remote processes behind.
func TestExecShutdownKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	marker := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano()%1000000+2)
	cmd := execClient(inst, "exec", "-n", "sleep", marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	execPgrep(t, "^sleep "+marker, 2)
	inst.Stop()
	execPgrep(t, "^sleep "+marker, 0)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("flux exec did not end with its instance")
	}
}

// execRunEnv is inst.RunInput with extra environment.
func execRunEnv(t *testing.T, inst *testinstance.Instance, stdin string, env []string, args ...string) testinstance.Result {
	t.Helper()
	cmd := execClient(inst, args...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return testinstance.Result{Stdout: out.String(), Stderr: errb.String(), Code: execExitCode(err)}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("flux %s did not finish", strings.Join(args, " "))
	}
	return testinstance.Result{}
}

func execClient(inst *testinstance.Instance, args ...string) *exec.Cmd {
	cmd := exec.Command(inst.Bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLUX_URI=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "FLUX_URI="+inst.URI)
	return cmd
}

func execExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// execPgrep waits until exactly n processes match pattern.
func execPgrep(t *testing.T, pattern string, n int) {
	t.Helper()
	var got int
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := exec.Command("pgrep", "-f", pattern).Output()
		got = len(strings.Fields(string(out)))
		if got == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d processes match %q, want %d", got, pattern, n)
}

func execWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execGuestBinary makes the flux binary and the instance's sockets reachable
// by another user: a copy of the binary in a world-readable directory,
// and the instance's run directory opened up (the socket itself is
// world-writable; the instance, owned by root, allows guests).
func execGuestBinary(t *testing.T, inst *testinstance.Instance) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fluxgo-guest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	data, err := os.ReadFile(inst.Bin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "flux")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := strings.TrimPrefix(inst.URI, "local://")
	for d := filepath.Dir(sock); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	return bin
}

// A command waiting for an answer, reading its connection itself, ends
// cleanly on SIGINT (its context is canceled; it is not killed), and one
// that waits on a subscription too; flux kvs and flux job, which print
// their own errors, print none for it.
func TestInterruptedWait(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	for _, args := range [][]string{
		{"kvs", "get", "--waitcreate", "interrupt.never"},
		{"event", "sub", "interrupt.never"},
		{"job", "wait-event", held, "start"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := execClient(inst, args...)
			var errb testinstance.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// past signalDelay: the command sleeps, waiting, with no
			// timer left to run (a loaded machine can take far longer
			// than signalDelay to get it there)
			waitSleeping(t, cmd.Process.Pid)
			cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				// 0, or 130 (128+SIGINT) for a command cut short;
				// -1 would mean killed by the signal
				if code := execExitCode(err); code != 0 && code != 130 || errb.String() != "" {
					t.Fatalf("flux %s: exit %d (%v) after SIGINT, stderr %q; want 0 or 130 and no message", strings.Join(args, " "), code, err, errb.String())
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("flux %s did not end on SIGINT", strings.Join(args, " "))
			}
		})
	}
}

// waitSleeping waits until process pid has run for signalDelay and then
// stayed asleep (state S) without using CPU for 300 ms: it is waiting,
// and the timer that catches its signals has run.
func waitSleeping(t *testing.T, pid int) {
	t.Helper()
	read := func() (state byte, cpu string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		return f[0][0], f[11] + "/" + f[12] // state, utime/stime
	}
	time.Sleep(signalDelay)
	deadline := time.Now().Add(60 * time.Second)
	last, still := "", 0
	for still < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("process %d never settled asleep", pid)
		}
		time.Sleep(100 * time.Millisecond)
		state, cpu := read()
		if state == 'S' && cpu == last {
			still++
		} else {
			still = 0
		}
		last = cpu
	}
}
