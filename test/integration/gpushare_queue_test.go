package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestGPUShareByQueue: with [queues.ml] gpu-share = 2 and an unshared
// batch queue, each on a node of 2 GPUs, four 1-GPU ml jobs run at once
// (two on each GPU) and two batch jobs (one each); a fifth ml job and a
// third batch job wait.
func TestGPUShareByQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	confdir := t.TempDir()
	conf := `[queues.ml]
requires = ["ml"]
gpu-share = 2
[queues.batch]
requires = ["batch"]
[policy.jobspec.defaults.system]
queue = "batch"
[[resource.config]]
hosts = "n0"
cores = "0-7"
gpus = "0-1"
properties = ["ml"]
[[resource.config]]
hosts = "n1"
cores = "0-7"
gpus = "0-1"
properties = ["batch"]
`
	if err := os.WriteFile(filepath.Join(confdir, "conf.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Attrs: map[string]string{
		"resource.noverify": "true",
	}, Args: []string{"--test-hosts=n[0-1]", "--config-path", confdir}})}
	e.must("queue", "start", "--all")

	run := func(queue string, n int) []jobid.ID {
		var ids []jobid.ID
		for range n {
			ids = append(ids, e.submit("-q", queue, "-n1", "-g1", testDuration("300s"), "true"))
		}
		for _, id := range ids {
			e.waitEvent(id, "alloc")
		}
		return ids
	}
	freeGPUs := func() string {
		return e.must("resource", "list", "-n", "-s", "free,allocated", "-o", "{state}:{ngpus}")
	}
	// a GPU with a share taken and one free is free (it can take a job)
	first := run("ml", 1)
	if got := freeGPUs(); got != "free:4\nallocated:0" {
		t.Errorf("one share of a GPU taken: resource list %q, want free:4 allocated:0", got)
	}
	gpus := map[string]int{}
	for _, id := range append(first, run("ml", 3)...) {
		R, err := rset.Parse([]byte(e.must("job", "info", id.String(), "R")))
		if err != nil {
			t.Fatal(err)
		}
		for n := range R.All() {
			if n.Hostname != "n0" || n.GPUs.Count() != 1 {
				t.Fatalf("ml job %s got %s", id, R)
			}
			gpus[n.GPUs.String()]++
		}
	}
	if gpus["0"] != 2 || gpus["1"] != 2 {
		t.Errorf("GPUs of four ml jobs (gpu-share 2): %v, want two on each", gpus)
	}
	if got := freeGPUs(); got != "free:2\nallocated:2" {
		t.Errorf("every share of n0's GPUs taken: resource list %q, want free:2 allocated:2", got)
	}
	run("batch", 2)
	fifth := e.submit("-q", "ml", "-n1", "-g1", testDuration("300s"), "true")
	third := e.submit("-q", "batch", "-n1", "-g1", testDuration("300s"), "true")
	time.Sleep(300 * time.Millisecond) // a pass has run; neither must start
	for name, id := range map[string]jobid.ID{"a fifth ml job": fifth, "a third batch job (not shared)": third} {
		if st := e.field(id, "{state}"); st != "SCHED" {
			t.Errorf("%s: %s, want SCHED", name, st)
		}
	}
}
