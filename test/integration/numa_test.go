package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestNUMAMatching is issue 24's report with the real binary: on corona's
// topology (NUMA0 = cores 0-23 + GPUs 0-3, NUMA1 = cores 24-47 + GPUs
// 4-7), after a job holds cores 0-23, -n1 -c2 -g1 gets cores and a GPU of
// NUMA1, not cores 24-25 and GPU 0.
func TestNUMAMatching(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	xml, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance", "hwloc", "corona.xml"))
	if err == nil {
		_, err = os.Stat(xml)
	}
	if err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{"resource.hwloc-xml": xml}})}

	inv, err := rset.Parse([]byte(e.must("resource", "R")))
	if err != nil {
		t.Fatal(err)
	}
	if groups, err := inv.NUMA(); err != nil || len(groups) != 1 || len(groups[0].Domains) != 2 {
		t.Fatalf("inventory scheduling key %s (%v)", inv.Scheduling(), err)
	}

	// the domains' memory (hwloc's local_memory: 134734184448 and
	// 135238848512 bytes)
	if got := e.must("resource", "list", "-n", "-s", "all", "-o", "{nnuma} {memory}"); got != "2 251.4G" {
		t.Errorf("resource list {memory}: %q, want %q", got, "2 251.4G")
	}
	first := e.submit("-n1", "-c24", testDuration("60s"), "true")
	e.waitEvent(first, "alloc")
	second := e.submit("-n1", "-c2", "-g1", testDuration("1s"), "true")
	e.waitEvent(second, "alloc")
	R, err := rset.Parse([]byte(e.must("job", "info", second.String(), "R")))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := R.Node(0)
	if !ok {
		t.Fatalf("second job's R has no rank 0: %s", R.Encode())
	}
	numa1 := idset.MustParse("24-47")
	if n.Cores.Count() != 2 || !n.Cores.Difference(numa1).Empty() || n.GPUs.Count() != 1 || !n.GPUs.Difference(idset.MustParse("4-7")).Empty() {
		t.Fatalf("-c2 -g1 after -c24 got cores %s gpus %s, want 2 of 24-47 and 1 of 4-7", n.Cores, n.GPUs)
	}
	if strings.Contains(string(R.Scheduling()), rset.NUMAKey) {
		t.Errorf("the job's R carries the instance's domains: %s", R.Scheduling())
	}
	e.must("cancel", first.String())
}

// TestNUMAConfigured: domains declared in [[resource.config]] (hosts
// without hardware) show in flux resource list and info when asked, and
// each -n1 -c2 -g1 job lands in one domain: on an idle node, and after a
// -c3 job left NUMA0 (cores 0-3, GPUs 0-1) one core, both in NUMA1
// (cores 4-7, GPUs 2-3), where a match without domains would split the
// first across them (cores 3-4 and GPU 0).
func TestNUMAConfigured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{
		"resource.config": `[{"hosts":"n0","cores":"0-7","gpus":"0-3","numa":[` +
			`{"cores":"0-3","gpus":"0-1","socket":0,"nics":["mlx5_0"]},` +
			`{"cores":"4-7","gpus":"2-3","socket":1,"nics":["mlx5_1","ib1"]}]}]`,
		"resource.noverify": "true", // more cores and GPUs than the host has
	}, Args: []string{"--test-hosts=n0"}})}

	if got := e.must("resource", "list", "-n", "-s", "all", "-o", "{nnodes} {nnuma} {nsockets} {nnics} {ncores} {ngpus}"); got != "1 2 2 3 8 4" {
		t.Fatalf("resource list -o: %q, want %q", got, "1 2 2 3 8 4")
	}
	if got := e.must("resource", "info", "-o", "{nnodes} Nodes, {nnuma} NUMA domains, {nsockets} Sockets"); got != "1 Nodes, 2 NUMA domains, 2 Sockets" {
		t.Fatalf("resource info -o: %q", got)
	}
	// the default lines are flux-core's
	if got := e.must("resource", "info"); got != "1 Nodes, 8 Cores, 4 GPUs" {
		t.Fatalf("resource info: %q", got)
	}
	if list := e.must("resource", "list"); strings.Contains(list, "NUMA") || !strings.Contains(list, "NNODES NCORES NGPUS NODELIST") {
		t.Fatalf("default resource list changed:\n%s", list)
	}

	domains := []struct{ cores, gpus idset.Set }{
		{idset.MustParse("0-3"), idset.MustParse("0-1")},
		{idset.MustParse("4-7"), idset.MustParse("2-3")},
	}
	domainOf := func(id string) int {
		t.Helper()
		R, err := rset.Parse([]byte(e.must("job", "info", id, "R")))
		if err != nil {
			t.Fatal(err)
		}
		n, ok := R.Node(0)
		if !ok || n.Cores.Count() != 2 || n.GPUs.Count() != 1 {
			t.Fatalf("job %s got %s", id, R)
		}
		for d, dom := range domains {
			if n.Cores.Difference(dom.cores).Empty() && n.GPUs.Difference(dom.gpus).Empty() {
				return d
			}
		}
		t.Fatalf("job %s got cores %s and gpu %s: not in one domain", id, n.Cores, n.GPUs)
		return -1
	}
	// flux run, as a user types it (the test executor stands in for
	// the task: the GPUs do not exist)
	e.must("run", "-n1", "-c2", "-g1", testDuration("0.1s"), "true")
	domainOf(e.must("job", "last"))
	blocker := e.submit("-n1", "-c3", testDuration("60s"), "true")
	e.waitEvent(blocker, "alloc")
	held := []string{blocker.String()}
	// the other domain than the one the -c3 job took (NUMA0 under
	// every fit: ties go to the lowest domain)
	want := 1
	if R, err := rset.Parse([]byte(e.must("job", "info", blocker.String(), "R"))); err == nil {
		if n, ok := R.Node(0); ok && n.Cores.Difference(domains[1].cores).Empty() {
			want = 0
		}
	}
	for i := range 2 {
		id := e.submit("-n1", "-c2", "-g1", testDuration("60s"), "true")
		e.waitEvent(id, "alloc")
		if d := domainOf(id.String()); d != want {
			t.Fatalf("-c2 -g1 job %d after -c3 in NUMA%d, want NUMA%d", i, d, want)
		}
		held = append(held, id.String())
	}
	e.must(append([]string{"cancel"}, held...)...)
}

