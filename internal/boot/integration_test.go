package boot_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/pmi"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// proc is a process started in its own process group; the test's
// cleanup kills the whole group, so nothing outlives the test.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *testinstance.Buffer
	stderr *testinstance.Buffer
	lines  chan string // stdout, line by line
	done   chan struct{}
	code   int
}

// baseEnv is the test's environment without anything that would make a
// broker join another instance.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "FLUX_URI" || k == "FLUX_FAKE_HOSTNAME" || strings.HasPrefix(k, "PMI_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func start(t *testing.T, name string, env []string, extra []*os.File, argv ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, stdout: &testinstance.Buffer{}, stderr: &testinstance.Buffer{},
		lines: make(chan string, 100), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(baseEnv(), env...)
	p.cmd.ExtraFiles = extra
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.stdout.Write([]byte(sc.Text() + "\n"))
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		<-readDone
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, p.stdout, name, p.stderr)
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v; stderr:\n%s", p.name, timeout, p.stderr)
		return -1
	}
}

// expectLine waits for a line of output.
func (p *proc) expectLine(want string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return
			}
		case <-p.done:
			p.t.Fatalf("%s exited (code %d) before printing %q; stderr:\n%s", p.name, p.code, want, p.stderr)
		case <-deadline:
			p.t.Fatalf("%s did not print %q within %v; stderr:\n%s", p.name, want, timeout, p.stderr)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func writeKey(t *testing.T, path string) {
	t.Helper()
	key, err := broker.GenerateKey("fluxgo-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func flux1(t *testing.T, bin, uri string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(baseEnv(), "FLUX_URI="+uri)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConfigBootTCP boots three brokers from one [bootstrap] config over
// TCP+TLS on loopback, each a real `flux broker -c conf` with its own
// FLUX_FAKE_HOSTNAME. With tbon.fanout = 1 the tree is a chain, so ranks
// 0 and 1 both bind (on distinct ports) and rank 2 is two hops away.
// Before the real rank 1 starts, an impostor holding a different key
// tries to join as rank 1 and is refused.
func TestConfigBootTCP(t *testing.T) {
	bin := testinstance.Binary(t)
	dir := t.TempDir()
	p0, p1 := freePort(t), freePort(t)
	conf := func(name, cert string) string {
		path := filepath.Join(dir, name)
		writeKey(t, filepath.Join(dir, cert))
		text := fmt.Sprintf(`[bootstrap]
curve_cert = %q
hosts = [
    { host = "fake0", bind = "tcp://127.0.0.1:%d", connect = "tcp://127.0.0.1:%d" },
    { host = "fake1", bind = "tcp://127.0.0.1:%d", connect = "tcp://127.0.0.1:%d" },
    { host = "fake2" },
]

[tbon]
fanout = 1
connect_timeout = "10s"
`, cert, p0, p0, p1, p1)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := conf("good.toml", "curve.cert") // relative: resolved against dir
	bad := conf("bad.toml", "other.cert")
	rundir := func(r int) string { return filepath.Join(dir, "r"+strconv.Itoa(r)) }
	uri := func(r int) string { return "local://" + filepath.Join(rundir(r), "local") }
	broker := func(r int, confPath string, prog ...string) *proc {
		argv := []string{bin, "broker", "-c", confPath, "-S", "rundir=" + rundir(r), "-S", "tbon.timeout=10s"}
		if len(prog) > 0 {
			argv = append(append(argv, "--"), prog...)
		}
		return start(t, fmt.Sprintf("rank %d (%s)", r, filepath.Base(confPath)), []string{"FLUX_FAKE_HOSTNAME=fake" + strconv.Itoa(r)}, nil, argv...)
	}

	r0 := broker(0, good, "sh", "-c", "echo up; exec cat >/dev/null")

	// The impostor: right hostname and port, wrong key.
	impostor := broker(1, bad)
	if code := impostor.wait(45 * time.Second); code == 0 {
		t.Fatal("a broker with another key joined")
	}
	if !strings.Contains(impostor.stderr.String(), "certificate mismatch") {
		t.Errorf("impostor's error does not explain the refusal:\n%s", impostor.stderr)
	}
	// Rank 0 logged the refused connection.
	h, err := flux.Open(uri(0))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// (its side of the failed handshake may end just after the impostor's)
	for try := 0; !dmesgHas(t, h, "overlay: refusing connection"); try++ {
		if try == 100 {
			t.Error("rank 0's log does not show the refused connection")
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	os.RemoveAll(rundir(1))

	r1 := broker(1, good)
	r2 := broker(2, good)
	r0.expectLine("up", 60*time.Second)

	if got := flux1(t, bin, uri(0), "getattr", "size"); got != "3" {
		t.Errorf("size = %q", got)
	}
	if got := flux1(t, bin, uri(0), "getattr", "hostlist"); got != "fake[0-2]" {
		t.Errorf("hostlist = %q", got)
	}
	if got := flux1(t, bin, uri(0), "getattr", "broker.boot-method"); got != "config" {
		t.Errorf("broker.boot-method = %q", got)
	}
	if got := flux1(t, bin, uri(1), "getattr", "tbon.endpoint"); got != fmt.Sprintf("tcp://127.0.0.1:%d", p1) {
		t.Errorf("rank 1 tbon.endpoint = %q", got)
	}
	for name, want := range map[string]string{"rank": "2", "hostname": "fake2", "tbon.parent-endpoint": fmt.Sprintf("tcp://127.0.0.1:%d", p1)} {
		var resp struct {
			Value string `json:"value"`
		}
		if err := h.Call(ctxT(t), "attr.get", 2, map[string]string{"name": name}, &resp); err != nil {
			t.Fatalf("attr.get %s on rank 2: %v", name, err)
		}
		if resp.Value != want {
			t.Errorf("rank 2 %s = %q, want %q", name, resp.Value, want)
		}
	}
	h.Close()

	r0.stdin.Close()
	for _, p := range []*proc{r0, r1, r2} {
		if code := p.wait(60 * time.Second); code != 0 {
			t.Errorf("%s exited %d:\n%s", p.name, code, p.stderr)
		}
	}
}

func dmesgHas(t *testing.T, h *flux.Handle, text string) bool {
	t.Helper()
	f, err := h.RPC("log.dmesg", flux.NodeidAny, map[string]any{"follow": false}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		m, err := f.Next(ctxT(t))
		if err != nil {
			break
		}
		var e struct {
			Message string `json:"message"`
		}
		m.UnmarshalPayload(&e)
		if strings.Contains(e.Message, text) {
			found = true
		}
	}
	return found
}

// pmiJob starts size real brokers as a process manager would: each gets
// one end of a socketpair as fd 3 (PMI_FD=3, PMI_RANK, PMI_SIZE) and this
// test serves PMI-1 on the other end.
type pmiJob struct {
	procs    []*proc
	sessions chan error
}

func startPMIJob(t *testing.T, bin string, size int, env func(r int) []string, args []string, prog []string) *pmiJob {
	t.Helper()
	s := &pmi.Server{Info: pmi.Info{Size: size, KVSName: "test-job"}, KVS: pmi.NewMemKVS(size)}
	j := &pmiJob{sessions: make(chan error, size)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for r := 0; r < size; r++ {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		child := os.NewFile(uintptr(fds[0]), "pmi-child")
		sf := os.NewFile(uintptr(fds[1]), "pmi-server")
		sc, err := net.FileConn(sf)
		sf.Close()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			j.sessions <- s.ServeConn(ctx, sc, r)
			sc.Close()
		}()
		argv := append([]string{bin, "broker"}, args...)
		if r == 0 && len(prog) > 0 {
			argv = append(append(argv, "--"), prog...)
		}
		e := append([]string{"PMI_FD=3", "PMI_RANK=" + strconv.Itoa(r), "PMI_SIZE=" + strconv.Itoa(size)}, env(r)...)
		j.procs = append(j.procs, start(t, fmt.Sprintf("pmi rank %d", r), e, []*os.File{child}, argv...))
		child.Close()
	}
	return j
}

func (j *pmiJob) wait(t *testing.T) []int {
	t.Helper()
	codes := make([]int, len(j.procs))
	for r, p := range j.procs {
		codes[r] = p.wait(60 * time.Second)
	}
	return codes
}

// TestPMIBootBrokers boots real brokers through this package's own PMI
// server: on one host (ipc://), across fake hosts with a key (tcp://),
// and across fake hosts without one (every broker refuses to start).
func TestPMIBootBrokers(t *testing.T) {
	bin := testinstance.Binary(t)
	prog := []string{"sh", "-c", fmt.Sprintf("for a in size hostlist broker.boot-method tbon.endpoint; do %q getattr $a; done", bin)}

	t.Run("one host ipc", func(t *testing.T) {
		j := startPMIJob(t, bin, 3, func(int) []string { return []string{"FLUX_FAKE_HOSTNAME=samehost"} }, nil, prog)
		codes := j.wait(t)
		for r, c := range codes {
			if c != 0 {
				t.Errorf("rank %d exited %d:\n%s", r, c, j.procs[r].stderr)
			}
		}
		out := strings.Split(strings.TrimSpace(j.procs[0].stdout.String()), "\n")
		if len(out) != 4 || out[0] != "3" || out[1] != "samehost,samehost,samehost" || out[2] != "pmi" || !strings.HasPrefix(out[3], "ipc://") {
			t.Errorf("rank 0 printed %q", out)
		}
		for range codes {
			if err := <-j.sessions; err != nil {
				t.Errorf("PMI session: %v", err)
			}
		}
	})

	t.Run("hosts tcp", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "curve.cert")
		writeKey(t, key)
		j := startPMIJob(t, bin, 3, func(r int) []string { return []string{"FLUX_FAKE_HOSTNAME=host" + strconv.Itoa(r)} },
			[]string{"-S", "tbon.cert=" + key, "-S", "tbon.interface-hint=127.0.0.0/8"}, prog)
		codes := j.wait(t)
		for r, c := range codes {
			if c != 0 {
				t.Errorf("rank %d exited %d:\n%s", r, c, j.procs[r].stderr)
			}
		}
		out := strings.Split(strings.TrimSpace(j.procs[0].stdout.String()), "\n")
		if len(out) != 4 || out[0] != "3" || out[1] != "host[0-2]" || !strings.HasPrefix(out[3], "tcp://127.0.0.1:") {
			t.Errorf("rank 0 printed %q", out)
		}
	})

	t.Run("hosts without key", func(t *testing.T) {
		j := startPMIJob(t, bin, 3, func(r int) []string { return []string{"FLUX_FAKE_HOSTNAME=host" + strconv.Itoa(r)} }, nil, prog)
		for r, c := range j.wait(t) {
			if c == 0 {
				t.Errorf("rank %d started without a key", r)
			}
			if msg := j.procs[r].stderr.String(); !strings.Contains(msg, "tbon.cert=PATH") {
				t.Errorf("rank %d's error does not say what to do:\n%s", r, msg)
			}
		}
	})
}

// TestMPICH launches an instance with MPICH's Hydra process manager:
// four brokers wire up through Hydra's PMI-1 and only rank 0 runs the
// initial program, so "4" is printed once.
func TestMPICH(t *testing.T) {
	mpiexec, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("mpiexec.hydra not found: install the Debian package mpich to run this test")
	}
	bin := testinstance.Binary(t)
	p := start(t, "mpiexec.hydra", nil, nil, mpiexec, "-n", "4", bin, "start", bin, "getattr", "size")
	p.stdin.Close()
	if code := p.wait(120 * time.Second); code != 0 {
		t.Fatalf("mpiexec exited %d:\n%s", code, p.stderr)
	}
	if got := p.stdout.String(); got != "4\n" {
		t.Fatalf("stdout %q, want \"4\\n\"", got)
	}
}

// TestStartConfigPath runs flux start -c on a one-host configuration
// (the broker finds itself by FLUX_FAKE_HOSTNAME), and checks that a bad
// configuration stops the broker with an error naming the key.
func TestStartConfigPath(t *testing.T) {
	bin := testinstance.Binary(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "boot.toml"), []byte("[bootstrap]\nhosts = [{host = \"solo\"}]\n"), 0o644)
	p := start(t, "flux start -c", []string{"FLUX_FAKE_HOSTNAME=solo"}, nil,
		bin, "start", "-c", dir, "sh", "-c", bin+" getattr hostname; "+bin+" getattr broker.boot-method")
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.stderr)
	}
	if got := p.stdout.String(); got != "solo\nconfig\n" {
		t.Fatalf("stdout %q", got)
	}

	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[bootstrap]\nhosts = [{host=\"node[1-3]\"}, {host=\"node0\"}, {host=\"node3\"}]\n"), 0o644)
	p = start(t, "flux broker -c bad", []string{"FLUX_FAKE_HOSTNAME=node1"}, nil, bin, "broker", "-c", bad, "true")
	if code := p.wait(30 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := `flux-broker: invalid configuration: bootstrap.hosts[2].host: duplicate host "node3" (already in bootstrap.hosts[0])`
	if got := strings.TrimSpace(p.stderr.String()); got != want {
		t.Fatalf("stderr %q\nwant %q", got, want)
	}
}

