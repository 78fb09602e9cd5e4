package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// nestedInstance starts a test instance whose jobs find the flux
// command in their PATH (batch scripts and nested instances run it).
func nestedInstance(t *testing.T, size int) *testinstance.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test")
	}
	bin := testinstance.Binary(t)
	t.Setenv("PATH", filepath.Dir(bin)+":"+os.Getenv("PATH"))
	return testinstance.Start(t, testinstance.Options{Size: size})
}

// waitClean waits for a job to become inactive.
func waitClean(t *testing.T, inst *testinstance.Instance, id string) {
	t.Helper()
	inst.MustRun(t, "job", "wait-event", "-t", "120", id, "clean")
}

// nestedJobStatus returns "NAME STATUS RC" of a job.
func nestedJobStatus(t *testing.T, inst *testinstance.Instance, id string) string {
	t.Helper()
	return strings.TrimSpace(inst.MustRun(t, "jobs", "-n", "-o", "{name} {status} {returncode}", id))
}

// killPidfiles kills the processes whose pids the files matching glob
// hold (tasks a test's jobs started; a broker killed with SIGKILL leaves
// its tasks behind).
func killPidfiles(t *testing.T, glob string) {
	files, _ := filepath.Glob(glob)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestBatchNestedInstance runs a batch script with directives in a
// 2-node child instance that runs 100 jobs.
func TestBatchNestedInstance(t *testing.T) {
	inst := nestedInstance(t, 2)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	body := `#!/bin/sh
# flux: -N2
# flux: --job-name=nested
echo "size=$(flux getattr size) level=$(flux getattr instance-level) jobid=$(flux getattr jobid)"
echo "parent=$(flux getattr parent-uri)"
echo "resources=$(flux resource list -n -s all -o '{nnodes} {ncores}')"
test -z "$FLUX_JOB_ID$PMI_FD" && echo job-env-cleared
flux submit --cc=1-100 --quiet --wait true
echo completed=$(flux jobs -a -f completed -n -o "{id}" | wc -l)
echo args="$*"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(inst.MustRun(t, "batch", "--output="+filepath.Join(dir, "flux-{{id}}.out"), script, "a", "b c"))
	waitClean(t, inst, id)
	if got := nestedJobStatus(t, inst, id); got != "nested COMPLETED 0" {
		t.Fatalf("batch job: %s", got)
	}
	out, err := os.ReadFile(filepath.Join(dir, "flux-"+id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{"size=2 level=1 jobid=" + id, "parent=local://", "job-env-cleared", "completed=100", "args=a b c"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// the child's resources are exactly the job's R: 2 whole nodes
	R, err := rset.Parse([]byte(inst.MustRun(t, "job", "info", id, "R")))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("resources=2 %d\n", R.NCores()); R.NNodes() != 2 || !strings.Contains(text, want) {
		t.Errorf("output lacks %q (R %s):\n%s", want, R, text)
	}
	// the instance published its URI as a memo
	if uri := inst.MustRun(t, "jobs", "-n", "-o", "{user.uri}", id); !strings.HasPrefix(uri, "ssh://") {
		t.Errorf("uri memo %q", uri)
	}
	// directives: a stray directive is refused before submission
	bad := filepath.Join(dir, "bad.sh")
	os.WriteFile(bad, []byte("#!/bin/sh\n# flux: -N1\nhostname\n# flux: -n2\n"), 0o755)
	if r := inst.Run(t, "batch", bad); r.Code == 0 || !strings.Contains(r.Stderr, "orphan directive") {
		t.Fatalf("stray directive: %+v", r)
	}
}

// TestAllocInteractive feeds commands to flux alloc's shell on stdin.
func TestAllocInteractive(t *testing.T) {
	inst := nestedInstance(t, 2)
	t.Setenv("SHELL", "/bin/sh")
	r := inst.RunInput(t, "flux getattr instance-level\nflux getattr size\nflux run -N2 -n2 printenv FLUX_TASK_RANK | sort\nexit 3\n", "alloc", "-N2")
	if r.Code != 3 || r.Stdout != "1\n2\n0\n1\n" {
		t.Fatalf("flux alloc: %+v", r)
	}
	r = inst.Run(t, "alloc", "-N1", "flux", "getattr", "jobid")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "ƒ") {
		t.Fatalf("flux alloc COMMAND: %+v", r)
	}
}

// TestAllocBgProxyAndTrees starts an instance with alloc --bg and looks
// into it with flux proxy, flux jobs -R and flux pstree.
func TestAllocBgProxyAndTrees(t *testing.T) {
	inst := nestedInstance(t, 2)
	id := strings.TrimSpace(inst.MustRun(t, "alloc", "--bg", "-N1"))
	if got := inst.MustRun(t, "proxy", id, "flux", "getattr", "instance-level"); got != "1\n" {
		t.Fatalf("instance-level in the child: %q", got)
	}
	if got := inst.MustRun(t, "proxy", "jobid:"+id, "flux", "getattr", "jobid"); got != id+"\n" {
		t.Fatalf("jobid in the child: %q", got)
	}
	child := strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "submit", "--job-name=inner", "sleep", "300"))
	top := strings.TrimSpace(inst.MustRun(t, "submit", "--job-name=outer", "sleep", "300"))
	inst.MustRun(t, "job", "wait-event", "-t", "30", top, "start")
	inst.MustRun(t, "proxy", id, "flux", "job", "wait-event", "-t", "30", child, "start")

	// flux uri: the instance's URI, remote (as published) or local
	if got := inst.MustRun(t, "uri", id); !strings.HasPrefix(got, "ssh://") || !strings.HasSuffix(got, "/local\n") {
		t.Errorf("flux uri JOBID: %q", got)
	}
	if got := inst.MustRun(t, "uri", "--local", "jobid:"+id); !strings.HasPrefix(got, "local:///") {
		t.Errorf("flux uri --local jobid:ID: %q", got)
	}
	if r := inst.Run(t, "uri", "bogus"); r.Code == 0 {
		t.Errorf("flux uri bogus: %+v", r)
	}

	// a job path names the child's job
	if got := inst.MustRun(t, "proxy", id, "flux", "jobs", "-n", "-o", "{name}", child); got != "inner\n" {
		t.Fatalf("child job name: %q", got)
	}
	// a job that is not an instance
	if r := inst.Run(t, "proxy", top, "true"); r.Code == 0 || !strings.Contains(r.Stderr, "not a Flux instance") {
		t.Fatalf("proxy to a plain job: %+v", r)
	}

	// the instance fields: asked of the instance, empty for a plain job
	got := inst.MustRun(t, "jobs", "-n", "-o", "{id.f58}|{instance.stats}|{instance.stats.total}|{instance.resources.all.nnodes}|{instance.resources.allocated.ncores}|{instance.progress}|{uri.local}", id, top)
	rows := strings.Split(strings.TrimSpace(got), "\n")
	if len(rows) != 2 || !strings.HasPrefix(rows[0], id+"|PD:0 R:1 CD:0 F:0|1|1|1|0.0|local://") || rows[1] != top+"||||||" {
		t.Fatalf("instance fields:\n%s", got)
	}
	if h := inst.MustRun(t, "jobs", "-o", "{instance.stats.total} {instance.utilization} {instance.resources.free.ncores} {uri}", id); !strings.HasPrefix(h, "NJOBS CORE% FREE URI\n") {
		t.Fatalf("instance field headings:\n%s", h)
	}

	out := inst.MustRun(t, "jobs", "-R", "-o", "{id.f58} {name}")
	want := fmt.Sprintf("\n%s:\n", id)
	if !strings.Contains(out, want) || !strings.Contains(out, child+" inner") || !strings.Contains(out, top+" outer") {
		t.Fatalf("flux jobs -R:\n%s", out)
	}
	if out := inst.MustRun(t, "jobs", "-R", "-L", "0"); strings.Contains(out, want) {
		t.Fatalf("flux jobs -R -L0 recursed:\n%s", out)
	}

	tree := inst.MustRun(t, "pstree")
	lines := strings.Split(strings.TrimRight(tree, "\n"), "\n")
	if len(lines) != 4 || lines[0] != "." || !strings.Contains(tree, "── outer\n") || !strings.Contains(tree, "── flux\n") ||
		!strings.HasSuffix(tree, "    └── inner\n") && !strings.Contains(tree, "│   └── inner\n") {
		t.Fatalf("flux pstree:\n%s", tree)
	}
	ext := inst.MustRun(t, "pstree", "-x")
	if !strings.HasPrefix(ext, "       JOBID USER     ST NTASKS NNODES  RUNTIME") || !strings.Contains(ext, child) {
		t.Fatalf("flux pstree -x:\n%s", ext)
	}

	inst.MustRun(t, "cancel", top, id)
	waitClean(t, inst, top)
	waitClean(t, inst, id)
}

// TestBatchLosesNonCriticalBroker kills the second broker of a 2-node
// batch instance: the batch job keeps running, the child instance marks
// the rank offline, its job on rank 0 keeps running and new work runs
// there; the batch job completes with its script's status.
func TestBatchLosesNonCriticalBroker(t *testing.T) {
	inst := nestedInstance(t, 2)
	dir := t.TempDir()
	t.Cleanup(func() { killPidfiles(t, filepath.Join(dir, "*.pid")) })
	script := filepath.Join(dir, "res.sh")
	body := fmt.Sprintf(`#!/bin/sh
while [ ! -e %s/go ]; do sleep 0.1; done
flux run -n1 echo still-works
`, dir)
	os.WriteFile(script, []byte(body), 0o755)
	id := strings.TrimSpace(inst.MustRun(t, "batch", "-N2", "--output="+filepath.Join(dir, "out"), script))
	uri := strings.TrimSpace(inst.MustRun(t, "proxy", id, "printenv", "FLUX_URI"))
	task := func(name string) string {
		return fmt.Sprintf(`echo $$ > %s/%s.$FLUX_TASK_RANK.pid; exec sleep 300`, dir, name)
	}
	a := strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "submit", "-N1", "-n1", "sh", "-c", task("a")))
	b := strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "submit", "-N2", "-n2", "sh", "-c", task("b")))
	for _, j := range []string{a, b} {
		inst.MustRun(t, "proxy", id, "flux", "job", "wait-event", "-t", "30", j, "start")
	}
	waitFile(t, filepath.Join(dir, "a.0.pid"), filepath.Join(dir, "b.0.pid"), filepath.Join(dir, "b.1.pid"))
	if r := inst.MustRun(t, "proxy", id, "flux", "jobs", "-n", "-o", "{ranks}", a); r != "0\n" {
		t.Fatalf("job a runs on %q", r)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "exec", "-r", "1", "sh", "-c", "echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	// the rundir of the broker about to be killed is in the batch job's
	// FLUX_JOB_TMPDIR on that node, which goes with the job
	rundir := strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "exec", "-r", "1", "flux", "getattr", "rundir"))
	if !strings.Contains(filepath.Base(filepath.Dir(rundir)), "jobtmp-1-") {
		t.Fatalf("child rank 1 rundir %s is not in a job tmpdir", rundir)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h, err := flux.Open(localOr(t, uri))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Offline string `json:"offline"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := h.Call(ctx, "resource.status", 0, nil, &st)
		cancel()
		if err == nil && st.Offline == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 1 of the child never went offline (%v, %+v)", err, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	inst.MustRun(t, "proxy", id, "flux", "job", "wait-event", "-t", "30", b, "clean")
	if got := inst.MustRun(t, "proxy", id, "flux", "jobs", "-n", "-o", "{status} {exception.type}", a, b); got != "RUN \nFAILED node-failure\n" {
		t.Fatalf("child jobs after the loss:\n%s", got)
	}
	if got := nestedJobStatus(t, inst, id); got != "res.sh RUN" {
		t.Fatalf("batch job after the loss: %s", got)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitClean(t, inst, id)
	if got := nestedJobStatus(t, inst, id); got != "res.sh COMPLETED 0" {
		t.Fatalf("batch job: %s", got)
	}
	if out, _ := os.ReadFile(filepath.Join(dir, "out")); !strings.Contains(string(out), "still-works") {
		t.Fatalf("output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Dir(rundir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed broker's rundir %s is left behind (%v)", rundir, err)
	}
}

// TestBatchSurvivesNodeLoss loses a whole node of the enclosing
// instance (its broker and the child broker on it): the enclosing
// job-exec raises a non-fatal exception instead of ending the job.
func TestBatchSurvivesNodeLoss(t *testing.T) {
	inst := nestedInstance(t, 2)
	dir := t.TempDir()
	script := filepath.Join(dir, "res.sh")
	os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nwhile [ ! -e %s/go ]; do sleep 0.1; done\nflux run -n1 echo still-works\n", dir)), 0o755)
	id := strings.TrimSpace(inst.MustRun(t, "batch", "-N2", "--output="+filepath.Join(dir, "out"), script))
	inst.MustRun(t, "proxy", id, "true") // the instance is up
	child, err := strconv.Atoi(strings.TrimSpace(inst.MustRun(t, "proxy", id, "flux", "exec", "-r", "1", "sh", "-c", "echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := strconv.Atoi(strings.TrimSpace(inst.MustRun(t, "exec", "-r", "1", "sh", "-c", "echo $PPID")))
	if err != nil {
		t.Fatal(err)
	}
	// the node's broker first: killed the other way round, a loaded
	// machine gave the job shell there the time to report its task's end
	// through the broker still up, and no node was lost
	syscall.Kill(parent, syscall.SIGKILL)
	syscall.Kill(child, syscall.SIGKILL)
	inst.MustRun(t, "job", "wait-event", "-t", "60", id, "exception")
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitClean(t, inst, id)
	got := strings.TrimSpace(inst.MustRun(t, "jobs", "-n", "-o", "{status} {returncode} {exception.severity} {exception.type}", id))
	if got != "COMPLETED 0 1 node-failure" {
		t.Fatalf("batch job: %s", got)
	}
	if out, _ := os.ReadFile(filepath.Join(dir, "out")); !strings.Contains(string(out), "still-works") {
		t.Fatalf("output:\n%s", out)
	}
}

func localOr(t *testing.T, uri string) string {
	t.Helper()
	u, err := localURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitFile waits for files to exist.
func waitFile(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range paths {
		for {
			if _, err := os.Stat(p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear", p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestAllocBatchConf: --conf configures the new instance (its brokers
// fetch the table from the enclosing job), values merge in order, and a
// configuration the brokers would refuse is refused at submission.
func TestAllocBatchConf(t *testing.T) {
	inst := nestedInstance(t, 2)
	got := inst.MustRun(t, "alloc", "-N1", `--conf=policy.limits.duration="1m"`, "--conf={\"queues\":{\"debug\":{}}}",
		"flux", "config", "get", "policy.limits.duration")
	if got != "1m\n" && got != "\"1m\"\n" {
		t.Errorf("configuration in the instance: %q", got)
	}
	if q := inst.MustRun(t, "alloc", "-N1", "--conf=[queues.debug]", "flux", "queue", "list"); !strings.Contains(q, "debug") {
		t.Errorf("queues of the instance:\n%s", q)
	}
	if r := inst.Run(t, "alloc", "-N1", "--conf=policy.limits.duration=bogus", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "policy.limits.duration") {
		t.Errorf("bad --conf: %+v", r)
	}
}
