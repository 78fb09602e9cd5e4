package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestAccountRequeueCharged: a job preempted and requeued is charged for
// the run it lost as well as the one that completed (issue 25): its
// user's usage history holds at least the first run's core time, which
// the job's last run, and so the archive's t_run alone, does not.
func TestAccountRequeueCharged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	me, err := user.Current()
	if err != nil {
		t.Skipf("who runs the test: %v", err)
	}
	conf := t.TempDir()
	toml := "[archive]\nperiod = \"0.5s\"\n[queues.standby]\npreemptible = true\n[queues.batch]\n[sched-simple]\npreempt-mode = \"requeue\"\n"
	if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"--config-path", conf, "-S", "statedir=" + t.TempDir()}})}
	for _, args := range [][]string{
		{"add-bank", "root", "1"},
		{"add-bank", "--parent-bank=root", "physics", "1"},
		{"add-user", "--username=" + me.Username, "--bank=physics"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}
	cores, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}"))
	if cores < 1 {
		t.Skip("no cores")
	}
	c := fmt.Sprintf("--cores-per-task=%d", cores)
	dir := t.TempDir()
	victim := e.submit("-q", "standby", "-n1", c, "sh", "-c",
		fmt.Sprintf(`if [ -e %[1]s/ran ]; then exit 0; fi; touch %[1]s/ran; exec sleep 300`, dir))
	e.waitEvent(victim, "start")
	// let the first run use some core time before it is preempted
	start, _ := find(e.events(victim), "start")
	for time.Since(time.Unix(0, int64(start.Timestamp*1e9))) < 2*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	urgent := e.submit("-q", "batch", "-n1", c, "true")
	if r := e.result(urgent); r != "COMPLETED" {
		t.Fatalf("the urgent job: %s", r)
	}
	if r := e.result(victim); r != "COMPLETED" {
		t.Fatalf("the requeued job: %s\n%s", r, e.must("job", "eventlog", victim.String()))
	}
	// the runs' core time from the eventlog
	var runs []float64
	var t0 float64
	for _, ev := range e.events(victim) {
		switch ev.Name {
		case "start":
			t0 = ev.Timestamp
		case "finish":
			runs = append(runs, float64(cores)*(ev.Timestamp-t0))
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs:\n%s", len(runs), e.must("job", "eventlog", victim.String()))
	}
	var row accounting.UsagePeriod
	e.waitFor("both jobs in the usage history", func() bool {
		e.must("account", "update-usage")
		var ps []accounting.UsagePeriod
		out := e.must("account", "view-usage-report", "--json")
		if err := json.Unmarshal([]byte(out), &ps); err != nil {
			t.Fatalf("view-usage-report --json: %v\n%s", err, out)
		}
		if len(ps) == 1 && ps[0].Jobs == 2 {
			row = ps[0]
			return true
		}
		return false
	})
	charged := row.CoreHours * 3600
	t.Logf("runs of the requeued job: %.3f and %.3f core-seconds; charged to %s:%s for both jobs: %.3f core-seconds",
		runs[0], runs[1], row.Bank, row.Username, charged)
	if row.Bank != "physics" || row.Username != me.Username {
		t.Errorf("charged to %s:%s, want physics:%s", row.Bank, row.Username, me.Username)
	}
	if charged < runs[0]+runs[1] {
		t.Errorf("charged %.3f core-seconds, less than the requeued job's two runs (%.3f + %.3f)", charged, runs[0], runs[1])
	}
}
