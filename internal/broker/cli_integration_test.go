package broker_test

// Integration tests of the instance-management commands (ping, event,
// logger, dmesg, module, overlay, uptime, shutdown, start) through the real
// flux binary against real broker processes.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// rankURI is the local URI of rank r's broker.
func rankURI(inst *testinstance.Instance, r int) string {
	return strings.Replace(inst.URI, "/0/local", "/"+strconv.Itoa(r)+"/local", 1)
}

// fluxEnv is the environment for a flux command talking to uri ("": to
// no instance).
func fluxEnv(uri string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLUX_URI=") {
			env = append(env, kv)
		}
	}
	if uri == "" {
		return env
	}
	return append(env, "FLUX_URI="+uri)
}

// runAt runs the flux command against the broker at uri.
func runAt(t *testing.T, inst *testinstance.Instance, uri string, args ...string) testinstance.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, inst.Bin, args...)
	cmd.Env = fluxEnv(uri)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("flux %s did not run", strings.Join(args, " "))
	}
	return testinstance.Result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode()}
}

// tbonDepth is rank r's distance from rank 0 with fanout 2.
func tbonDepth(r int) int {
	d := 0
	for ; r > 0; r = (r - 1) / 2 {
		d++
	}
	return d
}

// tbonPath is the ranks from 0 down to r with fanout 2, joined by "!".
func tbonPath(r int) string {
	path := []string{strconv.Itoa(r)}
	for ; r > 0; r = (r - 1) / 2 {
		path = append([]string{strconv.Itoa((r - 1) / 2)}, path...)
	}
	return strings.Join(path, "!")
}

func TestCLIPingEveryRank(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 8, Attrs: map[string]string{"tbon.fanout": "2"}})
	for r := 0; r < 8; r++ {
		out := inst.MustRun(t, "ping", "--count=1", strconv.Itoa(r))
		re := regexp.MustCompile(fmt.Sprintf(`^%d!broker\.ping pad=0 seq=0 time=\d+\.\d{3} ms \((\S+)\)\n$`, r))
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("flux ping %d printed %q", r, out)
			continue
		}
		// our connection, then the rank of each broker passed on the
		// way down the tree, then the broker that answered
		hops := strings.Split(m[1], "!")
		if want := tbonPath(r); len(hops) != tbonDepth(r)+2 || strings.Join(hops[1:], "!") != want {
			t.Errorf("rank %d: route %s, want <client>!%s", r, m[1], want)
		}
	}
	// a service by name, with the rank!service form, from rank 5
	res := runAt(t, inst, rankURI(inst, 5), "ping", "-c", "2", "-i", "0.01", "0!broker")
	if res.Code != 0 || strings.Count(res.Stdout, "0!broker.ping pad=0 seq=") != 2 || !strings.Contains(res.Stdout, "0!broker.ping: 2 sent, 2 received") {
		t.Errorf("ping 0!broker from rank 5: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}

func TestCLIEventSubPub(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	want := "test.a\ntest.b\t{\"x\":1}\ntest.c\n"
	// The subscriber can't say when it is subscribed: give it a moment,
	// and try again if it still missed an event.
	for attempt := 1; ; attempt++ {
		sub := exec.Command(inst.Bin, "event", "sub", "-c", "3", "test")
		sub.Env = fluxEnv(inst.URI)
		var out, errb bytes.Buffer
		sub.Stdout, sub.Stderr = &out, &errb
		if err := sub.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- sub.Wait() }()
		time.Sleep(time.Duration(attempt) * 300 * time.Millisecond)
		inst.MustRun(t, "event", "pub", "test.a")
		inst.MustRun(t, "event", "pub", "other.x") // not subscribed
		if r := runAt(t, inst, rankURI(inst, 1), "event", "pub", "test.b", `{"x":1}`); r.Code != 0 {
			t.Fatalf("pub from rank 1: %s", r.Stderr)
		}
		inst.MustRun(t, "event", "pub", "-s", "test.c")
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("flux event sub: %v: %s", err, errb.String())
			}
			if out.String() != want {
				t.Errorf("flux event sub -c 3 printed\n%s\nwant\n%s", out.String(), want)
			}
			return
		case <-time.After(5 * time.Second):
			sub.Process.Kill()
			<-exited
			t.Logf("attempt %d: flux event sub got only %q", attempt, out.String())
			if attempt == 3 {
				t.Fatalf("flux event sub -c 3 did not get 3 events; printed %q", out.String())
			}
		}
	}
}

func TestCLIDmesgLogger(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	inst.MustRun(t, "logger", "--severity=warning", "--appname=mytest", "hello", "world")
	if out := inst.MustRun(t, "dmesg"); !regexp.MustCompile(`(?m)^\S+Z mytest\.warning\[0\]: hello world$`).MatchString(out) {
		t.Errorf("dmesg lacks the logged message:\n%s", out)
	}
	// rank 1 has its own ring buffer
	if r := runAt(t, inst, rankURI(inst, 1), "logger", "on rank one"); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	if r := runAt(t, inst, rankURI(inst, 1), "dmesg"); !strings.Contains(r.Stdout, "logger.info[1]: on rank one") || strings.Contains(r.Stdout, "hello world") {
		t.Errorf("rank 1 dmesg:\n%s", r.Stdout)
	}
	inst.MustRun(t, "dmesg", "--clear")
	if out := inst.MustRun(t, "dmesg"); strings.Contains(out, "hello world") {
		t.Errorf("dmesg after --clear:\n%s", out)
	}
	if r := inst.Run(t, "logger", "--severity=loud", "x"); r.Code == 0 || !strings.Contains(r.Stderr, "loud") {
		t.Errorf("bad severity: exit %d %q", r.Code, r.Stderr)
	}
}

