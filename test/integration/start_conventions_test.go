package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// fluxStart runs flux start with args and returns its combined output
// and exit code.
func fluxStart(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	return fluxStartEnv(t, dir, nil, args...)
}

// fluxStartEnv is fluxStart with extra environment.
func fluxStartEnv(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	bin := testinstance.Binary(t)
	cmd := exec.Command(bin, append([]string{"start"}, args...)...)
	cmd.Dir = dir
	py, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "FLUXGO_PYTHONPATH="+py)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestStartConventions: what flux-core's test suite expects of flux
// start: a one-word initial program is a shell command line, -o takes
// comma-separated broker options with spaces kept, broker.rc1_path and
// broker.rc3_path replace the module list, runat.push'd cleanup commands
// run after the initial program, and the testing options work.
func TestStartConventions(t *testing.T) {
	dir := t.TempDir()
	t.Run("one-word command line", func(t *testing.T) {
		out, code := fluxStart(t, dir, "-s2", "flux getattr size; echo second")
		if code != 0 || out != "2\nsecond\n" {
			t.Errorf("exit %d, output %q", code, out)
		}
		// a one-word executable runs directly, and its exit code passes
		script := filepath.Join(dir, "prog.sh")
		os.WriteFile(script, []byte("#!/bin/sh\necho \"$0\"\nexit 3\n"), 0o755)
		if out, code := fluxStart(t, dir, "-s1", script); code != 3 || out != script+"\n" {
			t.Errorf("%s: exit %d, output %q", script, code, out)
		}
	})
	t.Run("rc1 and rc3", func(t *testing.T) {
		log := filepath.Join(dir, "rc.log")
		rc1 := "-Sbroker.rc1_path=echo rc1 $(flux getattr rank) >>" + log + "; flux module load content; flux module load kvs"
		rc3 := "-Sbroker.rc3_path=echo rc3 $(flux getattr rank) >>" + log + "; flux module remove kvs"
		out, code := fluxStart(t, dir, "-s2", "-o", rc1, "-o", rc3,
			`flux module list | awk 'NR>1{print $1}' | sort | tr '\n' ' '; flux kvs put a=1 && flux kvs get a`)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		// the built-in module list is left out, flux-core's broker services kept
		if !strings.HasPrefix(out, "content job-shell kvs rexec 1\n") {
			t.Errorf("modules and kvs: %q", out)
		}
		b, _ := os.ReadFile(log)
		lines := strings.Fields(strings.ReplaceAll(string(b), "\n", ","))
		got := strings.Join(lines, " ")
		for _, want := range []string{"rc1 0", "rc1 1", "rc3 0", "rc3 1"} {
			if !strings.Contains(got, want) {
				t.Errorf("rc log %q lacks %q", got, want)
			}
		}
		// an empty rc1: no modules; a failing rc1 stops the instance
		out, code = fluxStart(t, dir, "-s1", "-o", "-Sbroker.rc1_path=", "flux module list | wc -l")
		if code != 0 || strings.TrimSpace(out) != "3" { // header, rexec, job-shell
			t.Errorf("empty rc1: exit %d, %q", code, out)
		}
		out, code = fluxStart(t, dir, "-s1", "-o", "-Sbroker.rc1_path=exit 5", "echo ran")
		if code == 0 || strings.Contains(out, "ran") || !strings.Contains(out, "exited with code 5") {
			t.Errorf("failing rc1: exit %d, %q", code, out)
		}
	})
	t.Run("cleanup commands", func(t *testing.T) {
		mark := filepath.Join(dir, "cleanup.mark")
		prog := `flux python -c 'import flux; flux.Flux().rpc("runat.push", {"name": "cleanup", "commands": ["echo one >> ` + mark + `", "echo two >> ` + mark + `"]}).get()'`
		if out, code := fluxStart(t, dir, "-s1", prog); code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		if b, _ := os.ReadFile(mark); string(b) != "one\ntwo\n" {
			t.Errorf("cleanup ran %q", b)
		}
		out, code := fluxStart(t, dir, "-s1", `flux python -c 'import flux; flux.Flux().rpc("runat.push", {"name": "rc1", "commands": ["true"]}).get()'`)
		if code == 0 || !strings.Contains(out, "only the cleanup phase") {
			t.Errorf("push to rc1: exit %d, %q", code, out)
		}
	})
	t.Run("testing options", func(t *testing.T) {
		rd := filepath.Join(dir, "rundir")
		os.Mkdir(rd, 0o755)
		if out, code := fluxStart(t, dir, "-s2", "--test-rundir="+rd, "--test-exit-mode=leader", "--test-start-mode=all",
			"--test-pmi-clique=per-broker", "--test-exit-timeout=0", "flux getattr rundir"); code != 0 || !strings.HasPrefix(out, rd+"/0") {
			t.Errorf("--test-rundir: exit %d, %q", code, out)
		}
		if _, err := os.Stat(rd); err != nil {
			t.Errorf("--test-rundir without cleanup: removed: %v", err)
		}
		if out, code := fluxStart(t, dir, "-s1", "--test-rundir="+rd, "--test-rundir-cleanup", "true"); code != 0 {
			t.Errorf("--test-rundir-cleanup: exit %d, %q", code, out)
		}
		if _, err := os.Stat(rd); !os.IsNotExist(err) {
			t.Errorf("--test-rundir-cleanup left %s: %v", rd, err)
		}
		if out, code := fluxStart(t, dir, "-s1", "--wrap=env,WRAPPED=yes", "echo $WRAPPED"); code != 0 || out != "yes\n" {
			t.Errorf("--wrap: exit %d, %q", code, out)
		}
		if out, code := fluxStart(t, dir, "-s1", "-X", "-v", "true"); code != 0 || !strings.Contains(out, "flux-start: ") {
			t.Errorf("-X -v: exit %d, %q", code, out)
		}
		// flux-core's conventions of a single broker (no --test-size)
		if out, code := fluxStart(t, dir, "--wrap=/bin/echo,start:", "arg0", "arg1"); code != 0 || !strings.HasPrefix(out, "start: ") || !strings.HasSuffix(out, " broker arg0 arg1\n") {
			t.Errorf("--wrap without --test-size: exit %d, %q", code, out)
		}
		for _, opt := range []string{"--test-pmi-clique=none", "--test-hosts=foo", "--test-exit-timeout=10s", "--test-exit-mode=any", "--test-start-mode=all"} {
			if out, code := fluxStart(t, dir, opt, "true"); code == 0 || !strings.Contains(out, "is only for a test instance") {
				t.Errorf("%s without --test-size: exit %d, %q", opt, code, out)
			}
		}
		if out, code := fluxStart(t, dir, "-s1", "flux getattr broker.boot-method"); code != 0 || out != "simple\n" {
			t.Errorf("broker.boot-method under --test-size: exit %d, %q", code, out)
		}
		// FLUX_RC_EXTRA: the rc1.d scripts of each directory run at start
		rcd := filepath.Join(dir, "rcextra", "rc1.d")
		os.MkdirAll(rcd, 0o755)
		os.WriteFile(filepath.Join(rcd, "one"), []byte("#!/bin/sh\necho rc-one\n"), 0o755)
		if out, code := fluxStartEnv(t, dir, []string{"FLUX_RC_EXTRA=" + filepath.Join(dir, "rcextra")}, "-Slog-stderr-level=6", "echo rc-main"); code != 0 || !strings.Contains(out, "rc1: rc-one") || !strings.Contains(out, "rc-main") {
			t.Errorf("FLUX_RC_EXTRA rc1.d: exit %d, %q", code, out)
		}
		sock := filepath.Join(dir, "meep")
		if out, code := fluxStart(t, dir, "-Slocal-uri=local://"+sock, "printenv FLUX_URI"); code != 0 || out != "local://"+sock+"\n" {
			t.Errorf("local-uri override: exit %d, %q", code, out)
		}
		for _, bad := range [][]string{
			{"--test-size=0", "--test-size=0: a test instance has at least 1 broker"},
			{"--test-size=-1", "--test-size=-1: a test instance has at least 1 broker"},
			{"--test-exit-mode=sometimes", "must be leader or any"},
			{"--test-start-mode=some", "must be all or leader"},
			{"--test-pmi-clique=[[bad", "RFC 34 taskmap"},
			{"--test-rundir=" + filepath.Join(dir, "nope"), "nope: No such file or directory"},
			{"--test-rundir=/etc/passwd", "/etc/passwd: not a directory"},
			{"-Sbroker.boot-method=unknown", "unknown boot method"},
			{"-Sbroker.pid=1", "broker.pid: attribute is immutable"},
			{"-Sbroker.critical-ranks=0-1", "rank 1 is not in the instance"},
			{"-Slocal-uri=baduri", "malformed local-uri"},
			{"-Slocal-uri=local:///fluxgo-noexist/x", "cannot stat /fluxgo-noexist: No such file or directory"},
		} {
			out, code := fluxStart(t, dir, "-s1", bad[0], "true")
			if code == 0 || !strings.Contains(out, bad[1]) {
				t.Errorf("%s: exit %d, %q (want %q)", bad[0], code, out, bad[1])
			}
		}
	})
}
