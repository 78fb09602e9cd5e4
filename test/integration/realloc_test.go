package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
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
			{map[string]any{"id": id, "spec_sub": map[string]any{}, "bogus": 1}, "bogus: unknown key"},
			{map[string]any{"spec_add": map[string]any{}}, "id is required"},
		} {
			err := h.Call(ctx, "job-manager.realloc", 0, c.payload, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: got %v, want an error with %q", c.payload, err, c.want)
			}
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
			t.Fatalf("timed out waiting for DENY and CANCEL; task 0 printed:\n%s\n%s", read("0"), e.flux("dmesg").Stdout)
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
	e.must("cancel", id.String(), blocker.String())
	if got := e.result(id); got != "CANCELED" {
		t.Errorf("job result %s", got)
	}
}