// TestGPUShare: with [sched-simple] gpu-share = 2, two jobs run on each
// GPU at once, each told its GPU (CUDA_VISIBLE_DEVICES), and a fifth
// 1-GPU job on a 2-GPU node waits; a 3-GPU job on it is refused as
// unsatisfiable (GPUs are counted, not shares).
func TestGPUShare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	confdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confdir, "sched.toml"), []byte("[sched-simple]\ngpu-share = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{
		"resource.config":   `[{"hosts":"n0","cores":"0-7","gpus":"0-1"}]`,
		"resource.noverify": "true",
	}, Args: []string{"--test-hosts=n0", "--config-path", confdir}})}
	dir := t.TempDir()
	var ids []string
	for k := range 4 {
		id := e.submit("-n1", "-g1", "sh", "-c", fmt.Sprintf("echo $CUDA_VISIBLE_DEVICES > %s/%d; exec sleep 300", dir, k))
		ids = append(ids, id.String())
	}
	for _, id := range ids {
		e.waitEvent(jobid.MustParse(id), "start")
	}
	uses := map[string]int{}
	for k := range 4 {
		var b []byte
		e.waitFor("the task's GPU", func() bool {
			b, _ = os.ReadFile(filepath.Join(dir, strconv.Itoa(k)))
			return len(b) > 0
		})
		uses[strings.TrimSpace(string(b))]++
	}
	if uses["0"] != 2 || uses["1"] != 2 {
		t.Errorf("GPUs of four 1-GPU jobs with gpu-share=2: %v", uses)
	}
	fifth := e.submit("-n1", "-g1", "true")
	time.Sleep(300 * time.Millisecond)
	if st := e.field(fifth, "{state}"); st != "SCHED" {
		t.Errorf("a fifth 1-GPU job: %s, want SCHED", st)
	}
	if r := e.flux("submit", "-n1", "-g3", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "unsatisfiable") {
		t.Errorf("a 3-GPU job on a 2-GPU node: %+v", r)
	}
	// the scheduler reloaded without sharing cannot take back both
	// shares of a GPU: the jobs it cannot claim end with an exception
	// (QA: they ran on, their resources counted free and given again)
	e.must("module", "reload", "sched-simple", "gpu-share=1")
	var running, ended []string
	e.waitFor("two of the sharing jobs to end", func() bool {
		running, ended = nil, nil
		for _, id := range ids {
			if e.field(jobid.MustParse(id), "{state}") == "INACTIVE" {
				ended = append(ended, id)
			} else {
				running = append(running, id)
			}
		}
		return len(ended) >= 2
	})
	time.Sleep(300 * time.Millisecond) // and no more
	for _, id := range ids {
		if st := e.field(jobid.MustParse(id), "{state}"); st == "INACTIVE" && !slices.Contains(ended, id) {
			t.Errorf("job %s ended too: 3 or more of 4 jobs on 2 GPUs", id)
		}
	}
	for _, id := range ended {
		if got := e.field(jobid.MustParse(id), "{exception.type}"); got != "scheduler-restart" {
			t.Errorf("job %s ended with exception %q, want scheduler-restart", id, got)
		}
	}
	if st := e.field(fifth, "{state}"); st != "SCHED" {
		t.Errorf("after the reload, with both GPUs held, the fifth job is %s, want SCHED", st)
	}
	e.must(append([]string{"cancel", fifth.String()}, running...)...)
	e.waitEvent(fifth, "clean")
}
