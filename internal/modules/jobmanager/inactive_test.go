package jobmanager

import (
	"testing"
	"unsafe"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func TestTrimInactive(t *testing.T) {
	m := &manager{jobs: map[jobid.ID]*job{}, done: map[jobid.ID]inactiveRec{}, inactiveLimit: recentInactive + 10}
	n := recentInactive + 20
	for i := 1; i <= n; i++ {
		j := newJob(jobid.ID(i), 1000+uint32(i%3), 16, 0, float64(i))
		j.State = jobtap.StateInactive
		j.Priority = int64(i)
		j.finished, j.finishStatus = true, 256*(i%2)
		j.WaitStatus = j.finishStatus
		if i%5 == 0 {
			j.fatal, j.exceptType, j.Exception = true, "cancel", "cancel"
		}
		j.Ran, j.Started = true, true
		j.Result = j.result()
		j.tInactive = float64(i) + 0.5
		m.jobs[j.ID] = j
		m.inactive = append(m.inactive, j.ID)
		m.trimInactive()
	}
	if got := len(m.inactive); got != m.inactiveLimit {
		t.Fatalf("%d inactive jobs remembered, want the limit %d", got, m.inactiveLimit)
	}
	if len(m.jobs) != recentInactive {
		t.Fatalf("%d full records, want the newest %d", len(m.jobs), recentInactive)
	}
	for i := 1; i <= 10; i++ {
		if m.known(jobid.ID(i)) {
			t.Fatalf("job %d beyond the limit is still known", i)
		}
	}
	// a compacted job reads back as it was
	for _, i := range []int{11, 15, 20} {
		id := jobid.ID(i)
		if _, full := m.jobs[id]; full {
			t.Fatalf("job %d was not compacted", i)
		}
		j, ok := m.job(id)
		if !ok {
			t.Fatalf("job %d unknown", i)
		}
		want := newJob(id, 1000+uint32(i%3), 16, 0, float64(i))
		want.finished, want.finishStatus = true, 256*(i%2)
		if i%5 == 0 {
			want.fatal, want.exceptType = true, "cancel"
		}
		if j.State != jobtap.StateInactive || j.Userid != want.Userid || j.Priority != int64(i) ||
			j.TSubmit != float64(i) || j.tInactive != float64(i)+0.5 || j.Result != want.result() ||
			j.WaitStatus != want.finishStatus || !j.Ran || !j.Started || j.result() != j.Result {
			t.Fatalf("job %d read back as %+v", i, j.Job)
		}
	}
}

func TestInactiveRecSize(t *testing.T) {
	if n := unsafe.Sizeof(inactiveRec{}); n > 56 {
		t.Fatalf("inactiveRec is %d bytes, want at most 56 (64k inactive jobs)", n)
	}
}