// TestStartBrokerOptsCommas: flux start -o takes broker options
// separated by commas, as flux-core's -o,-Sstatedir=DIR.
func TestStartBrokerOptsCommas(t *testing.T) {
	bin := testinstance.Binary(t)
	p := start(t, "flux start -o", nil, nil, bin, "start", "-o,-Sa=1,-Sb=2", "sh", "-c", bin+" getattr a; "+bin+" getattr b")
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.stderr)
	}
	if got := p.stdout.String(); got != "1\n2\n" {
		t.Fatalf("stdout %q", got)
	}
}

// TestStartBadStatedir: a state directory whose content store cannot be
// opened stops the instance with a failure, before any job is accepted:
// running on without it would hide the instance's jobs and reuse their
// IDs.
func TestStartBadStatedir(t *testing.T) {
	bin := testinstance.Binary(t)
	dir := t.TempDir()
	junk := bytes.Repeat([]byte("not a database "), 4096)
	if err := os.WriteFile(filepath.Join(dir, "content.sqlite"), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "flux start bad statedir", nil, nil, bin, "start", "-Sstatedir="+dir, "sh", "-c", bin+" submit true && echo accepted")
	if code := p.wait(60 * time.Second); code == 0 {
		t.Fatalf("exit 0 with a corrupt content store:\n%s\n%s", p.stdout, p.stderr)
	}
	if strings.Contains(p.stdout.String(), "accepted") {
		t.Errorf("a job was accepted without the state directory's content")
	}
	if !strings.Contains(p.stderr.String(), "cannot open the state directory's content store") {
		t.Errorf("stderr does not say why:\n%s", p.stderr)
	}
}
