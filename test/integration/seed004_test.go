package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestSeed004Spellings: the 2018 spellings of seed 004 either work or
// say what replaced them.
func TestSeed004Spellings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flux instances")
	}
	dir := t.TempDir()
	e := start(t)

	t.Run("pymod module and rpc_send", func(t *testing.T) {
		mod := filepath.Join(dir, "newjob.py")
		os.WriteFile(mod, []byte(`import itertools, json, flux

def handle_new_job(f, typemask, message, arg):
    job_queue, job_ids = arg
    job_queue.append(message.payload)
    f.respond(message, 0, json.dumps({'jobid': next(job_ids)}))

def mod_main(f, *argv):
    f.msg_watcher_create(flux.FLUX_MSGTYPE_REQUEST, handle_new_job, "pymod.new_job",
                         args=([], itertools.count(0))).start()
    f.reactor_run(f.get_reactor(), 0)
`), 0o644)
		e.must("module", "load", "pymod", "--module="+mod)
		out := e.must("python", "-c", `import flux
f = flux.Flux()
print(f.rpc_send("pymod.new_job", {"a": 1})["jobid"], f.rpc_send("pymod.new_job", {"a": 2})["jobid"])`)
		if out != "0 1" {
			t.Errorf("pymod.new_job answered %q, want \"0 1\"", out)
		}
		e.must("module", "remove", "pymod")
		e.fail("--module=PATH", "module", "load", "pymod")
		// a mod_main that raises before it runs its reactor fails the load
		bad := filepath.Join(dir, "bad.py")
		os.WriteFile(bad, []byte("def mod_main(f, *argv):\n    raise RuntimeError('boom')\n"), 0o644)
		e.fail("module pymod failed", "module", "load", "pymod", "--module="+bad)
	})
	t.Run("job.submit request", func(t *testing.T) {
		out := e.must("python", "-c", `import json, flux
f = flux.Flux()
resp = f.rpc_send("job.submit", json.dumps({"nnodes": 1, "ntasks": 2, "walltime": 120, "cmdline": ["true"]}))
print(resp["state"], resp["kvs_dir"].startswith("job."), resp["jobid"])`)
		fields := strings.Fields(out)
		if len(fields) != 3 || fields[0] != "submitted" || fields[1] != "True" {
			t.Fatalf("job.submit answered %q", out)
		}
		e.must("job", "wait-event", fields[2], "clean")
		if got := e.must("jobs", "-no", "{ntasks} {result}", fields[2]); got != "2 COMPLETED" {
			t.Errorf("the job: %q", got)
		}
	})
	t.Run("sched plugins", func(t *testing.T) {
		e.fail("flux-sched 0.x (2018) scheduler plugin", "module", "load", "sched.io-aware")
	})

	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(testinstance.Binary(t), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(testinstance.Binary(t))+":"+os.Getenv("PATH"))
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	t.Run("FLUX_SCHED_OPTS", func(t *testing.T) {
		if out, code := run([]string{"FLUX_SCHED_OPTS=plugin=sched.backfill"}, "start", "flux dmesg | grep ready:"); code != 0 || !strings.Contains(out, "queue-policy=easy") {
			t.Errorf("plugin=sched.backfill: exit %d, %q", code, out)
		}
		if out, code := run([]string{"FLUX_SCHED_OPTS=plugin=sched.io-aware"}, "start", "true"); code == 0 || !strings.Contains(out, "flux-sched 0.x's plugins are gone") {
			t.Errorf("plugin=sched.io-aware: exit %d, %q", code, out)
		}
	})
	t.Run("boot.method=config", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		conf := filepath.Join(dir, "boot.conf")
		os.WriteFile(conf, []byte(fmt.Sprintf("session-id = \"mycluster\"\ntbon-endpoints = [ \"tcp://127.0.0.1:%d\" ]\n", port)), 0o644)
		if out, code := run(nil, "broker", "-Sboot.method=config", "-Sboot.config_file="+conf, "flux getattr size; flux getattr broker.boot-method"); code != 0 || out != "1\nconfig\n" {
			t.Errorf("boot from boot.conf: exit %d, %q", code, out)
		}
		if out, code := run(nil, "broker", "-Sboot.method=config", "-Sboot.config_file="+filepath.Join(dir, "none.conf"), "true"); code == 0 || !strings.Contains(out, "boot.config_file") {
			t.Errorf("missing boot.conf: exit %d, %q", code, out)
		}
		if out, code := run(nil, "broker", "-Sboot.method=config", "true"); code == 0 || !strings.Contains(out, "needs boot.config_file") {
			t.Errorf("boot.method=config alone: exit %d, %q", code, out)
		}
	})
	t.Run("flux-capacitor", func(t *testing.T) {
		link := filepath.Join(dir, "flux-capacitor")
		if err := os.Symlink(testinstance.Binary(t), link); err != nil {
			t.Fatal(err)
		}
		cmds := filepath.Join(dir, "cmds")
		os.WriteFile(cmds, []byte("-n1 true\n-n1 true\n"), 0o644)
		cmd := exec.Command(link, "--command_file", cmds, "--wait")
		cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(out), "ƒ") != 2 {
			t.Errorf("flux-capacitor --command_file: %v, %q", err, out)
		}
	})
}
