package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestExecBackground runs flux exec --bg/--waitable/--attach and flux
// sproc against a real 2-broker instance, as flux-core's t0005 does.
func TestExecBackground(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	run := func(args ...string) testinstance.Result {
		t.Helper()
		return execRunEnv(t, inst, "", nil, args...)
	}
	must := func(code int, args ...string) testinstance.Result {
		t.Helper()
		r := run(args...)
		if r.Code != code {
			t.Fatalf("flux %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, code, r.Stdout, r.Stderr)
		}
		return r
	}
	bgPid := func(args ...string) string {
		t.Helper()
		out := must(0, append([]string{"exec", "-r", "0", "--bg"}, args...)...).Stdout
		rank, pid, ok := strings.Cut(strings.TrimSpace(out), ": ")
		if !ok || rank != "0" {
			t.Fatalf("--bg printed %q, want \"0: PID\"", out)
		}
		return pid
	}
	// dmesgHas polls the broker log for a line containing want.
	dmesgHas := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(must(0, "dmesg").Stdout, want) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("broker log never had %q", want)
	}
	ps := func() string { return must(0, "sproc", "ps", "-r", "0").Stdout }

	t.Run("bg runs, is listed, logs its end", func(t *testing.T) {
		pid := bgPid("sleep", "30")
		if !strings.Contains(ps(), pid+" R") {
			t.Fatalf("ps lacks %s R:\n%s", pid, ps())
		}
		must(0, "sproc", "kill", "-r", "0", "9", pid)
		dmesgHas("sleep[" + pid + "]: Killed by signal 9")
	})
	t.Run("bg output goes to the log", func(t *testing.T) {
		bgPid("sh", "-c", "echo some stdout; echo some stderr >&2; exit 1")
		dmesgHas(": some stdout")
		dmesgHas(": some stderr")
		dmesgHas(": Exit 1")
	})
	t.Run("bg with a missing command fails", func(t *testing.T) {
		r := must(1, "exec", "-r", "0", "--bg", "fluxgo-nosuch")
		if !strings.Contains(r.Stderr, "error launching process") {
			t.Fatalf("stderr %q", r.Stderr)
		}
	})
	t.Run("labels", func(t *testing.T) {
		must(0, "exec", "-r", "0", "--bg", "--label=foo", "sleep", "300")
		if !strings.Contains(ps(), "foo") {
			t.Fatalf("ps lacks label foo:\n%s", ps())
		}
		must(1, "exec", "-r", "0", "--label=foo", "true")
		must(0, "sproc", "kill", "-r", "0", "15", "foo")
		dmesgHas("foo: sleep[")
		r := must(1, "sproc", "kill", "-r", "0", "15", "badlabel")
		if !strings.Contains(r.Stderr, "label badlabel does not belong to any subprocess") {
			t.Fatalf("stderr %q", r.Stderr)
		}
	})
	t.Run("wait", func(t *testing.T) {
		must(1, "sproc", "wait", "-r", "0", "1234")
		must(1, "sproc", "wait", "-r", "0", "badlabel")
		pid := bgPid("--waitable", "sh", "-c", "echo kept; exit 3")
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(ps(), pid+" Z") {
			if time.Now().After(deadline) {
				t.Fatalf("no zombie %s:\n%s", pid, ps())
			}
			time.Sleep(20 * time.Millisecond)
		}
		r := must(3, "sproc", "wait", "--output", pid)
		if r.Stdout != "kept\n" {
			t.Fatalf("wait --output printed %q", r.Stdout)
		}
		must(1, "sproc", "wait", pid) // reaped already
		// a process that failed to start is no zombie
		must(1, "exec", "-r", "0", "--bg", "--waitable", "fluxgo-nosuch")
		if strings.Contains(ps(), "fluxgo-nosuch") {
			t.Fatalf("failed process listed:\n%s", ps())
		}
		// a non-waitable process cannot be waited on
		must(0, "exec", "-r", "0", "--bg", "--label=nw", "sleep", "300")
		must(1, "sproc", "wait", "nw")
		must(0, "sproc", "kill", "-r", "0", "9", "nw")
		// kill --wait returns the status
		must(0, "exec", "-r", "0", "--bg", "--waitable", "--label=kw", "sleep", "300")
		must(128+int(syscall.SIGTERM), "sproc", "kill", "--wait", "-r", "0", "15", "kw")
	})
	t.Run("attach", func(t *testing.T) {
		must(0, "exec", "-r", "0", "--bg", "--label=ar", "sh", "-c", "sleep 1; echo late; exit 4")
		if r := must(4, "exec", "-r", "0", "--attach", "ar"); r.Stdout != "late\n" {
			t.Fatalf("attach printed %q", r.Stdout)
		}
		must(0, "exec", "-r", "0", "--bg", "--waitable", "--label=az", "sh", "-c", "exit 7")
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(ps(), " Z  az") {
			if time.Now().After(deadline) {
				t.Fatalf("no zombie az:\n%s", ps())
			}
			time.Sleep(20 * time.Millisecond)
		}
		must(7, "exec", "-r", "0", "--attach", "az")
		must(127, "exec", "-r", "0", "--attach", "az") // reaped by the attach
		must(0, "exec", "-r", "0", "--bg", "--label=ac", "sh", "-c", "echo hi; exec 1>&-; sleep 1; exit 9")
		must(9, "exec", "-r", "0", "--attach", "ac")
	})
	t.Run("attach excludes a second client and a wait", func(t *testing.T) {
		must(0, "exec", "-r", "0", "--bg", "--waitable", "--label=busy", "sh", "-c", "while :; do echo tick >&2; sleep 0.1; done")
		var errb testinstance.Buffer
		first := execClient(inst, "exec", "-r", "0", "--attach", "busy")
		first.Stderr = &errb
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		defer first.Process.Kill()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(errb.String(), "tick") {
			if time.Now().After(deadline) {
				t.Fatalf("attached client saw nothing: %q", errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r := must(1, "exec", "-r", "0", "--attach", "busy"); !strings.Contains(r.Stderr, "already has a client attached") {
			t.Fatalf("second attach: %q", r.Stderr)
		}
		if r := must(1, "sproc", "wait", "-r", "0", "busy"); !strings.Contains(r.Stderr, "client attached") {
			t.Fatalf("wait while attached: %q", r.Stderr)
		}
		// SIGINT detaches, leaving the process running
		first.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- first.Wait() }()
		select {
		case err := <-done:
			if execExitCode(err) != 0 || !strings.Contains(errb.String(), "detached; use 'flux sproc kill busy' to signal it") {
				t.Fatalf("after SIGINT: %v, %q", err, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("SIGINT did not detach")
		}
		if !strings.Contains(ps(), "busy") {
			t.Fatalf("detached process gone:\n%s", ps())
		}
		// a client killed outright also leaves it running, and attachable
		second := execClient(inst, "exec", "-r", "0", "--attach", "busy")
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		second.Process.Kill()
		second.Wait()
		if !strings.Contains(ps(), "busy") {
			t.Fatalf("process gone after its client was killed:\n%s", ps())
		}
		must(128+int(syscall.SIGKILL), "sproc", "kill", "--wait", "-r", "0", "9", "busy")
	})
	t.Run("ps format", func(t *testing.T) {
		must(0, "exec", "-r", "1", "--bg", "--label=fmt", "sleep", "300")
		r := must(0, "sproc", "ps", "-r", "1", "-n", "-o", "{rank}:{label}:{cmd}")
		if strings.TrimSpace(r.Stdout) != "1:fmt:sleep" {
			t.Fatalf("ps -o printed %q", r.Stdout)
		}
		must(0, "sproc", "kill", "-r", "1", "9", "fmt")
	})
}

// TestExecShutdownWithZombies: an instance whose rexec holds zombies
// still shuts down at once.
func TestExecShutdownWithZombies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	bin := testinstance.Binary(t)
	script := fmt.Sprintf("%[1]s exec -r 0 --bg --waitable --label=z1 sleep 0 && %[1]s exec -r 0 --bg --waitable --label=z2 true && sleep 0.3 && %[1]s sproc ps | grep -q Z", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "start", "-s", "1", "sh", "-c", script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLUX_URI=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flux start: %v\n%s", err, out)
	}
}

// TestExecRemoteRank0Multiuser: with access.allow-guest-user, rank 0's
// rexec refuses requests that come from other brokers (flux-core's
// rule), and takes them again once guests are disallowed.
func TestExecRemoteRank0Multiuser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	load := func(toml string) {
		t.Helper()
		if r := inst.RunInput(t, toml, "config", "load"); r.Code != 0 {
			t.Fatalf("config load: %s", r.Stderr)
		}
	}
	nested := []string{"exec", "-n", "-r", "1", inst.Bin, "exec", "-n", "-r", "0", "true"}
	load("access.allow-guest-user = true\n")
	r := execRunEnv(t, inst, "", nil, nested...)
	if r.Code == 0 || !strings.Contains(r.Stderr, "Remote rexec requests are not allowed on rank 0") {
		t.Fatalf("remote exec to rank 0 in a multi-user instance: exit %d, %q", r.Code, r.Stderr)
	}
	if r := execRunEnv(t, inst, "", nil, "exec", "-n", "-r", "0", "true"); r.Code != 0 {
		t.Fatalf("local exec on rank 0: %s", r.Stderr)
	}
	load("access.allow-guest-user = false\n")
	if r := execRunEnv(t, inst, "", nil, nested...); r.Code != 0 {
		t.Fatalf("remote exec to rank 0, single user: %s", r.Stderr)
	}
}
