package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestHostileConfigs: each configuration file of testdata/config/hostile
// stops flux start (exit 1) with the error its first line names, where
// an instance would otherwise have run without what the admin asked for
// (a key misspelt, a value of the wrong type) or broken (a module that
// cannot start).
func TestHostileConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	files, _ := filepath.Glob("../../testdata/config/hostile/*.toml")
	if len(files) == 0 {
		t.Fatal("no hostile configurations")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("%s: the first line must be # want: TEXT", file)
			}
			abs, _ := filepath.Abs(file)
			code, out := startOnce(t, "-s", "1", "--config-path="+abs)
			if code != 1 || !strings.Contains(string(out), want) {
				t.Errorf("flux start -c %s: exit %d (want 1): %s\nwant the output to contain %q", filepath.Base(file), code, out, want)
			}
		})
	}
}

// startOnce runs flux start ARGS true in a directory of its own (for a
// minute at most) and returns its exit code and output.
func startOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testinstance.Binary(t), append(append([]string{"start"}, args...), "true")...)
	cmd.Dir = t.TempDir()
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestAccessTable: the configuration's [access] table is honoured:
// allow-guest-user = false refuses guests of a root instance (EPERM),
// and allow-root-owner = true gives root the owner's role in another
// user's instance.
func TestAccessTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "access.toml")
	os.WriteFile(conf, []byte("[access]\nallow-guest-user = false\n"), 0o644)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + conf}})}
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run a client as another user")
	}
	if r := e.asGuest("getattr", "rank"); r.Code == 0 || !strings.Contains(r.Stderr, "not permitted") {
		t.Errorf("a guest of an instance with allow-guest-user = false: %+v", r)
	}
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-root-owner=%v", allow), func(t *testing.T) {
			rootOwner(t, e.inst.Bin, allow)
		})
	}
}

// rootOwner starts an instance as the guest user, with allow-root-owner
// set as asked, and checks whether root may do what only the owner may
// (flux setattr).
func rootOwner(t *testing.T, bin string, allow bool) {
	dir, err := os.MkdirTemp("", "rootowner")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	conf := filepath.Join(dir, "access.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf("[access]\nallow-guest-user = true\nallow-root-owner = %v\n", allow)), 0o644)
	uriFile, done := filepath.Join(dir, "uri"), filepath.Join(dir, "done")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "start", "--config-path="+conf, "sh", "-c",
		fmt.Sprintf(`echo "$FLUX_URI" > %s.new && mv %s.new %s; while [ ! -e %s ]; do sleep 0.05; done`, uriFile, uriFile, uriFile, done))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: guestUID, Gid: guestUID}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(done, nil, 0o644)
		cmd.Wait()
	}()
	var uri []byte
	for uri == nil {
		if b, err := os.ReadFile(uriFile); err == nil {
			uri = bytes.TrimSpace(b)
		} else if ctx.Err() != nil {
			t.Fatalf("the guest's instance did not start: %s", out.Bytes())
		} else {
			time.Sleep(20 * time.Millisecond) // polling for the file the instance writes
		}
	}
	set := exec.Command(bin, "setattr", "log-stderr-level", "6")
	set.Env = append(os.Environ(), "FLUX_URI="+string(uri))
	got, err := set.CombinedOutput()
	if allow && err != nil {
		t.Errorf("root with allow-root-owner = true: flux setattr: %v: %s", err, got)
	}
	if !allow && (err == nil || !strings.Contains(string(got), "only the instance owner")) {
		t.Errorf("root without allow-root-owner: flux setattr: %v: %s", err, got)
	}
}

// TestResourceTable: the [resource] table's path, exclude and scheduling
// keys define the inventory (they were ignored, and the instance
// discovered this host's resources instead).
func TestResourceTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	host, _ := os.Hostname()
	R := fmt.Sprintf(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-6"}}],"starttime":0,"expiration":0,"nodelist":[%q]}}`, host)
	os.WriteFile(filepath.Join(dir, "R"), []byte(R), 0o644)
	os.WriteFile(filepath.Join(dir, "sched.json"), []byte(`{"writers":["test"]}`), 0o644)
	conf := filepath.Join(dir, "resource.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf("[resource]\npath = %q\nscheduling = %q\nnoverify = true\n",
		filepath.Join(dir, "R"), filepath.Join(dir, "sched.json"))), 0o644)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + conf}})}
	if got := e.must("resource", "list", "-n", "-s", "free", "-o", "{ncores}"); got != "7" {
		t.Errorf("free cores from [resource] path: %q, want 7", got)
	}
	if got := e.must("kvs", "get", "resource.R"); !strings.Contains(got, `"scheduling":{"writers":["test"]}`) {
		t.Errorf("R lacks the [resource] scheduling key: %s", got)
	}
}

// startOnly are the corpus files whose mistakes only a module starting
// finds (resource paths and host lists, read when the resource module
// loads): flux config reload cannot see them.
var startOnly = map[string]bool{
	"resource-path-missing": true, "resource-exclude": true, "resource-hostlist": true,
	"resource-hosts-huge": true, "resource-exclude-range": true,
}

// TestHostileConfigReload: flux config reload refuses what flux start
// refuses (it took a bad [job-shell], [sched-simple] or [access] and the
// instance then ran no job), naming the key, and the instance keeps its
// configuration and goes on running jobs.
func TestHostileConfigReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "base.toml"), []byte("[exec]\nkill-timeout = \"7s\"\n"), 0o644)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + dir}})}
	files, _ := filepath.Glob("../../testdata/config/hostile/*.toml")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".toml")
		if startOnly[name] {
			continue
		}
		data, _ := os.ReadFile(file)
		first, _, _ := strings.Cut(string(data), "\n")
		want := strings.TrimPrefix(first, "# want: ")
		bad := filepath.Join(dir, "bad.toml")
		os.WriteFile(bad, data, 0o644)
		r := e.flux("config", "reload")
		os.Remove(bad)
		if r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%s: flux config reload: exit %d: %s\nwant the error to contain %q", name, r.Code, r.Stderr, want)
		}
	}
	if got := e.must("config", "get", "exec.kill-timeout"); got != "7s" {
		t.Errorf("the configuration after the refused reloads: exec.kill-timeout %q", got)
	}
	if got := e.must("run", "echo", "ok"); got != "ok" {
		t.Errorf("a job after the refused reloads: %q", got)
	}
}
