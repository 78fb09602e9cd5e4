package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// testUser is a user account made for one test and removed after it.
type testUser struct {
	name      string
	uid, gid  uint32
	groups    []uint32
	home      string
	extraGID  uint32 // a supplementary group of its own
	extraName string
}

// newTestUser creates a user with a random name, a home directory (mode
// 0700) and one supplementary group; both go when the test ends.
func newTestUser(t *testing.T) *testUser {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "fgt" + hex.EncodeToString(b)
	run := func(argv ...string) {
		t.Helper()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	run("groupadd", name+"x")
	t.Cleanup(func() { exec.Command("groupdel", name+"x").Run() })
	run("useradd", "--create-home", "--user-group", "--shell", "/bin/sh", "--groups", name+"x", name)
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	tu := &testUser{name: name, home: u.HomeDir, extraName: name + "x"}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	tu.uid, tu.gid = uint32(uid), uint32(gid)
	gids, _ := u.GroupIds()
	for _, g := range gids {
		n, _ := strconv.ParseUint(g, 10, 32)
		tu.groups = append(tu.groups, uint32(n))
	}
	g, err := user.LookupGroup(name + "x")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseUint(g.Gid, 10, 32)
	tu.extraGID = uint32(n)
	if err := os.Chmod(tu.home, 0o700); err != nil {
		t.Fatal(err)
	}
	return tu
}

// publicCopy copies an executable into a directory every user can reach.
func publicCopy(t *testing.T, dir, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// asUser runs a program as u, in its home directory, against uri.
func asUser(t *testing.T, u *testUser, uri string, env []string, argv ...string) testinstance.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = u.home
	cmd.Env = append([]string{"FLUX_URI=" + uri, "HOME=" + u.home, "USER=" + u.name, "LOGNAME=" + u.name,
		"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := testinstance.Result{Stdout: out.String(), Stderr: errb.String()}
	if cmd.ProcessState == nil {
		t.Fatalf("%s as %s: %v", strings.Join(argv, " "), u.name, err)
	}
	res.Code = cmd.ProcessState.ExitCode()
	return res
}

// TestMultiUserIntegration runs an instance as root that lets guests in,
// with two users made for the test: each one's tasks run as that user,
// and neither can touch the other's job.
func TestMultiUserIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates users and runs the instance as root")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	alice, bob := newTestUser(t), newTestUser(t)
	pub, err := os.MkdirTemp("", "fluxgo-multiuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	os.Chmod(pub, 0o755)
	bin := publicCopy(t, pub, testinstance.Binary(t))
	helper := publicCopy(t, pub, os.Args[0])
	inst := testinstance.Start(t, testinstance.Options{Attrs: map[string]string{
		"access.allow-guest-user": "1", "job-list.private": "1"}})
	flux := func(u *testUser, args ...string) testinstance.Result {
		t.Helper()
		return asUser(t, u, inst.URI, nil, append([]string{bin}, args...)...)
	}
	must := func(u *testUser, args ...string) string {
		t.Helper()
		r := flux(u, args...)
		if r.Code != 0 {
			t.Fatalf("flux %s as %s: exit %d\n%s%s", strings.Join(args, " "), u.name, r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}

	t.Run("tasks-run-as-submitter", func(t *testing.T) {
		out := must(alice, "run", "sh", "-c", "id -u; id -g; id -G; pwd; echo $HOME")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 {
			t.Fatalf("output %q", out)
		}
		if lines[0] != fmt.Sprint(alice.uid) || lines[1] != fmt.Sprint(alice.gid) {
			t.Fatalf("task uid/gid %s/%s, want %d/%d", lines[0], lines[1], alice.uid, alice.gid)
		}
		groups := " " + lines[2] + " "
		if !strings.Contains(groups, fmt.Sprintf(" %d ", alice.extraGID)) || strings.Contains(groups, " 0 ") {
			t.Fatalf("task groups %q: want %s's (with %d), never root's", lines[2], alice.name, alice.extraGID)
		}
		if lines[3] != alice.home || lines[4] != alice.home {
			t.Fatalf("cwd %q, HOME %q, want %s", lines[3], lines[4], alice.home)
		}
		if out := must(bob, "run", "id", "-un"); strings.TrimSpace(out) != bob.name {
			t.Fatalf("bob's task runs as %q", out)
		}
		// the job's temporary directory is the submitter's, and private
		out = must(alice, "run", "sh", "-c", `touch "$FLUX_JOB_TMPDIR/f" && stat -c '%u %a' "$FLUX_JOB_TMPDIR"`)
		if want := fmt.Sprintf("%d 700", alice.uid); strings.TrimSpace(out) != want {
			t.Fatalf("FLUX_JOB_TMPDIR owner and mode %q, want %q", out, want)
		}
	})

	t.Run("output-files-as-submitter", func(t *testing.T) {
		path := filepath.Join(alice.home, "out.txt")
		must(alice, "run", "--output="+path, "echo", "hello")
		b, err := os.ReadFile(path)
		if err != nil || string(b) != "hello\n" {
			t.Fatalf("output file: %q, %v", b, err)
		}
		var st syscall.Stat_t
		syscall.Stat(path, &st)
		if st.Uid != alice.uid || st.Gid != alice.gid {
			t.Fatalf("output file owned by %d:%d, want %d:%d", st.Uid, st.Gid, alice.uid, alice.gid)
		}
		// a root file alice may not write, and a directory she may not
		// create files in
		victim := filepath.Join(pub, "victim")
		os.WriteFile(victim, []byte("original\n"), 0o644)
		flux(alice, "run", "--output="+victim, "echo", "pwned")
		flux(alice, "run", "--output="+filepath.Join(pub, "new"), "echo", "pwned")
		b, _ = os.ReadFile(victim)
		syscall.Stat(victim, &st)
		if string(b) != "original\n" || st.Uid != 0 {
			t.Fatalf("root's file now %q owned by %d", b, st.Uid)
		}
		if _, err := os.Stat(filepath.Join(pub, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a job of alice's created a file in root's directory: %v", err)
		}
	})

	t.Run("unreachable-cwd", func(t *testing.T) {
		r := flux(bob, "run", "--cwd="+alice.home, "pwd")
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "/tmp" || !strings.Contains(r.Stderr, "cannot change to "+alice.home) {
			t.Fatalf("bob's job in alice's home: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("isolation", func(t *testing.T) {
		id := strings.TrimSpace(must(alice, "submit", "sleep", "300"))
		must(alice, "job", "wait-event", "-t", "30", id, "start")
		parsed, err := jobid.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		dothex, _ := parsed.Encode("dothex")
		denied := [][]string{
			{"job", "kill", id},
			{"cancel", id},
			{"job", "raise", id, "nope"},
			{"job", "attach", id},
			{"job", "info", id, "jobspec"},
			{"job", "info", id, "R"},
			{"job", "eventlog", id},
			{"job", "eventlog", "-p", "exec", id},
			{"job", "eventlog", "-p", "output", id},
			{"job", "urgency", id, "0"},
			{"kvs", "get", "job." + dothex + ".jobspec"},
			{"dmesg"},
			{"exec", "-r", "0", "true"},
		}
		for _, args := range denied {
			r := flux(bob, args...)
			if r.Code == 0 {
				t.Errorf("bob: flux %s succeeded on alice's job:\n%s", strings.Join(args, " "), r.Stdout)
				continue
			}
			if !strings.Contains(r.Stderr, "another user") && !strings.Contains(strings.ToLower(r.Stderr), "not permitted") &&
				!strings.Contains(r.Stderr, "owner") && !strings.Contains(r.Stderr, "their own jobs") {
				t.Errorf("bob: flux %s: want a permission error, got: %s", strings.Join(args, " "), r.Stderr)
			}
		}
		if out := must(bob, "jobs", "-A", "-n", "-o", "{id.f58}"); strings.Contains(out, id) {
			t.Errorf("job-list is private, yet bob sees alice's job: %q", out)
		}
		if out := must(alice, "jobs", "-A", "-n", "-o", "{id.f58}"); !strings.Contains(out, id) {
			t.Errorf("alice does not see her job: %q", out)
		}
		if out := inst.MustRun(t, "jobs", "-A", "-n", "-o", "{id.f58}"); !strings.Contains(out, id) {
			t.Errorf("the owner does not see alice's job: %q", out)
		}
		must(alice, "job", "info", id, "jobspec")
		// straight to the services, past the commands' own checks
		svc := fmt.Sprintf("%d-shell-%s", alice.uid, parsed.F58(true))
		rpcs := []struct{ topic, payload string }{
			{svc + ".stdin", `{"stream":"stdin","rank":"all","data":"x","eof":true}`},
			{"service.add", fmt.Sprintf(`{"service":"%d-shell-x"}`, alice.uid)},
			{"service.add", `{"service":"sched"}`},
			{"job-shell.kill", fmt.Sprintf(`{"id":%d,"signum":9}`, uint64(parsed))},
			{"job-exec.kill", fmt.Sprintf(`{"id":%d,"signum":9}`, uint64(parsed))},
			{"job-manager.raise", fmt.Sprintf(`{"id":%d,"type":"x","severity":0,"note":""}`, uint64(parsed))},
			{"log.dmesg", `{}`},
			{"job-shell.list", `{}`},
			{"job-exec.list", `{}`},
			{"job-manager.sched-ready", `{"mode":"single"}`},
		}
		for _, rpc := range rpcs {
			r := asUser(t, bob, inst.URI, []string{"FLUXGO_RPC_TOPIC=" + rpc.topic, "FLUXGO_RPC_PAYLOAD=" + rpc.payload},
				helper, "-test.run=^TestMultiUserRPCHelper$")
			if !strings.Contains(r.Stdout, "rpc: errno=1 ") {
				t.Errorf("bob: %s %s: want EPERM, got: %s%s", rpc.topic, rpc.payload, r.Stdout, r.Stderr)
			}
		}
		// the job is untouched by all that, and alice may end it
		if out := must(alice, "job", "eventlog", id); strings.Contains(out, "exception") {
			t.Fatalf("alice's job got an exception:\n%s", out)
		}
		must(alice, "cancel", id)
		must(alice, "job", "wait-event", "-t", "30", id, "clean")
	})

	t.Run("memory-limit", func(t *testing.T) {
		if _, err := shell.FindCgroupRoot(); err != nil {
			t.Skipf("no memory cgroup: %v", err)
		}
		r := flux(alice, "run", "-o", "memory=32M", "dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1")
		if r.Code == 0 || !strings.Contains(r.Stderr, "task 0 exceeded its memory limit of 32M") {
			t.Fatalf("job over its limit: exit %d stderr %q", r.Code, r.Stderr)
		}
		if out := must(alice, "run", "-o", "memory=64M", "dd", "if=/dev/zero", "of=/dev/null", "bs=8M", "count=2"); out != "" {
			t.Logf("dd under the limit: %q", out)
		}
	})
}

// TestMultiUserRPCHelper is run by TestMultiUserIntegration as another
// user: it sends one request and prints how it went.
func TestMultiUserRPCHelper(t *testing.T) {
	topic := os.Getenv("FLUXGO_RPC_TOPIC")
	if topic == "" {
		t.Skip("helper for TestMultiUserIntegration")
	}
	h, err := flux.Open("")
	if err != nil {
		fmt.Printf("rpc: open: %v\n", err)
		return
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flags := uint8(0)
	if topic == "log.dmesg" {
		flags = flux.Streaming
	}
	f, err := h.RPCRaw(topic, flux.NodeidAny, []byte(os.Getenv("FLUXGO_RPC_PAYLOAD")), flags)
	if err == nil {
		_, err = f.Get(ctx)
	}
	var fe *flux.Error
	if errors.As(err, &fe) {
		fmt.Printf("rpc: errno=%d %v\n", int(fe.Errno), err)
		return
	}
	fmt.Printf("rpc: %v\n", err)
}

// TestBindingIntegration checks CPU and GPU binding through the real
// commands: a configured inventory gives the node GPUs, and the tasks'
// CPU masks and CUDA_VISIBLE_DEVICES follow -o cpu-affinity and
// -o gpu-affinity.
func TestBindingIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	cpus := allowedCPUs(t)
	if len(cpus) < 2 || cpus[0] != 0 || cpus[1] != 1 {
		t.Skipf("needs CPUs 0 and 1, may use %v", cpus)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	inst := testinstance.Start(t, testinstance.Options{Attrs: map[string]string{
		"resource.config": fmt.Sprintf(`[{"hosts":%q,"cores":"0-1","gpus":"0-3"}]`, host)}})
	tests := []struct {
		args []string
		want string // task 0's line, then task 1's
	}{
		{[]string{"-o", "cpu-affinity=per-task"}, "0 0 0,1,2,3\n1 1 0,1,2,3\n"},
		{[]string{"-o", "cpu-affinity=off"}, fmt.Sprintf("0 %s 0,1,2,3\n1 %s 0,1,2,3\n", cpuList(cpus), cpuList(cpus))},
		{[]string{"-o", "gpu-affinity=per-task"}, "0 0-1 0,1\n1 0-1 2,3\n"},
		{[]string{"-o", "gpu-affinity=off"}, "0 0-1 -\n1 0-1 -\n"},
	}
	for _, tc := range tests {
		args := append([]string{"run", "-n2", "-g2", "--label-io"}, tc.args...)
		args = append(args, "sh", "-c", `echo $FLUX_TASK_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${CUDA_VISIBLE_DEVICES:--}`)
		out := inst.MustRun(t, args...)
		// --label-io prefixes "N: "; order the lines by task
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := make([]string, 2)
		for _, l := range lines {
			if _, rest, ok := strings.Cut(l, ": "); ok && len(rest) > 0 && (rest[0] == '0' || rest[0] == '1') {
				got[rest[0]-'0'] = rest + "\n"
			}
		}
		if strings.Join(got, "") != tc.want {
			t.Errorf("flux %s:\n%s\nwant\n%s", strings.Join(tc.args, " "), out, tc.want)
		}
	}
}

// allowedCPUs returns the CPUs this process may run on.
func allowedCPUs(t *testing.T) []int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			var out []int
			for _, part := range strings.Split(strings.TrimSpace(v), ",") {
				lo, hi, found := strings.Cut(part, "-")
				a, _ := strconv.Atoi(lo)
				z := a
				if found {
					z, _ = strconv.Atoi(hi)
				}
				for i := a; i <= z; i++ {
					out = append(out, i)
				}
			}
			return out
		}
	}
	return nil
}

// cpuList writes CPUs as the kernel's list format does for a range.
func cpuList(cpus []int) string {
	if len(cpus) > 1 && cpus[len(cpus)-1]-cpus[0] == len(cpus)-1 {
		return fmt.Sprintf("%d-%d", cpus[0], cpus[len(cpus)-1])
	}
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
