package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// startWithConfig starts a size-broker instance whose config path holds
// one file with toml.
func startWithConfig(t *testing.T, size int, toml string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "conf.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: size, Args: []string{"--config-path", dir}})}
}

// TestPerilogFromConfig: [job-manager] plugins loads perilog.so, which
// runs the [job-manager.prolog] and [job-manager.epilog] commands of
// flux-config-job-manager(5): the prolog before the shells start, the
// epilog from the finish event, here on every rank of the job.
func TestPerilogFromConfig(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "fail")
	e := startWithConfig(t, 2, fmt.Sprintf(`
[job-manager]
plugins = [ { load = "perilog.so" } ]
[job-manager.prolog]
command = ["sh", "-c", "test -e %s && test $(flux getattr rank) = 1 && exit 3; echo prolog $FLUX_JOB_ID"]
per-rank = true
[job-manager.epilog]
command = ["sh", "-c", "echo epilog"]
`, mark))
	if got := e.must("jobtap", "list"); got != "perilog.so" {
		t.Fatalf("flux jobtap list with [job-manager] plugins: %q", got)
	}
	id := e.submit("-N2", "true")
	if r := e.result(id); r != "COMPLETED" {
		t.Fatalf("job with a prolog and an epilog: %s (events %v)", r, e.eventNames(id))
	}
	names := strings.Join(e.eventNames(id), " ")
	for _, want := range []string{"alloc prolog-start prolog-finish start", "finish epilog-start", "epilog-finish free clean"} {
		if !strings.Contains(names, want) {
			t.Errorf("events %q lack %q", names, want)
		}
	}
	// the prolog ran once per rank, with FLUX_JOB_ID set
	if dm := e.must("dmesg"); strings.Count(dm, "stdout: prolog "+id.String()) != 2 {
		t.Errorf("dmesg lacks two prolog lines for %s:\n%s", id, dm)
	}

	// a prolog failing on rank 1: a fatal prolog exception naming the
	// rank, the job never starts, the epilog still runs, rank 1 drains
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := e.submit("-N2", "true")
	if r := e.result(bad); r != "FAILED" {
		t.Fatalf("job whose prolog failed: %s (events %v)", r, e.eventNames(bad))
	}
	if got := e.field(bad, "{exception.type}:{exception.note}"); !strings.HasPrefix(got, "prolog:prolog exited with code=3 on ") || !strings.HasSuffix(got, " (rank 1)") {
		t.Errorf("exception of the failed prolog: %q", got)
	}
	names = strings.Join(e.eventNames(bad), " ")
	if strings.Contains(names, " start") || !strings.Contains(names, "epilog-start prolog-finish") {
		t.Errorf("events of the job whose prolog failed: %q", names)
	}
	if got := e.must("resource", "drain", "-n", "-o", "{ranks} {reason}"); got != "1 prolog failed for job "+bad.String() {
		t.Errorf("drained after the prolog failed on rank 1: %q", got)
	}
}

// TestPerilogFailureEndsJob: a failed or timed-out prolog with no epilog
// configured must still let the job become inactive (it once stayed in
// CLEANUP forever), and a canceled prolog raises no prolog exception.
func TestPerilogFailureEndsJob(t *testing.T) {
	dir := t.TempDir()
	e := startWithConfig(t, 1, fmt.Sprintf(`
[job-manager]
plugins = [ { load = "perilog.so" } ]
[job-manager.prolog]
command = ["sh", "-c", "exec sh %s/prolog"]
timeout = "1s"
`, dir))
	script := func(text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "prolog"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script("exit 1\n")
	id := e.submit("true")
	if r := e.result(id); r != "FAILED" {
		t.Fatalf("job whose prolog failed: %s", r)
	}
	if got := e.field(id, "{exception.note}"); !strings.HasPrefix(got, "prolog exited with code=1 on ") {
		t.Errorf("note %q", got)
	}

	script("exec sleep 30\n")
	id = e.submit("true")
	if r := e.result(id); r != "FAILED" {
		t.Fatalf("job whose prolog timed out: %s", r)
	}
	if got := e.field(id, "{exception.note}"); !strings.HasPrefix(got, "prolog timed out on ") {
		t.Errorf("note %q", got)
	}

	id = e.submit("true")
	e.waitEvent(id, "prolog-start")
	e.must("cancel", id.String())
	if r := e.result(id); r != "CANCELED" {
		t.Fatalf("job canceled in its prolog: %s", r)
	}
	if got := e.field(id, "{exception.type}"); got != "cancel" {
		t.Errorf("exception of a job canceled in its prolog: %q", got)
	}
}

// TestJobManagerPluginsConfig: bad [job-manager] plugins directives and
// bad perilog tables are refused with a message naming what is wrong.
func TestJobManagerPluginsConfig(t *testing.T) {
	e := startWithConfig(t, 1, "")
	for _, c := range []struct{ toml, want string }{
		{"[job-manager]\nplugins = \"perilog.so\"\n", "plugins must be an array of tables"},
		{"[job-manager]\nplugins = [ { load = \"nosuch.so\" } ]\n", `no plugin named "nosuch.so"`},
		{"[job-manager]\nplugins = [ { conf = { a = 1 } } ]\n", "load or remove is required"},
		{"[job-manager]\nplugins = [ { load = \"perilog.so\", x = 1 } ]\n", `unknown key "x"`},
		{"[job-manager]\nplugins = [ { load = \"perilog.so\" } ]\n[job-manager.prolog]\ncommand = \"true\"\n", "[job-manager.prolog]: command must be an array"},
		{"[job-manager]\nplugins = [ { load = \"perilog.so\" } ]\n[job-manager.epilog]\ncommand = [\"true\"]\nkill-timeout = 1\n", "kill-timeout not allowed for epilog"},
		{"[job-manager]\nplugins = [ { load = \"perilog.so\" } ]\n[job-manager.prolog]\ncommand = [\"true\"]\ntimeout = \"x\"\n", "invalid prolog timeout"},
		{"[job-manager]\nplugins = [ { load = \"perilog.so\" } ]\n[job-manager.epilog]\n", "no command specified and exec.imp not defined"},
	} {
		r := e.inst.RunInput(t, c.toml, "config", "load")
		if r.Code == 0 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("config load %q: exit %d %q, want %q", c.toml, r.Code, r.Stderr, c.want)
		}
	}
	// a perilog loaded at run time takes the tables of a reload
	e.must("jobtap", "load", "perilog.so")
	if r := e.inst.RunInput(t, "[job-manager.prolog]\ncommandx = [\"true\"]\n", "config", "load"); r.Code == 0 || !strings.Contains(r.Stderr, `unknown key "commandx"`) {
		t.Errorf("config load of a bad prolog table with perilog loaded: %+v", r)
	}
	if r := e.inst.RunInput(t, "[job-manager.prolog]\ncommand = [\"true\"]\n", "config", "load"); r.Code != 0 {
		t.Fatalf("config load of a prolog: %+v", r)
	}
	id := e.submit("true")
	if r := e.result(id); r != "COMPLETED" {
		t.Fatalf("job after the prolog was configured: %s", r)
	}
	if _, ok := find(e.events(id), "prolog-finish"); !ok {
		t.Errorf("no prolog ran after config load: %v", e.eventNames(id))
	}
}
