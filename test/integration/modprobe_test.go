package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testRC1 = `
import flux.kvs
from flux.modprobe import task

def setup(context):
    context.setopt("content", "blob-size-limit=1048576")
    context.load_modules(["content", "content-backing", "kvs"])

@task("mark", ranks="0", after=["kvs"])
def mark(context):
    flux.kvs.put(context.handle, "modprobe.mark", "rank" + context.attr_get("rank"))
    flux.kvs.commit(context.handle)

@task("early", ranks="0", before=["content"])
def early(context):
    print("early task ran")
`

const testRC3 = `
from flux.modprobe import task

def setup(context):
    context.remove_modules()

@task("flush", ranks="0", after=["kvs"], before=["content-backing"])
def flush(context):
    context.rpc("content.flush").get()
`

// TestModprobeRun: flux modprobe run FILE as flux-core's test rc files
// use it (broker.rc1_path/rc3_path): modules load with their options on
// the ranks they belong to, tasks run in before/after order on their
// ranks, remove_modules() takes them out again in reverse; an unknown
// module or a failing task is an error that names it.
func TestModprobeRun(t *testing.T) {
	dir := t.TempDir()
	rc1, rc3 := filepath.Join(dir, "rc1.py"), filepath.Join(dir, "rc3.py")
	os.WriteFile(rc1, []byte(testRC1), 0o644)
	os.WriteFile(rc3, []byte(testRC3), 0o644)
	out, code := fluxStart(t, dir, "-s2", "-o", "-Sbroker.rc1_path=flux modprobe run "+rc1, "-o", "-Sbroker.rc3_path=flux modprobe run "+rc3,
		"-Slog-stderr-level=6",
		`flux module list | awk 'NR>1{print $1}' | sort | tr '\n' ' '; echo; flux module list -r 1 | awk 'NR>1{print $1}' | sort | tr '\n' ' '; echo; flux kvs get modprobe.mark; flux module list | grep '^content ' >/dev/null && flux dmesg | grep -c 'blob-size-limit' >/dev/null; echo ok`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	lines := strings.Split(out, "\n")
	find := func(prefix string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	}
	if !find("content content-sqlite job-shell kvs rexec ") {
		t.Errorf("rank 0 modules: %q", out)
	}
	if !find("content job-shell kvs rexec ") {
		t.Errorf("rank 1 modules (no backing store there): %q", out)
	}
	if !find(`"rank0"`) {
		t.Errorf("the task's KVS mark: %q", out)
	}
	if !strings.Contains(out, "early task ran") {
		t.Errorf("the early task's output is not in the broker log: %q", out)
	}
	bad := filepath.Join(dir, "bad.py")
	os.WriteFile(bad, []byte("def setup(context):\n    context.load_modules(['no-such-module'])\n"), 0o644)
	out, code = fluxStart(t, dir, "-s1", "-o", "-Sbroker.rc1_path=flux modprobe run "+bad, "true")
	if code == 0 || !strings.Contains(out, "'no-such-module' is not one fluxgo has") {
		t.Errorf("unknown module: exit %d, %q", code, out)
	}
	failing := filepath.Join(dir, "failing.py")
	os.WriteFile(failing, []byte("from flux.modprobe import task\n\n@task('boom', ranks='all')\ndef boom(context):\n    raise ValueError('it broke')\n"), 0o644)
	out, code = fluxStart(t, dir, "-s1", "-o", "-Sbroker.rc1_path=flux modprobe run "+failing, "true")
	if code == 0 || !strings.Contains(out, "task boom: it broke") {
		t.Errorf("failing task: exit %d, %q", code, out)
	}
}
