package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// TestJobManagerList: job-manager.list (flux-core's, which its test
// helpers read): the jobs waiting for the scheduler first, in priority
// order, then the waitable jobs that ended and were not waited for;
// max_entries is required; the owner only.
func TestJobManagerList(t *testing.T) {
	e := start(t)
	held := e.submit("--urgency=0", "true")
	zombie := e.submit("--flags=waitable", "true")
	e.waitEvent(zombie, "clean")
	h := e.inst.Handle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var resp struct {
		Jobs []struct {
			ID    uint64 `json:"id"`
			State int    `json:"state"`
		} `json:"jobs"`
	}
	if err := h.Call(ctx, "job-manager.list", flux.NodeidAny, map[string]any{"max_entries": 0}, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Jobs) != 2 || resp.Jobs[0].ID != uint64(held) || resp.Jobs[0].State != 8 ||
		resp.Jobs[1].ID != uint64(zombie) || resp.Jobs[1].State != 64 {
		t.Errorf("list: %+v, want %s SCHED (8) then %s INACTIVE (64)", resp.Jobs, held, zombie)
	}
	if err := h.Call(ctx, "job-manager.list", flux.NodeidAny, map[string]any{}, nil); err == nil {
		t.Error("no max_entries accepted")
	}
	if err := h.Call(ctx, "job-manager.list", flux.NodeidAny, map[string]any{"max_entries": -1}, nil); err == nil {
		t.Error("max_entries -1 accepted")
	}
	if errs, code := e.asTestGuest("python", "-c", `import flux; flux.Flux().rpc("job-manager.list", {"max_entries": 0}).get()`); code == 0 {
		t.Errorf("a guest listed the job manager's jobs: %s", errs)
	}
}

// TestJobListCommands: flux job list and list-ids print job-list's
// objects one per line; list-ids waits for the state asked.
func TestJobListCommands(t *testing.T) {
	e := start(t)
	id := e.submit("true")
	out := e.must("job", "list-ids", "--wait-state=inactive", id.String())
	if !strings.HasPrefix(out, fmt.Sprintf(`{"id":%d,`, uint64(id))) || !strings.Contains(out, `"state":64`) {
		t.Errorf("list-ids: %q", out)
	}
	held := e.submit("--urgency=0", "true")
	if out := e.must("job", "list"); strings.Count(out, "\n") != 0 || !strings.Contains(out, fmt.Sprintf(`"id":%d`, uint64(held))) {
		t.Errorf("list (active jobs): %q", out)
	}
	if out := e.must("job", "list", "-a"); strings.Count(out, "\n") != 1 {
		t.Errorf("list -a: %q", out)
	}
	e.fail("invalid job state specified", "job", "list-ids", "--wait-state=soon", id.String())
	e.must("cancel", held.String())
}

// TestJobListPause: job-list.job-state-pause holds what job-list hears
// until job-state-unpause (flux-core's test hook); owner only.
func TestJobListPause(t *testing.T) {
	e := start(t)
	h := e.inst.Handle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Call(ctx, "job-list.job-state-pause", flux.NodeidAny, nil, nil); err != nil {
		t.Fatal(err)
	}
	id := e.submit("true")
	e.waitEvent(id, "clean")
	if out := e.must("jobs", "-a", "-n", "-o", "{id}"); strings.Contains(out, id.String()) {
		t.Errorf("paused job-list lists %s: %q", id, out)
	}
	if err := h.Call(ctx, "job-list.job-state-unpause", flux.NodeidAny, nil, nil); err != nil {
		t.Fatal(err)
	}
	if out := e.must("job", "list-ids", "--wait-state=inactive", id.String()); !strings.Contains(out, `"state":64`) {
		t.Errorf("after unpause: %q", out)
	}
	if errs, code := e.asTestGuest("python", "-c", `import flux; flux.Flux().rpc("job-list.job-state-pause").get()`); code == 0 {
		t.Errorf("a guest paused job-list: %s", errs)
	}
}