func TestCLIModuleList(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	h := inst.Handle(t)
	var resp struct {
		Mods []struct {
			Name string `json:"name"`
		} `json:"mods"`
		Available []string `json:"available"`
	}
	if err := h.Call(context.Background(), "module.list", flux.NodeidAny, nil, &resp); err != nil {
		t.Fatal(err)
	}
	out := inst.MustRun(t, "module", "list")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !regexp.MustCompile(`^Module +Idle +S Service$`).MatchString(lines[0]) {
		t.Errorf("header %q", lines[0])
	}
	if len(lines)-1 != len(resp.Mods) {
		t.Errorf("module list shows %d modules, module.list has %d:\n%s", len(lines)-1, len(resp.Mods), out)
	}
	for _, m := range resp.Mods {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m.Name) + ` +\d+  R`).MatchString(out) {
			t.Errorf("module %s missing or not running:\n%s", m.Name, out)
		}
	}
	all := inst.MustRun(t, "module", "list", "--all")
	for _, n := range resp.Available {
		if !strings.Contains(all, n+"\n") {
			t.Errorf("module list --all lacks %s:\n%s", n, all)
		}
	}
	if r := inst.Run(t, "module", "remove", "no-such-module"); r.Code == 0 {
		t.Error("removing a module that isn't loaded succeeded")
	}
	inst.MustRun(t, "module", "remove", "-f", "no-such-module")
	if r := inst.Run(t, "module", "list", "--rank=1"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "Module") {
		t.Errorf("module list --rank=1: %d %s", r.Code, r.Stderr)
	}
}

// TestCLIOverlayLostBroker kills a leaf broker: overlay status must report
// it lost and ping must fail at once instead of hanging.
func TestCLIOverlayLostBroker(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 8,
		Attrs: map[string]string{"tbon.fanout": "2", "tbon.timeout": "2s"}})
	out := inst.MustRun(t, "overlay", "status")
	if n := strings.Count(out, ": full\n"); n != 8 || !strings.HasPrefix(out, "0 ") {
		t.Fatalf("overlay status of a healthy instance:\n%s", out)
	}

	pidText := strings.TrimSpace(runAt(t, inst, rankURI(inst, 6), "getattr", "broker.pid").Stdout)
	var viaRPC struct {
		Value string `json:"value"`
	}
	if err := inst.Handle(t).Call(context.Background(), "attr.get", 6, map[string]string{"name": "broker.pid"}, &viaRPC); err != nil || viaRPC.Value != pidText {
		t.Fatalf("broker.pid of rank 6: getattr %q, attr.get %q (%v)", pidText, viaRPC.Value, err)
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("broker.pid %q", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(30 * time.Second) // well past tbon.timeout, on a loaded machine too
	lost := regexp.MustCompile(`(?m)^   └─ 6 \S+: lost$`)
	for !lost.MatchString(out) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 6 not reported lost:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
		out = inst.MustRun(t, "overlay", "status")
	}
	for _, want := range []string{`^0 \S+: degraded$`, `^└─ 2 \S+: degraded$`, `^│  └─ 4 \S+: full$`, `^   ├─ 5 \S+: full$`} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("overlay status lacks %s:\n%s", want, out)
		}
	}
	if down := inst.MustRun(t, "overlay", "status", "--down", "--no-pretty"); !regexp.MustCompile(`^0 \S+: degraded\n2 \S+: degraded\n6 \S+: lost\n$`).MatchString(down) {
		t.Errorf("overlay status --down:\n%s", down)
	}

	start := time.Now()
	r := inst.Run(t, "ping", "--count=1", "6")
	if r.Code == 0 || !strings.Contains(r.Stderr, "6!broker.ping") || !strings.Contains(r.Stderr, "unreachable") {
		t.Errorf("ping of a lost broker: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	// it must fail, not wait for a broker that is gone (a bound on a
	// hang, not a speed: a loaded machine is slow)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("ping of a lost broker took %v", d)
	}
	if up := inst.MustRun(t, "uptime"); !strings.HasSuffix(up, ",  size 8,  1 offline\n") {
		t.Errorf("uptime: %q", up)
	}
}

func TestCLIShutdown(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{Size: 4})
	if up := inst.MustRun(t, "uptime"); !regexp.MustCompile(`^ \d\d:\d\d:\d\d run \S+,  owner \S+,  depth 0,  size 4\n$`).MatchString(up) {
		t.Errorf("uptime: %q", up)
	}
	inst.MustRun(t, "shutdown", "--quiet")
	select {
	case <-inst.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("instance still running 20s after flux shutdown")
	}
}

// flux start must leave no broker behind, and pass on the initial
// program's exit code.
func TestCLIStartCleanExit(t *testing.T) {
	bin := testinstance.Binary(t)
	cmd := exec.Command(bin, "start", "-s", "4", "sh", "-c", bin+" getattr rundir")
	cmd.Env = fluxEnv("")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("flux start: %v", err)
	}
	base := filepath.Dir(strings.TrimSpace(string(out)))
	if !strings.Contains(base, "flux-") {
		t.Fatalf("rundir %q", out)
	}
	// flux start has returned: every broker must be gone.
	pg := exec.Command("pgrep", "-f", base+"/")
	if pgOut, err := pg.Output(); err == nil {
		t.Errorf("processes left behind:\n%s", pgOut)
	}

	cmd = exec.Command(bin, "start", "-s", "4", "sh", "-c", "exit 7")
	cmd.Env = fluxEnv("")
	err = cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("flux start -s 4 sh -c 'exit 7': %v", err)
	}
}
