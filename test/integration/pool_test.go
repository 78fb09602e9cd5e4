package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/modules/jobpool"
	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// poolItems lists a pool's items through flux pool list --json.
func (e *env) poolItems(name string) (jobpool.PoolInfo, []jobpool.Item) {
	e.t.Helper()
	var resp struct {
		Pool  jobpool.PoolInfo `json:"pool"`
		Items []jobpool.Item   `json:"items"`
	}
	out := e.must("pool", "list", "-p", name, "--json")
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		e.t.Fatalf("flux pool list --json: %v\n%s", err, out)
	}
	return resp.Pool, resp.Items
}

// waitPool waits until f holds for the pool's items.
func (e *env) waitPool(name string, what string, f func([]jobpool.Item) bool) []jobpool.Item {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, items := e.poolItems(name)
		if f(items) {
			return items
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pool %s: %s did not happen in 60s: %+v", name, what, items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoolPull runs seed 002's hierarchy: jobs put in a pool of the
// parent are pulled and run by two child instances (flux batch jobs
// whose initial program is flux pool pull), which report each result.
func TestPoolPull(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	ids := strings.Fields(e.must("pool", "submit", "-p", "work", "--cc=1-12",
		"--output="+filepath.Join(dir, "out.{cc}"),
		"sh", "-c", "sleep 0.5; echo job {cc}; exit $(( {cc} % 5 == 0 ))"))
	if len(ids) != 12 || ids[0] != "1" || ids[11] != "12" {
		t.Fatalf("pool submit printed %v", ids)
	}
	if out := e.must("pool", "list"); !strings.Contains(out, "work") || !strings.Contains(out, "open") {
		t.Fatalf("flux pool list:\n%s", out)
	}
	e.must("pool", "close", "-p", "work")
	// each job takes 0.5 s: the first child cannot finish all 12 before
	// the second has started
	var children []string
	for i := 0; i < 2; i++ {
		children = append(children, e.must("batch", "-N1", "--output="+filepath.Join(dir, "child.out"),
			"--wrap", e.inst.Bin, "pool", "pull", "-p", "work"))
	}
	e.must(append([]string{"job", "status"}, children...)...) // both children exit 0
	info, items := e.poolItems("work")
	if info.Done != 12 || info.Pending != 0 || info.Assigned != 0 || !info.Closed {
		t.Fatalf("pool after the children: %+v", info)
	}
	ran := map[string]int{}
	for _, it := range items {
		want := "COMPLETED"
		if it.ID%5 == 0 {
			want = "FAILED"
		}
		if it.State != jobpool.StateDone || it.Result == nil || it.Result.Result != want || it.Result.Jobid == "" {
			t.Errorf("item %d: %+v, result %+v; want done, %s", it.ID, it, it.Result, want)
			continue
		}
		ran[it.Child]++
		out, err := os.ReadFile(filepath.Join(dir, "out."+strconv.FormatInt(it.ID, 10)))
		if err != nil || strings.TrimSpace(string(out)) != "job "+strconv.FormatInt(it.ID, 10) {
			t.Errorf("item %d output %q (%v)", it.ID, out, err)
		}
	}
	if len(ran) != 2 {
		t.Errorf("items ran in %v, want both children", ran)
	}
	for _, c := range children {
		if ran["job "+c] == 0 {
			t.Errorf("child %s ran nothing: %v", c, ran)
		}
	}
	table := e.must("pool", "list", "-p", "work")
	if !strings.Contains(table, "FAILED") || !strings.Contains(table, "exit 1") {
		t.Errorf("flux pool list -p work:\n%s", table)
	}
}

// TestPoolRequeue checks jobs a child took and did not finish go back to
// the pool when the child goes away, and another child runs them.
func TestPoolRequeue(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	e.must("pool", "submit", "-p", "rq", "--cc=1-2", "--output="+filepath.Join(dir, "out.{cc}"),
		"sh", "-c", "while ! test -e "+gate+"; do sleep 0.1; done; echo ran {cc}")
	first := e.must("batch", "-N1", "--output="+filepath.Join(dir, "first.out"), "--wrap", e.inst.Bin, "pool", "pull", "-p", "rq", "--window=2")
	e.waitPool("rq", "both items taken", func(items []jobpool.Item) bool {
		return len(items) == 2 && items[0].State == jobpool.StateAssigned && items[1].State == jobpool.StateAssigned
	})
	e.must("cancel", first)
	e.waitPool("rq", "both items back", func(items []jobpool.Item) bool {
		return items[0].State == jobpool.StatePending && items[1].State == jobpool.StatePending
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("pool", "close", "-p", "rq")
	second := e.must("batch", "-N1", "--output="+filepath.Join(dir, "second.out"), "--wrap", e.inst.Bin, "pool", "pull", "-p", "rq")
	e.must("job", "status", second)
	_, items := e.poolItems("rq")
	for _, it := range items {
		if it.State != jobpool.StateDone || it.Child != "job "+second || it.Pulls != 2 || it.Result.Result != "COMPLETED" {
			t.Errorf("item %d: %+v result %+v; want done by job %s after 2 pulls", it.ID, it, it.Result, second)
		}
	}
}

// TestPoolErrors checks refusals name what was wrong and pools are each
// user's own.
func TestPoolErrors(t *testing.T) {
	e := start(t)
	e.fail(`pool name "a.b"`, "pool", "create", "-p", "a.b")
	e.fail(`no pool "nope"`, "pool", "pull", "-p", "nope", "--parent="+e.inst.URI)
	e.fail("--urgency=31", "pool", "submit", "--urgency=31", "true")
	e.fail("--dependency=afterok:ƒ1", "pool", "submit", "--dependency=afterok:ƒ1", "true")
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fail(bad, "pool", "add", "-p", "x", bad)
	e.must("pool", "create", "-p", "x")
	e.fail(`pool "x" exists`, "pool", "create", "-p", "x")
	spec := e.must("submit", "--dry-run", "--cc=1-3", "true")
	if out := e.inst.RunInput(t, spec, "pool", "add", "-p", "x", "-"); out.Code != 0 || len(strings.Fields(out.Stdout)) != 3 {
		t.Fatalf("pool add - of 3 dry-run lines: %+v", out)
	}
	e.must("pool", "close", "-p", "x")
	e.fail(`pool "x" is closed`, "pool", "submit", "-p", "x", "true")
	// nothing was lost by the refusal
	if info, _ := e.poolItems("x"); info.Pending != 3 {
		t.Errorf("pool x: %+v, want the 3 jobs added before", info)
	}
	if canRunAsGuest(e) {
		if r := e.asGuest("pool", "list"); r.Code != 0 || strings.Contains(r.Stdout, " x ") {
			t.Errorf("a guest's pool list shows the owner's pools: %+v", r)
		}
		if r := e.asGuest("pool", "pull", "-p", "x", "--window=1", "--parent="+e.inst.URI); r.Code == 0 || !strings.Contains(r.Stderr, `no pool "x"`) {
			t.Errorf("a guest pulled from the owner's pool: %+v", r)
		}
		if r := e.asGuest("pool", "list", "-A"); r.Code == 0 || !strings.Contains(r.Stderr, "owner") {
			t.Errorf("a guest listed every user's pools: %+v", r)
		}
	}
	e.must("pool", "remove", "-p", "x")
	if out := e.must("pool", "list"); strings.Contains(out, " x ") {
		t.Errorf("removed pool still listed:\n%s", out)
	}
}

// TestPoolRestart checks a pool, its jobs and their results survive a
// restart of the instance.
func TestPoolRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	statedir := t.TempDir()
	o := testinstance.Options{Size: 1, Attrs: map[string]string{"statedir": statedir}}
	e := &env{t: t, inst: testinstance.Start(t, o)}
	e.must("pool", "submit", "-p", "keep", "--cc=1-3", "true")
	e.must("pool", "close", "-p", "keep")
	if code := e.inst.Stop(); code != 0 {
		t.Fatalf("first instance exited %d: %s", code, e.inst.Stderr())
	}
	e = &env{t: t, inst: testinstance.Start(t, o)}
	info, items := e.poolItems("keep")
	if !info.Closed || info.Pending != 3 || len(items) != 3 {
		t.Fatalf("after restart: %+v %+v", info, items)
	}
	e.fail("closed", "pool", "submit", "-p", "keep", "true")
}

// TestPoolPullAsGuest checks a puller that is not the instance owner
// (so may not follow the job manager's journal) learns how each job
// ended from its eventlog instead.
func TestPoolPullAsGuest(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root and a flux binary other users may run")
	}
	guest := func(args ...string) string {
		t.Helper()
		r := e.asGuest(args...)
		if r.Code != 0 {
			t.Fatalf("as a guest, flux %v: exit %d: %s", args, r.Code, r.Stderr)
		}
		return r.Stdout
	}
	guest("pool", "submit", "-p", "g", "--cc=1-4", "sh", "-c", "exit $(( {cc} % 2 ))")
	guest("pool", "close", "-p", "g")
	guest("pool", "pull", "-p", "g", "--window=2", "--parent="+e.inst.URI)
	var resp struct {
		Pool  jobpool.PoolInfo `json:"pool"`
		Items []jobpool.Item   `json:"items"`
	}
	if err := json.Unmarshal([]byte(guest("pool", "list", "-p", "g", "--json")), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Pool.Done != 4 {
		t.Fatalf("the guest's pool after its pull: %+v", resp.Pool)
	}
	for _, it := range resp.Items {
		want := "COMPLETED"
		if it.ID%2 == 1 {
			want = "FAILED"
		}
		if it.Result == nil || it.Result.Result != want || it.Result.Jobid == "" {
			t.Errorf("item %d: result %+v, want %s", it.ID, it.Result, want)
		}
	}
}
