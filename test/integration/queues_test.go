package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// policyConf configures two queues on two nodes each, a default queue and
// instance-wide limits (flux-config-queues(5), flux-config-policy(5)).
const policyConf = `
[policy.limits]
duration = "1h"
job-size.max.nnodes = 2

[policy.jobspec.defaults.system]
queue = "batch"
duration = "30m"

[queues.batch]
requires = ["batch"]

[queues.debug]
requires = ["debug"]
policy.limits.duration = "10m"
policy.limits.job-size.max.nnodes = 1
policy.jobspec.defaults.system.duration = "5m"

[resource]
noverify = true  # fake hosts and cores

[[resource.config]]
hosts = "node[0-3]"
cores = "0-3"
[[resource.config]]
hosts = "node[0-1]"
properties = ["batch"]
[[resource.config]]
hosts = "node[2-3]"
properties = ["debug"]
`

// TestQueuesFromConfig: named queues and policy limits come from the
// instance's TOML configuration.
func TestQueuesFromConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(policyConf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", dir}})}

	// a queue that is not configured is refused at submit, nothing queued
	e.fail("'nope' is not a valid queue (queues: batch, debug)", "submit", "--queue=nope", "true")
	if n := e.must("jobs", "-a", "-n", "-o", "{id}"); n != "" {
		t.Fatalf("a refused job was listed: %q", n)
	}

	// no queue named: the default queue is filled in, and a queue's jobs
	// run only on the nodes with its properties
	// (the debug queue's limit of one node holds for the owner too)
	batch := e.submit(testDuration("0.01"), "-N2", "-n2", "true")
	debug := e.submit(testDuration("0.01"), "--queue=debug", "-N1", "-n4", "true")
	for _, id := range []struct {
		id    string
		queue string
		nodes []string
	}{{batch.String(), "batch", []string{"node[0-1]"}}, {debug.String(), "debug", []string{"node2", "node3"}}} {
		e.must("job", "wait-event", "-t", "30", id.id, "clean")
		got := e.must("jobs", "-n", "-o", "{queue} {nodelist} {result}", id.id)
		ok := false
		for _, nodes := range id.nodes {
			ok = ok || got == id.queue+" "+nodes+" COMPLETED"
		}
		if !ok {
			t.Errorf("job in %s: %q", id.queue, got)
		}
	}
	e.fail("requested nnodes (2) exceeds policy limit of 1 for queue debug", "submit", "--queue=debug", "-N2", "-n2", "true")
	if js := e.must("job", "info", batch.String(), "jobspec"); !strings.Contains(js, `"queue":"batch"`) {
		t.Errorf("stored jobspec lacks the default queue: %s", js)
	}
	// jobs that set no time limit get their queue's default, or the
	// instance's
	for _, c := range []struct{ queue, want string }{{"batch", "1800.0"}, {"debug", "300.0"}} {
		id := e.submit("--urgency=hold", "--queue="+c.queue, "true")
		if d := e.field(id, "{duration}"); d != c.want {
			t.Errorf("default duration in %s: %s, want %s", c.queue, d, c.want)
		}
		e.must("cancel", id.String())
	}

	// flux resource list shows which queue nodes belong to, and -q
	// selects a queue's
	if got := e.must("resource", "list", "-s", "all", "-n", "-o", "{queue} {nodelist}"); got != "batch node[0-1]\ndebug node[2-3]" {
		t.Errorf("resource list by queue: %q", got)
	}
	if got := e.must("resource", "list", "-q", "debug", "-s", "all", "-n", "-o", "{nodelist}"); got != "node[2-3]" {
		t.Errorf("resource list -q debug: %q", got)
	}
	e.fail("--queue: nope: no such queue", "resource", "list", "-q", "nope")
	// every state asked for has a line with -q too, empty or not
	if got := e.must("resource", "list", "-q", "debug", "-n", "-o", "{state} {queue} {nnodes}"); got != "free debug 2\nallocated debug 0\ndown debug 0" {
		t.Errorf("resource list -q debug: %q", got)
	}
	if got := e.must("resource", "info", "-q", "batch"); got != "2 Nodes, 8 Cores, 0 GPUs" {
		t.Errorf("resource info -q batch: %q", got)
	}
	if got := e.must("resource", "R", "-q", "debug"); !strings.Contains(got, `"nodelist":["node[2-3]"]`) {
		t.Errorf("resource R -q debug: %s", got)
	}
	e.fail("--queue: nope: no such queue", "resource", "info", "-q", "nope")
	if got := e.must("resource", "status", "-q", "debug", "-n", "-o", "{state} {nodelist}"); got != "avail node[2-3]" {
		t.Errorf("resource status -q debug: %q", got)
	}
	e.must("resource", "drain", "node1", "testing")
	if got := e.must("resource", "drain", "-q", "batch", "-n", "-o", "{state} {reason} {nodelist}"); got != "drained testing node1" {
		t.Errorf("resource drain -q batch: %q", got)
	}
	if got := e.must("resource", "drain", "-q", "debug", "-n", "-o", "{state} {nodelist}"); got != "" {
		t.Errorf("resource drain -q debug: %q", got)
	}
	e.must("resource", "undrain", "node1")
	e.fail("--queue: nope: no such queue", "resource", "status", "-q", "nope")

	// the queue's requires and the job's own constraint both apply
	e.fail("no node satisfies the constraints", "submit", "--queue=batch", "--requires=debug", "true")
	// more nodes than the queue has is infeasible, not left pending
	e.fail("constraints allow 2", "submit", "--queue=debug", "-N3", "-n3", "true")

	// policy.limits configured the limit plugins
	if q := e.must("jobtap", "query", ".limit-duration"); !strings.Contains(q, `"duration":3600`) {
		t.Errorf("limit-duration: %s", q)
	}
	if q := e.must("jobtap", "query", ".limit-job-size"); !strings.Contains(q, `"nnodes":2`) {
		t.Errorf("limit-job-size: %s", q)
	}
	// a queue's own limits replace the instance's for its jobs (checked
	// as another user too)
	if canRunAsGuest(e) {
		for _, c := range []struct {
			args []string
			want string // "" accepted
		}{
			{[]string{"--queue=debug", "-t", "20m"}, "requested duration (20m) exceeds policy limit of 10m for queue debug"},
			{[]string{"--queue=batch", "-t", "20m"}, ""},
			{[]string{"--queue=debug", "-t", "5m", "-N2", "-n2"}, "requested nnodes (2) exceeds policy limit of 1 for queue debug"},
			{[]string{"--queue=batch", "-t", "5m", "-N2", "-n2"}, ""},
		} {
			r := e.asGuest(append(append([]string{"submit", "--urgency=hold"}, c.args...), "true")...)
			if c.want == "" && r.Code != 0 || c.want != "" && (r.Code == 0 || !strings.Contains(r.Stderr, c.want)) {
				t.Errorf("guest submit %v: exit %d %q, want %q", c.args, r.Code, r.Stderr, c.want)
			}
		}
		// moving a job to a queue holds it to that queue's limits too
		held := e.asGuest("submit", "--urgency=hold", "--queue=batch", "-t", "20m", "true")
		if held.Code != 0 {
			t.Fatalf("guest submit: %s", held.Stderr)
		}
		if r := e.asGuest("update", strings.TrimSpace(held.Stdout), "queue=debug"); r.Code == 0 || !strings.Contains(r.Stderr, "requested duration (20m) exceeds policy limit of 10m for queue debug") {
			t.Errorf("guest moves a 20m job to debug: exit %d %q", r.Code, r.Stderr)
		}
		e.must("cancel", "--all", "--user=all")
	}

	// flux update ID queue=NAME moves a pending job, with flux-core's
	// refusals; the scheduler must be able to run it in its new queue
	// (checked against the new queue's limits, the owner's job too)
	big := e.submit(testDuration("0.01"), "--urgency=hold", "-N2", "-n2", "true")
	e.fail("requested nnodes (2) exceeds policy limit of 1 for queue debug", "update", big.String(), "queue=debug")
	e.must("cancel", big.String())
	moving := e.submit(testDuration("0.01"), "--urgency=hold", "-t", "5m", "-N1", "-n2", "true")
	e.must("update", moving.String(), "queue=debug")
	e.fail("job queue is already set to debug", "update", moving.String(), "queue=debug")
	e.fail("'nope' is not a valid queue", "update", moving.String(), "queue=nope")
	e.must("queue", "disable", "-m", "closed", "batch")
	e.fail("queue batch is currently disabled", "update", moving.String(), "queue=batch")
	e.must("queue", "enable", "batch")
	e.must("job", "urgency", moving.String(), "default")
	e.waitEvent(moving, "clean")
	if got := e.must("jobs", "-n", "-o", "{queue} {nodelist}", moving.String()); got != "debug node2" && got != "debug node3" {
		t.Errorf("moved job: %q", got)
	}
	pinned := e.submit("--urgency=hold", "-t", "5m", "--requires=host:node0", "true")
	e.fail("no node satisfies the constraints", "update", pinned.String(), "queue=debug")
	e.must("cancel", pinned.String())

	// flux queue: disable refuses submissions with the reason; stop
	// keeps jobs pending until start
	e.must("queue", "disable", "-m", "maintenance", "debug")
	e.fail("job submission to debug is disabled: maintenance", "submit", "--queue=debug", "true")
	if got := e.must("queue", "status", "debug"); got != "debug: Job submission is disabled: maintenance\ndebug: Scheduling is started" {
		t.Errorf("status after disable: %q", got)
	}
	e.must("queue", "enable", "debug")
	e.fail("Named queues are defined. Specify queues or use --all.", "queue", "stop")
	e.must("queue", "stop", "-m", "upgrade", "batch")
	held := e.submit(testDuration("0.01"), "true")
	e.must("queue", "idle", "--timeout=30s")
	if st := e.must("jobs", "-n", "-o", "{state}", held.String()); st != "SCHED" {
		t.Errorf("job of a stopped queue: %s", st)
	}
	if got := e.must("queue", "list", "-n", "-o", "{queue} {enabled.ascii} {started.ascii} {limits.timelimit!F} {limits.range.nnodes}"); got != "batch y n 1h 0-2\ndebug y y 10m 0-1" {
		t.Errorf("queue list: %q", got)
	}
	e.must("queue", "start", "--all")
	e.must("queue", "drain", "--timeout=30s")
	if r := e.result(held); r != "COMPLETED" {
		t.Errorf("job after flux queue start: %s", r)
	}
}

