package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestBackfillPolicies runs one node with a job holding a core for 100 s,
// then a head job needing the whole node (it can start when that job's
// time limit is up), a long one-core job and a short one. FCFS lets the
// long job take the free core, delaying the head; EASY and conservative
// backfill start only the short job, and tell flux jobs when the head is
// expected to start.
func TestBackfillPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	for _, pol := range []string{"fcfs", "easy", "conservative"} {
		t.Run(pol, func(t *testing.T) {
			inst := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{"sched-simple.queue-policy": pol}})
			e := &env{t: t, inst: inst}
			if n, _ := strconv.Atoi(e.must("resource", "list", "-n", "-o", "{ncores}")); n < 2 {
				t.Skip("needs a node with 2 cores or more")
			}
			running := e.submit("-n1", "-t", "100s", testDuration("100s"), "true")
			e.waitEvent(running, "start")
			t0 := time.Now()
			head := e.submit("-N1", "-x", "-t", "10s", testDuration("0.1s"), "true")
			long := e.submit("-n1", "-t", "200s", testDuration("0.1s"), "true")
			short := e.submit("-n1", "-t", "30s", testDuration("0.1s"), "true")
			if pol == "fcfs" {
				e.waitEvent(long, "clean") // it passed the head
				if st := e.field(head, "{status_abbrev}"); st != "S" {
					t.Errorf("head job is %s, want S", st)
				}
				return
			}
			e.waitEvent(short, "clean")
			time.Sleep(300 * time.Millisecond)
			if st := e.field(long, "{status_abbrev}"); st != "S" {
				t.Errorf("the long job is %s: it backfilled over the head's reservation", st)
			}
			est, err := strconv.ParseFloat(e.field(head, "{sched.t_estimate}"), 64)
			want := float64(t0.Unix()) + 100
			if err != nil || est < want-10 || est > want+5 {
				t.Errorf("head t_estimate %v (%v), want about %v", est, err, want)
			}
			info := e.field(head, "{contextual_info}")
			if !strings.HasPrefix(info, "eta:") {
				t.Errorf("head INFO %q, want eta:...", info)
			}
			longEst := e.field(long, "{sched.t_estimate}")
			if pol == "conservative" && longEst == "" {
				t.Errorf("conservative: the long job has no start estimate")
			}
			if pol == "easy" && longEst != "" {
				t.Errorf("easy: the long job has an estimate %q (only the head is reserved)", longEst)
			}
			// the running job ends early: the head starts, then the long one
			e.must("cancel", running.String())
			e.waitEvent(head, "clean")
			e.waitEvent(long, "clean")
			if r := e.field(head, "{result}"); r != "COMPLETED" {
				t.Errorf("head job %s", r)
			}
		})
	}
}
