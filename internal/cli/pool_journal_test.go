package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPullJournalOrder checks the puller learns a job's end whether the
// journal tells it before or after the job's submission is answered,
// and forgets the ends of jobs that are not its own.
func TestPullJournalOrder(t *testing.T) {
	pj := &pullJournal{running: map[jobid.ID]*job.JobResult{}, ended: map[jobid.ID]*job.JobResult{},
		mine: map[jobid.ID]func(*job.JobResult, error){}}
	entry := func(id jobid.ID, events ...string) []byte {
		var evs [][]byte
		for _, e := range events {
			evs = append(evs, []byte(e))
		}
		return wire.AppendJournalEntry(nil, id, evs, nil, nil)
	}
	finish := func(status string) string {
		return `{"timestamp":1,"name":"finish","context":{"status":` + status + `}}`
	}
	clean := `{"timestamp":2,"name":"clean"}`
	cancel := `{"timestamp":1,"name":"exception","context":{"type":"cancel","severity":0,"note":"by you"}}`
	got := make(chan *job.JobResult, 4)
	tell := func(r *job.JobResult, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- r
	}
	wait := func() *job.JobResult {
		select {
		case r := <-got:
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("no end was told")
			return nil
		}
	}
	apply := func(p []byte) {
		if _, err := pj.apply(p); err != nil {
			t.Fatal(err)
		}
	}
	// job 10 ends before its submission is answered
	pj.submit()
	apply(entry(10, finish("256")))
	apply(entry(10, clean))
	if len(pj.ended) != 1 {
		t.Fatalf("an end before the answer was not kept: %v", pj.ended)
	}
	pj.submitted(10, tell)
	if r := wait(); r.ID != 10 || r.Result != job.ResultFailed || *r.Waitstatus != 256 {
		t.Fatalf("job 10: %+v", r)
	}
	// job 11's submission is answered first
	pj.submit()
	pj.submitted(11, tell)
	apply(entry(11, cancel, clean))
	if r := pulledResult(11, wait(), nil); r.Result != "CANCELED" || !strings.Contains(r.Note, "by you") {
		t.Fatalf("job 11: %+v", r)
	}
	// another user's job (or one of the instance's own) ends while no
	// submission is out: nothing is kept of it
	apply(entry(12, finish("0"), clean))
	if len(pj.ended) != 0 || len(pj.running) != 0 || len(pj.mine) != 0 {
		t.Fatalf("left behind: ended %v running %v mine %v", pj.ended, pj.running, pj.mine)
	}
	// a failed stream ends the jobs waited for, and later ones at once
	pj.submit()
	pj.submitted(13, func(r *job.JobResult, err error) { got <- &job.JobResult{ID: 13, ExceptionNote: err.Error()} })
	pj.fail(errJournalRefused)
	if r := wait(); r.ID != 13 || r.ExceptionNote == "" {
		t.Fatalf("job 13 after the stream failed: %+v", r)
	}
	if _, err := pj.apply([]byte(`{"id":`)); err == nil {
		t.Fatal("a truncated entry was taken")
	}
}