// TestQueueAnonymous: without [queues], flux queue speaks of the one
// anonymous queue.
func TestQueueAnonymous(t *testing.T) {
	e := start(t)
	// the scheduler may still be saying hello: "Scheduler is offline"
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.must("queue", "status")
		if got == "Job submission is enabled\nScheduling is started" {
			break
		}
		if time.Now().After(deadline) || got != "Job submission is enabled\nScheduling is stopped: Scheduler is offline" {
			t.Fatalf("status: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.fail("'batch' is not a valid queue (no queues are configured)", "submit", "--queue=batch", "true")
	e.fail("'batch' is not a valid queue", "queue", "stop", "batch")
	e.must("queue", "stop")
	id := e.submit(testDuration("0.01"), "true")
	e.must("queue", "start")
	e.waitEvent(id, "clean")
	e.must("queue", "drain")

	// idle prints the pending jobs (--quiet: only if any); -t is
	// --timeout, for idle and drain
	if got := e.must("queue", "idle"); got != "0 jobs" {
		t.Errorf("idle: %q", got)
	}
	if got := e.must("queue", "idle", "--quiet"); got != "" {
		t.Errorf("idle --quiet: %q", got)
	}
	held := e.submit("--urgency=hold", "true")
	if got := e.must("queue", "idle", "-t", "30s", "--quiet"); got != "1 jobs" {
		t.Errorf("idle --quiet with a held job: %q", got)
	}
	e.fail("drain: timeout", "queue", "drain", "-t", "0.1s")
	e.fail(`--timeout: invalid Flux standard duration "soon"`, "queue", "idle", "--timeout=soon")
	e.must("cancel", held.String())
	e.must("queue", "drain", "-t", "30s")
}

// startQueues starts a 4-node instance configured with policyConf.
func startQueues(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(policyConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", dir}})}
}

// TestQueueStatusAndControl: flux queue status takes a queue as argument
// or -q, and -v adds the job manager's counts; enable/disable print the
// submission line, start/stop the scheduling line (flux-core).
func TestQueueStatusAndControl(t *testing.T) {
	e := startQueues(t)
	e.waitFor("the scheduler", func() bool {
		return !strings.Contains(e.must("queue", "status"), "offline")
	})
	both := "debug: Job submission is enabled\ndebug: Scheduling is started"
	if got := e.must("queue", "status", "debug"); got != both {
		t.Errorf("status debug: %q", got)
	}
	if got := e.must("queue", "status", "-q", "debug"); got != both {
		t.Errorf("status -q debug: %q", got)
	}
	e.fail("Conflicting queues specified as --queue=debug and batch", "queue", "status", "-q", "debug", "batch")
	e.fail("'nope' is not a valid queue", "queue", "status", "nope")
	e.fail("'nope' is not a valid queue", "queue", "status", "-v", "-q", "nope")

	// -v: every queue, then the counts, which are real: a running job,
	// and a job waiting in a stopped queue, which is not queued for the
	// scheduler (flux-core leaves it out of its alloc queue)
	running := e.submit("--queue=debug", testDuration("600s"), "true")
	e.waitEvent(running, "start")
	e.must("queue", "stop", "--quiet", "batch")
	waiting := e.submit("--queue=batch", "true")
	e.waitEvent(waiting, "priority")
	want := "batch: Job submission is enabled\nbatch: Scheduling is stopped\n" +
		"debug: Job submission is enabled\ndebug: Scheduling is started\n" +
		"0 alloc requests queued\n0 alloc requests pending to scheduler\n1 running jobs"
	e.waitFor("status -v counts", func() bool { return e.must("queue", "status", "-v") == want })
	if got := e.must("queue", "status", "-v", "debug"); got != want {
		t.Errorf("status -v debug: %q", got)
	}

	// start/stop: the scheduling line; -v every queue and the counts
	if got := e.must("queue", "start", "-q", "batch"); got != "batch: Scheduling is started" {
		t.Errorf("start -q batch: %q", got)
	}
	e.waitEvent(waiting, "clean")
	if got := e.must("queue", "stop", "-v", "-m", "upgrade", "debug"); got != "batch: Scheduling is started\n"+
		"debug: Scheduling is stopped: upgrade\n0 alloc requests queued\n0 alloc requests pending to scheduler\n1 running jobs" {
		t.Errorf("stop -v debug: %q", got)
	}
	if got := e.must("queue", "start", "--all"); got != "batch: Scheduling is started\ndebug: Scheduling is started" {
		t.Errorf("start --all: %q", got)
	}
	e.fail("Named queues are defined. Specify queues or use --all.", "queue", "start")
	e.fail("a queue name (batch) and --all cannot be used together", "queue", "start", "--all", "batch")
	e.fail("Conflicting queues specified as --queue=debug and batch", "queue", "stop", "-q", "debug", "batch")
	e.fail("'nope' is not a valid queue", "queue", "stop", "nope")

	// enable/disable: the submission line, flux-core's default reason;
	// -v every queue, no counts
	if got := e.must("queue", "disable", "debug"); got != "debug: Job submission is disabled: disabled by administrator" {
		t.Errorf("disable debug: %q", got)
	}
	e.fail("job submission to debug is disabled: disabled by administrator", "submit", "--queue=debug", "true")
	if got := e.must("queue", "enable", "-v", "-q", "debug"); got != "batch: Job submission is enabled\ndebug: Job submission is enabled" {
		t.Errorf("enable -v -q debug: %q", got)
	}
	if got := e.must("queue", "disable", "--quiet", "-m", "closed", "-q", "batch"); got != "" {
		t.Errorf("disable --quiet: %q", got)
	}
	if got := e.must("queue", "status", "batch"); got != "batch: Job submission is disabled: closed\nbatch: Scheduling is started" {
		t.Errorf("status after disable -q batch: %q", got)
	}
	e.must("queue", "enable", "batch")
	e.must("cancel", running.String())
}

// TestQueueList: flux queue list's default format clips the size ranges
// to each queue's resources (flux-core), policy shows the configured
// ones, and the resources.* fields count a queue's nodes by state.
func TestQueueList(t *testing.T) {
	e := startQueues(t)
	e.waitFor("the scheduler", func() bool {
		return !strings.Contains(e.must("queue", "status"), "offline")
	})
	want := "QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS\n" +
		"batch*    ✔  ✔      30m       1h        0-2        0-8        0-0\n" +
		"debug     ✔  ✔       5m      10m        0-1        0-8        0-0"
	if got := e.must("queue", "list"); got != want {
		t.Errorf("list:\n%s\nwant:\n%s", got, want)
	}
	want = "QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS\n" +
		"batch*    ✔  ✔      30m       1h        0-2      0-inf      0-inf\n" +
		"debug     ✔  ✔       5m      10m        0-1      0-inf      0-inf"
	if got := e.must("queue", "list", "-o", "policy"); got != want {
		t.Errorf("list -o policy:\n%s\nwant:\n%s", got, want)
	}

	// a running job in debug, a drained node in batch
	id := e.submit("--queue=debug", "-N1", testDuration("600s"), "true")
	e.waitEvent(id, "start")
	e.must("resource", "drain", "node0", "test")
	e.must("queue", "stop", "--quiet", "debug")
	want = "QUEUE    EN ST  NODES   NODES:UP NODES:DOWN NODES:ALLOC NODES:FREE\n" +
		"batch*    ✔  ✔      2          1          1           0          1\n" +
		"debug     ✔  ✗      2          2          0           1          1"
	e.waitFor("list -o nodes", func() bool { return e.must("queue", "list", "-o", "nodes") == want })
	if got := e.must("queue", "list", "-q", "debug", "-n", "-o",
		"{queue} {resources.all.ncores} {resources.allocated.ncores} {resources.free.ncores} {submission} {scheduling}"); got != "debug 8 4 4 enabled stopped" {
		t.Errorf("debug resources: %q", got)
	}
	if got := e.must("queue", "list", "-o", "{queue} {resources.up.ncores} {resources.down.ngpus} {limits.min.nnodes} {limits.max.nnodes}"); got != "QUEUE CORES:UP GPUS:DOWN MINNODES MAXNODES\nbatch 4 0 0 2\ndebug 8 0 0 1" {
		t.Errorf("headings and counts: %q", got)
	}
	e.fail(`unknown format field "resources.busy.nnodes"`, "queue", "list", "-o", "{resources.busy.nnodes}")
	e.fail("'nope' is not a valid queue", "queue", "list", "-q", "nope")
	e.must("cancel", id.String())
	e.must("resource", "undrain", "node0")
	e.must("queue", "start", "--quiet", "debug")
}

// TestPolicyAccess: policy.access and queues.NAME.policy.access limit who
// may submit (flux-config-policy(5)); the owner always may; a reload
// changes it.
func TestPolicyAccess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	write := func(conf string) {
		if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const restricted = `
[policy.access]
allow-group = ["65534"]   # nobody's group, by number (names work too)
[queues.open]
[queues.staff.policy.access]
allow-user = ["root"]
`
	write(restricted)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", dir}})}
	if !canRunAsGuest(e) {
		t.Skip("needs root to run a client as another user")
	}
	r0 := e.asGuest("submit", "-q", "open", "--urgency=hold", "true")
	if r0.Code != 0 {
		t.Fatalf("guest (allowed by group) refused: %+v", r0)
	}
	// nor may the guest move its job into a queue it may not submit to
	held := strings.TrimSpace(r0.Stdout)
	if r := e.asGuest("update", held, "queue=staff"); r.Code == 0 || !strings.Contains(r.Stderr, "may not submit to queue staff") {
		t.Fatalf("guest moving its job to staff: %+v", r)
	}
	r := e.asGuest("submit", "-q", "staff", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "may not submit to queue staff: not in queues.staff.policy.access.allow-user or allow-group") {
		t.Fatalf("guest submit to staff: %+v", r)
	}
	e.submit("-q", "staff", "--urgency=hold", "true") // the owner always may
	write("[queues.open]\n[queues.staff]\n")
	e.must("config", "reload")
	if r := e.asGuest("submit", "-q", "staff", "--urgency=hold", "true"); r.Code != 0 {
		t.Fatalf("guest refused after the access table was removed: %+v", r)
	}
	write(restricted + "[policy.access.x]\n")
	if r := e.flux("config", "reload"); r.Code == 0 || !strings.Contains(r.Stderr, "policy.access.x: unknown key") {
		t.Fatalf("reload of a bad access table: %+v", r)
	}
}
