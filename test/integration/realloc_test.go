package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestRealloc (RFC 51): a running job grows by whole nodes and by cores,
// shrinks, and what it gave back runs another job; its R, eventlog and
// flux jobs follow; requests that cannot be met wait and can be
// cancelled, or are denied with --no-wait.
func TestRealloc(t *testing.T) {
	e := start(t)
	id := e.submit("-N1", "-x", testDuration("120s"), "true")
	e.waitEvent(id, "start")
	e.must("job", "realloc", id.String(), "--add-nodes=2")
	if got := e.field(id, "{nnodes} {ranks}"); got != "3 [0-2]" {
		t.Errorf("after adding 2 nodes: %q", got)
	}
	R := e.must("job", "info", id.String(), "R")
	if !strings.Contains(R, `"rank":"0-2"`) {
		t.Errorf("R after growing: %s", R)
	}
	// the job gives back its last node; another job can use it
	e.must("job", "realloc", id.String(), "--remove-nodes=1")
	if got := e.field(id, "{nnodes} {ranks}"); got != "2 [0-1]" {
		t.Errorf("after giving back a node: %q", got)
	}
	other := e.submit("-N2", "-x", testDuration("0.1s"), "true")
	e.waitEvent(other, "clean")
	if got := e.field(other, "{ranks}"); got != "[2-3]" {
		t.Errorf("the next job ran on %s, want [2-3]", got)
	}
	// the events of RFC 21/51, in order
	var seq []string
	for _, ev := range e.events(id)[5:] { // after submit .. alloc
		c := ctxOf(t, ev)
		switch ev.Name {
		case "resource-update":
			if c["R_delta_add"] != nil {
				seq = append(seq, "update+")
			} else if c["R_delta_sub"] != nil {
				seq = append(seq, "update-")
				if c["alloc_id"] == nil {
					t.Errorf("resource-update R_delta_sub without the alloc_id of its request: %s", ev.Context)
				}
			}
		case "release", "free":
			if c["final"] == false {
				seq = append(seq, ev.Name+"("+c["ranks"].(string)+")")
			}
		case "alloc":
			if c["alloc_id"] == nil {
				t.Errorf("a second alloc without alloc_id: %s", ev.Context)
			}
			seq = append(seq, "alloc")
		}
	}
	if got := strings.Join(seq, " "); got != "alloc update+ update- release(2) free(2)" {
		t.Errorf("realloc events: %s\n%s", got, e.must("job", "eventlog", id.String()))
	}
	// nothing free for 3 more whole nodes now; too many to give back
	e.fail("denied: no free resources", "job", "realloc", "--no-wait", id.String(), "--add-nodes=3")
	e.fail("can never be met", "job", "realloc", id.String(), "--add-nodes=9")
	e.fail("cannot give back 2", "job", "realloc", id.String(), "--remove-nodes=2")
	// whole nodes, the last ones the job got
	part := filepath.Join(t.TempDir(), "part.R")
	os.WriteFile(part, []byte(`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0"}}]}}`), 0o644)
	e.fail("a job gives back whole nodes", "job", "realloc", id.String(), "--remove="+part)
	e.fail("nothing to do", "job", "realloc", id.String())
	pending := e.submit("--urgency=hold", "true")
	e.fail("only running jobs", "job", "realloc", pending.String(), "--add-cores=1")
	if canRunAsGuest(e) {
		if r := e.asGuest("job", "realloc", id.String(), "--add-cores=1"); r.Code == 0 {
			t.Errorf("a guest grew another user's job: %+v", r)
		}
	}
	t.Run("malformed", func(t *testing.T) {
		h := e.inst.Handle(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range []struct {
			payload map[string]any
			want    string
		}{
			{map[string]any{"id": id}, "at least one of spec_add and spec_sub"},
			{map[string]any{"id": id, "spec_add": "two nodes"}, "spec_add: must be a jobspec"},
			{map[string]any{"id": id, "bogus": 1}, "bogus: unknown key"},
			{map[string]any{"spec_add": map[string]any{}}, "id is required"},
		} {
			err := h.Call(ctx, "job-manager.realloc", 0, c.payload, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: got %v, want an error with %q", c.payload, err, c.want)
			}
		}
		// the scheduler takes changes from the job manager only, which
		// keeps the job's R: a direct request would leave them disagreeing
		err := h.Call(ctx, "sched.realloc", 0, map[string]any{"job_id": id, "spec_sub": map[string]any{"version": 1}}, nil)
		if err == nil || !strings.Contains(err.Error(), "ask job-manager.realloc") {
			t.Errorf("a direct sched.realloc: %v", err)
		}
	})
	t.Run("wait and cancel", func(t *testing.T) {
		// [2-3] busy: growing by 2 nodes waits
		blocker := e.submit("-N2", "-x", testDuration("120s"), "true")
		e.waitEvent(blocker, "start")
		h := e.inst.Handle(t)
		two, err := jobspec.FromCommand([]string{"realloc"}, jobspec.CommandOptions{NTasks: 2, NNodes: 2, Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := two.MarshalJSON()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *job.ReallocResponse, 1)
		go func() {
			resp, err := job.Realloc(ctx, h, id, job.ReallocRequest{SpecAdd: spec})
			if err != nil {
				t.Errorf("realloc: %v", err)
			}
			done <- resp
		}()
		select {
		case resp := <-done:
			t.Fatalf("answered while the nodes were busy: %+v", resp)
		case <-time.After(500 * time.Millisecond):
		}
		cancel()
		if resp := <-done; resp == nil || resp.Type != job.ReallocCancel {
			t.Fatalf("cancelled request answered %+v, want CANCEL", resp)
		}
		// waiting again: it is met as soon as the blocker ends
		go func() {
			resp, err := job.Realloc(context.Background(), h, id, job.ReallocRequest{SpecAdd: spec})
			if err != nil {
				t.Errorf("realloc: %v", err)
			}
			done <- resp
		}()
		time.Sleep(200 * time.Millisecond)
		e.must("cancel", blocker.String())
		select {
		case resp := <-done:
			if resp == nil || resp.Type != job.ReallocSuccess || len(resp.RDeltaAdd) == 0 {
				t.Fatalf("after the blocker ended: %+v", resp)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the waiting request was not met after the nodes were freed")
		}
		if got := e.field(id, "{nnodes}"); got != "4" {
			t.Errorf("job has %s nodes, want 4", got)
		}
	})
	// when the job ends, everything it holds is free again
	e.must("cancel", id.String(), pending.String())
	e.waitEvent(id, "clean")
	if got := e.must("resource", "list", "-s", "allocated", "-n", "-o", "{nnodes}"); got != "0" {
		t.Errorf("%s nodes still allocated after the job ended", got)
	}
}

// TestReallocShell: a real job asks its own shell for more nodes (flux
// job realloc without an ID, inside the job), its tasks start on them,
// then it gives them back through the shell's release, which stops the
// tasks there; SUCCESS, DENY and CANCEL all reach the task.
func TestReallocShell(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	blocker := e.submit("-N1", "sleep", "300") // rank 0
	e.waitEvent(blocker, "start")
	script := `PATH=` + filepath.Dir(e.inst.Bin) + `:$PATH
exec >>` + dir + `/log.$FLUX_TASK_RANK 2>&1
if [ "$FLUX_TASK_RANK" != 0 ]; then echo grown task $FLUX_TASK_RANK of $FLUX_JOB_SIZE; exec sleep 300; fi
flux job realloc --add-nodes=2 || exit 1
echo grew
flux job realloc --add-nodes=1 & p=$!; sleep 1; kill -INT $p; wait $p; echo cancel=$?
flux job realloc --no-wait --add-nodes=1; echo deny=$?
while [ ! -e ` + dir + `/shrink ]; do sleep 0.1; done
flux job realloc --remove-nodes=2 || exit 2
echo shrunk
while [ ! -e ` + dir + `/regrow ]; do sleep 0.1; done
flux job realloc --add-nodes=1 || exit 3
echo regrew
exec sleep 300`
	id := e.submit("-N1", "sh", "-c", script)
	read := func(rank string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "log."+rank))
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(read("1"), "grown task 1") || !strings.Contains(read("2"), "grown task 2") {
		if time.Now().After(deadline) {
			t.Fatalf("the job's tasks did not start on its new nodes; task 0 printed:\n%s\n%s\n%s", read("0"),
				e.flux("job", "eventlog", id.String()).Stdout, e.flux("dmesg").Stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(read("0"), "deny="); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for DENY and CANCEL; task 0 printed:\n%s\n%s\n%s", read("0"),
				e.flux("job", "eventlog", id.String()).Stdout, e.flux("dmesg").Stdout)
		}
	}
	log0 := read("0")
	// an interrupted request ends as an interrupted command does (128 +
	// SIGINT), and is gone: the next one is not refused as a second
	for _, want := range []string{"grew", "cancel=130", "denied: no free resources", "deny=1"} {
		if !strings.Contains(log0, want) {
			t.Errorf("task 0 did not print %q:\n%s", want, log0)
		}
	}
	if got := e.field(id, "{nnodes} {ranks}"); got != "3 [1-3]" {
		t.Errorf("grown job: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "shrink"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the job to give back its nodes", func() bool { return strings.Contains(read("0"), "shrunk") })
	if got := e.field(id, "{nnodes} {ranks}"); got != "1 1" {
		t.Errorf("shrunk job: %q\n%s", got, read("0"))
	}
	// the nodes given back run another job
	other := e.submit("-N2", "true")
	if got := e.result(other); got != "COMPLETED" {
		t.Errorf("a job on the nodes given back: %s", got)
	}
	if got := e.field(other, "{ranks}"); got != "[2-3]" {
		t.Errorf("the next job ran on %s, want [2-3]", got)
	}
	// growing again after giving nodes back: the new task takes the
	// first free task rank again
	if err := os.WriteFile(filepath.Join(dir, "regrow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the job to grow again", func() bool { return strings.Contains(read("0"), "regrew") })
	e.waitFor("its task on the new node", func() bool { return strings.Contains(read("1"), "grown task 1 of 2") })
	e.must("cancel", id.String(), blocker.String())
	if r := e.flux("job", "wait-event", "-t", "30", id.String(), "clean"); r.Code != 0 {
		t.Fatalf("the job did not end after flux cancel:\n%s\n%s\n%s", e.flux("job", "eventlog", id.String()).Stdout,
			e.flux("job", "eventlog", "-p", "exec", id.String()).Stdout, e.flux("dmesg").Stdout)
	}
	if got := e.result(id); got != "CANCELED" {
		t.Errorf("job result %s", got)
	}
}

// inInstance runs the flux command against the instance at uri (a nested
// one), with the flux binary first in PATH.
func (e *env) inInstance(uri string, args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.inst.Bin, args...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri, "PATH="+filepath.Dir(e.inst.Bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestReallocNested: a nested instance (flux alloc) grows from 1 to 3
// nodes of its parent, runs a 3-node job on them, grows to 4, then gives
// 3 back: its
// brokers stop and the parent has the nodes free again, with the events
// of RFC 21/51 in order in the parent's eventlog.
func TestReallocNested(t *testing.T) {
	e := start(t)
	idText := e.must("alloc", "--bg", "-N1")
	id, err := jobid.Parse(idText)
	if err != nil {
		t.Fatalf("flux alloc --bg printed %q", idText)
	}
	uri := e.must("uri", "--local", id.String())
	child := func(args ...string) string {
		t.Helper()
		out, err := e.inInstance(uri, args...)
		if err != nil {
			t.Fatalf("flux %s in the child: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if out := child("resource", "grow", "--nodes=2"); !strings.Contains(out, "grew by 2 node(s)") {
		t.Errorf("grow printed %q", out)
	}
	if got := child("getattr", "size"); got != "3" {
		t.Errorf("child size %s after growing, want 3", got)
	}
	if out := child("run", "-N3", "hostname"); len(strings.Fields(out)) != 3 {
		t.Errorf("a 3-node job in the grown child printed %q", out)
	}
	// a second growth: its broker finds the first growth's in PMI
	if out := child("resource", "grow", "--nodes=1"); !strings.Contains(out, "grew by 1 node(s): ranks 3 ") {
		t.Errorf("second grow printed %q", out)
	}
	if got := e.field(id, "{nnodes}"); got != "4" {
		t.Errorf("the parent's job has %s nodes, want 4", got)
	}
	// a job on the nodes to give back: shrink waits for it
	busy := child("submit", "-N4", "sleep", "1")
	if out := child("resource", "shrink", "--nodes=3"); !strings.Contains(out, "gave back 3 node(s)") {
		t.Errorf("shrink printed %q", out)
	}
	if st := child("jobs", "-n", "-o", "{result}", busy); st != "COMPLETED" {
		t.Errorf("the job on the nodes given back: %s (shrink must wait for it)", st)
	}
	if got := child("getattr", "size"); got != "1" {
		t.Errorf("child size %s after shrinking, want 1", got)
	}
	if got := child("resource", "list", "-s", "all", "-n", "-o", "{nnodes}"); got != "1" {
		t.Errorf("child inventory %s nodes after shrinking, want 1", got)
	}
	if got := e.field(id, "{nnodes}"); got != "1" {
		t.Errorf("the parent's job has %s nodes, want 1", got)
	}
	if got := e.must("resource", "list", "-s", "free", "-n", "-o", "{nnodes}"); got != "3" {
		t.Errorf("the parent has %s nodes free, want 3", got)
	}
	// and grows again onto nodes it gave back: new brokers take the
	// ranks the old ones left
	if out := child("resource", "grow", "--nodes=2", "--timeout=30s"); !strings.Contains(out, "grew by 2 node(s): ranks 1-2") {
		t.Errorf("growing again printed %q", out)
	}
	if out := child("run", "-N3", "true"); out != "" {
		t.Errorf("a 3-node job after growing again printed %q", out)
	}
	if out := child("resource", "shrink", "--nodes=2"); !strings.Contains(out, "gave back 2 node(s)") {
		t.Errorf("second shrink printed %q", out)
	}
	var seq []string
	for _, ev := range e.events(id) {
		c := ctxOf(t, ev)
		switch {
		case ev.Name == "alloc" && c["alloc_id"] != nil:
			seq = append(seq, "alloc")
		case ev.Name == "resource-update" && c["R_delta_add"] != nil:
			seq = append(seq, "update+")
		case ev.Name == "resource-update" && c["R_delta_sub"] != nil:
			seq = append(seq, "update-")
		case (ev.Name == "release" || ev.Name == "free") && c["final"] == false:
			seq = append(seq, ev.Name)
		}
	}
	if got := strings.Join(seq, " "); got != "alloc update+ alloc update+ update- release free alloc update+ update- release free" {
		t.Errorf("the parent job's realloc events: %s", got)
	}
	e.must("cancel", id.String())
	e.waitEvent(id, "clean")
}

// TestReallocCycles: 1,000 grow/shrink cycles of a running job leave the
// scheduler, the job manager (the job's R) and job-list agreeing, and
// nothing allocated once the job ends.
func TestReallocCycles(t *testing.T) {
	e := start(t)
	id := e.submit("-N1", "-x", testDuration("600s"), "true")
	e.waitEvent(id, "start")
	h := e.inst.Handle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	one := func(opts jobspec.CommandOptions) []byte {
		js, err := jobspec.FromCommand([]string{"realloc"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := js.MarshalJSON()
		return b
	}
	add := one(jobspec.CommandOptions{NTasks: 2, NNodes: 2, Exclusive: true})
	sub := one(jobspec.CommandOptions{NTasks: 2, NNodes: 2})
	const cycles = 1000
	for i := 0; i < cycles; i++ {
		resp, err := job.Realloc(ctx, h, id, job.ReallocRequest{SpecAdd: add})
		if err != nil || resp.Type != job.ReallocSuccess {
			t.Fatalf("cycle %d: grow: %+v %v", i, resp, err)
		}
		resp, err = job.Realloc(ctx, h, id, job.ReallocRequest{SpecSub: sub})
		if err != nil || resp.Type != job.ReallocSuccess {
			t.Fatalf("cycle %d: shrink: %+v %v", i, resp, err)
		}
		R, err := rset.Parse(resp.RDeltaSub)
		if err != nil {
			t.Fatalf("cycle %d: R_delta_sub: %v", i, err)
		}
		if err := h.Call(ctx, "job-exec.release", flux.NodeidAny, map[string]any{"id": id, "ranks": R.Ranks().String()}, nil); err != nil {
			t.Fatalf("cycle %d: release: %v", i, err)
		}
	}
	// the last release is the job manager's to finish: wait for its free
	e.waitFor("the last free", func() bool {
		n := 0
		for _, ev := range e.events(id) {
			if ev.Name == "free" {
				n++
			}
		}
		return n == cycles
	})
	var info struct {
		R string `json:"R"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"R"}, "flags": 0}, &info); err != nil {
		t.Fatal(err)
	}
	jobR, err := rset.Parse([]byte(info.R))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := resource.GetSchedStatus(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ss.Allocated.String(), jobR.String(); got != want {
		t.Errorf("after %d cycles the scheduler has %s allocated, the job manager's R is %s", cycles, got, want)
	}
	if got := e.field(id, "{nnodes} {ranks}"); got != "1 0" {
		t.Errorf("after %d cycles job-list says %q, want 1 node, rank 0", cycles, got)
	}
	e.must("cancel", id.String())
	e.waitEvent(id, "clean")
	if got := e.must("resource", "list", "-s", "allocated", "-n", "-o", "{nnodes}"); got != "0" {
		t.Errorf("%s nodes still allocated after the job ended", got)
	}
}

// TestReallocPolicy: growth is held to the limits of new jobs (the
// accounting limit plugin counts the job's size as it changes) and keeps
// off nodes reserved for others; a request for reserved nodes waits.
func TestReallocPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	text := fmt.Sprintf(`
[accounting]
max-nodes = 2
[reservations.other]
ranks = "3"
start = %d
duration = "1h"
users = ["nobody"]
`, time.Now().Unix()-60)
	if err := os.WriteFile(filepath.Join(conf, "policy.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", conf}})}
	id := e.submit("-N1", "-x", "-t", "10m", testDuration("600s"), "true")
	e.waitEvent(id, "start")
	e.fail("exceeds max-nodes", "job", "realloc", "--no-wait", id.String(), "--add-nodes=2")
	e.must("job", "realloc", "--no-wait", id.String(), "--add-nodes=1")
	q := e.must("jobtap", "query", ".accounting-limits")
	if !strings.Contains(q, `"nodes":2`) {
		t.Errorf("the limit plugin does not count the grown job's 2 nodes:\n%s", q)
	}
	e.fail("exceeds max-nodes", "job", "realloc", "--no-wait", id.String(), "--add-nodes=1")
	e.must("job", "realloc", id.String(), "--remove-nodes=1")
	// an exempt job takes rank 1 or 2, so only the other and the
	// reserved rank 3 are left: growth takes the free one, then waits
	other := e.submit("-N1", "-x", "--setattr=system.exempt=true", testDuration("600s"), "true")
	e.waitEvent(other, "start")
	e.must("job", "realloc", "--no-wait", id.String(), "--add-nodes=1")
	if r := e.field(id, "{ranks}"); strings.Contains(r, "3") {
		t.Errorf("growth took rank 3, reserved for another user: %s", r)
	}
	e.must("job", "realloc", id.String(), "--remove-nodes=1")
	third := e.submit("-N1", "-x", "--setattr=system.exempt=true", testDuration("600s"), "true")
	e.waitEvent(third, "start")
	e.fail("denied: no free resources", "job", "realloc", "--no-wait", id.String(), "--add-nodes=1")
	h := e.inst.Handle(t)
	js, err := jobspec.FromCommand([]string{"realloc"}, jobspec.CommandOptions{NTasks: 1, NNodes: 1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := js.MarshalJSON()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := job.Realloc(ctx, h, id, job.ReallocRequest{SpecAdd: spec})
	if err != nil || resp.Type != job.ReallocCancel {
		t.Errorf("a request for the reserved node was answered %+v %v; want it to wait (then be cancelled)", resp, err)
	}
	e.must("cancel", id.String(), other.String(), third.String())
}
