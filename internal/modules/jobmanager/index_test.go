package jobmanager_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// waitIndex waits until the restart index lists exactly the jobs want
// as active (and names max_jobid at least max).
func waitIndex(t *testing.T, inst *testinstance.Instance, max jobid.ID, want ...string) {
	t.Helper()
	h := inst.Handle(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		raw, err := content.CheckpointGetRaw(context.Background(), h, "job-manager-index")
		var ix struct {
			MaxID  jobid.ID   `json:"max_jobid"`
			Active []jobid.ID `json:"active"`
		}
		if err == nil && json.Unmarshal(raw, &ix) == nil && ix.MaxID >= max && len(ix.Active) == len(want) {
			got := map[jobid.ID]bool{}
			for _, id := range ix.Active {
				got[id] = true
			}
			ok := true
			for _, w := range want {
				ok = ok && got[jobid.MustParse(w)]
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart index not written in 20 s: %s (err %v)", raw, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRestartIndex: after a crash, the job manager reads only the jobs
// its restart index lists as active (and newer ones) before it serves;
// the inactive ones come after, and a request naming one (a dependency,
// flux job wait-event, purge) gets it as if it had been read first.
func TestRestartIndex(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	out := inst.MustRun(t, "submit", "--cc=1-40", "--setattr=system.exec.test.run_duration=0", "true")
	old := strings.Fields(out)
	inst.MustRun(t, "queue", "idle")
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	waitIndex(t, inst, jobid.MustParse(held), held)
	inst.Kill() // every broker, SIGKILL

	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	// a dependency on the first job, which the background read may not
	// have reached yet
	dep := strings.TrimSpace(inst2.MustRun(t, "submit", "--dependency=afterok:"+old[0], "--setattr=system.exec.test.run_duration=0", "true"))
	inst2.MustRun(t, "job", "wait-event", "-t", "20", dep, "clean")
	if r := strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{result}", dep)); r != "COMPLETED" {
		t.Errorf("job depending on a restored inactive job: %q", r)
	}
	if st := strings.TrimSpace(inst2.MustRun(t, "jobs", "-n", "-o", "{state}", held)); st != "SCHED" {
		t.Errorf("held job after the restart: %q", st)
	}
	var log string
	deadline := time.Now().Add(20 * time.Second)
	for {
		log = inst2.MustRun(t, "dmesg")
		if strings.Contains(log, "more jobs from the KVS while serving") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(log, "restored 1 jobs from the KVS") || !strings.Contains(log, "restored 40 more jobs from the KVS while serving") {
		t.Errorf("the restore did not go by the index:\n%s", log)
	}
	// purge sees every inactive job (it waits for the read)
	got := strings.TrimSpace(inst2.MustRun(t, "job", "purge", "--num-limit=0"))
	if !strings.Contains(got, "41") {
		t.Errorf("flux job purge --num-limit=0 (41 inactive jobs): %q", got)
	}
}

// TestRestartIndexMissesJob: an index that leaves out an active job (as
// if job-ingest had committed it before the job manager heard of it)
// costs that job a late start, not the job: it is found and goes on.
func TestRestartIndexMissesJob(t *testing.T) {
	inst, attrs := startWithStatedir(t)
	held := strings.TrimSpace(inst.MustRun(t, "submit", "--urgency=hold", "true"))
	waitIndex(t, inst, jobid.MustParse(held), held)
	if code := inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, inst.Stderr())
	}
	// the same instance without its job manager writing over a forged index
	inst2 := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: attrs})
	inst2.MustRun(t, "module", "remove", "job-manager")
	forged, _ := json.Marshal(map[string]any{"version": 1, "max_jobid": jobid.MustParse(held), "rootseq": 0, "active": []jobid.ID{}})
	if err := content.CheckpointPutRaw(context.Background(), inst2.Handle(t), "job-manager-index", forged); err != nil {
		t.Fatal(err)
	}
	inst2.MustRun(t, "module", "load", "job-manager")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(inst2.MustRun(t, "dmesg"), "restored late") {
		if time.Now().After(deadline) {
			t.Fatalf("the job left out of the index was not found:\n%s", inst2.MustRun(t, "dmesg"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	inst2.MustRun(t, "job", "urgency", held, "default")
	inst2.MustRun(t, "job", "wait-event", "-t", "20", held, "clean")
}
