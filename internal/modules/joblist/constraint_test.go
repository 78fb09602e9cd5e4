package joblist

import (
	"encoding/json"
	"errors"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func testRecords() []*record {
	mk := func(id jobid.ID, uid uint32, name, queue string, state job.State, result job.Result, tSubmit float64, nodelist, ranks string) *record {
		r := newRecord(id)
		r.userid, r.State, r.Result, r.TSubmit = uid, state, result, tSubmit
		r.setLab(labels{name: name, queue: queue})
		r.Submitted = true
		r.Entered = job.StateNew | job.StateDepend
		if state&(job.StateRunning|job.StateInactive) != 0 {
			r.Entered |= job.StateRun
			r.TRun = tSubmit + 1
			r.nodelist, r.ranks = nodelist, ranks
		}
		r.Entered |= state
		return r
	}
	return []*record{
		mk(1, 42, "foo", "", job.StateSched, 0, 100, "", ""),
		mk(2, 43, "bar", "batch", job.StateRun, 0, 200, "node[1-2]", "[1-2]"),
		mk(3, 42, "foo", "debug", job.StateInactive, job.ResultFailed, 300, "node3", "3"),
		mk(4, 44, "baz", "batch", job.StateInactive, job.ResultCompleted, 400, "node4", "4"),
	}
}

func TestConstraints(t *testing.T) {
	recs := testRecords()
	cases := []struct {
		c    string
		want []jobid.ID
	}{
		{`{}`, []jobid.ID{1, 2, 3, 4}},
		{`{"userid":[42]}`, []jobid.ID{1, 3}},
		{`{"userid":[4294967295]}`, []jobid.ID{1, 2, 3, 4}},
		{`{"name":["foo","baz"]}`, []jobid.ID{1, 3, 4}},
		{`{"queue":["batch"]}`, []jobid.ID{2, 4}},
		{`{"not":[{"queue":["batch"]}]}`, []jobid.ID{1, 3}},
		{`{"states":["sched","run"]}`, []jobid.ID{1, 2}},
		{`{"states":[64]}`, []jobid.ID{3, 4}},
		{`{"states":["pending"]}`, []jobid.ID{1}},
		{`{"results":["failed"]}`, []jobid.ID{3}},
		{`{"results":[1]}`, []jobid.ID{4}},
		{`{"hostlist":["node[2-3]"]}`, []jobid.ID{2, 3}},
		{`{"ranks":["4"]}`, []jobid.ID{4}},
		{`{"t_submit":[">=300"]}`, []jobid.ID{3, 4}},
		{`{"t_submit":["<200"]}`, []jobid.ID{1}},
		{`{"t_run":[">0"]}`, []jobid.ID{2, 3, 4}},
		{`{"and":[{"userid":[42]},{"states":["inactive"]}]}`, []jobid.ID{3}},
		{`{"or":[{"userid":[43]},{"name":["baz"]}]}`, []jobid.ID{2, 4}},
		{`{"or":[]}`, nil},
		{`{"and":[]}`, []jobid.ID{1, 2, 3, 4}},
	}
	for _, c := range cases {
		t.Run(c.c, func(t *testing.T) {
			ct, err := compileConstraint(json.RawMessage(c.c))
			if err != nil {
				t.Fatal(err)
			}
			var got []jobid.ID
			for _, r := range recs {
				if ct.states&r.State != 0 && ct.match(r) {
					got = append(got, r.id)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("got %v want %v", got, c.want)
				}
			}
		})
	}
	for _, bad := range []string{`[]`, `{"a":1,"b":2}`, `{"userid":["x"]}`, `{"states":["bogus"]}`,
		`{"t_submit":["300"]}`, `{"t_submit":[">x"]}`, `{"hostlist":["node[1-"]}`, `{"and":{}}`, `{"bogus":[]}`} {
		if _, err := compileConstraint(json.RawMessage(bad)); !errors.Is(err, syscall.EPROTO) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestOrderedList(t *testing.T) {
	x := newIndex()
	add := func(id jobid.ID, prio int64) *record {
		r := newRecord(id)
		r.priority, r.State, r.Entered = prio, job.StateSched, job.StateSched
		x.jobs[id] = r
		x.relist(r, false)
		return r
	}
	add(1, 10)
	add(2, 20)
	r3 := add(3, 10)
	add(4, 20)
	order := func() (ids []jobid.ID) {
		recs := x.pending.ordered()
		for i := len(recs) - 1; i >= 0; i-- {
			ids = append(ids, recs[i].id)
		}
		return
	}
	if got := order(); len(got) != 4 || got[0] != 2 || got[1] != 4 || got[2] != 1 || got[3] != 3 {
		t.Fatalf("pending order %v", got)
	}
	r3.priority = 30
	x.relist(r3, true)
	if got := order(); got[0] != 3 {
		t.Fatalf("after reprioritize %v", got)
	}
	r3.State, r3.TRun = job.StateRun, 5
	x.relist(r3, false)
	if got := order(); len(got) != 3 || x.running.len() != 1 {
		t.Fatalf("after run %v", got)
	}
	x.remove(x.jobs[1])
	if got := order(); len(got) != 2 {
		t.Fatalf("after remove %v", got)
	}
}
