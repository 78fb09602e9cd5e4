package joblist

import (
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

func TestRecordFromJobspecAndR(t *testing.T) {
	r := newRecord(1)
	r.setJobspec([]byte(`{"version":1,"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":{"min":3},` +
		`"label":"task","with":[{"type":"core","count":4}]}]}],"tasks":[{"command":["/bin/app","-x"],"slot":"task",` +
		`"count":{"total":5}}],"attributes":{"system":{"duration":60.5,"cwd":"/home/a","queue":"batch","project":"p",` +
		`"bank":"b","environment":{"X":"y"}}}}`))
	if l := r.lab(); l.name != "app" || l.cwd != "/home/a" || l.queue != "batch" || l.project != "p" || l.bank != "b" ||
		r.duration != 60.5 || r.nnodes != 2 || r.ntasks != 5 {
		t.Errorf("record %+v", r)
	}
	r = newRecord(2)
	r.setJobspec([]byte(`{"resources":[{"type":"slot","count":2,"with":[{"type":"core","count":3}]}],` +
		`"tasks":[{"command":["true"],"count":{"per_slot":1}}],"attributes":{"system":{"job":{"name":"named"},` +
		`"shell":{"options":{"per-resource":{"type":"core","count":2}}}}}}`))
	if r.lab().name != "named" || r.ncores != 6 || r.ntasks != 12 || r.duration != 0 {
		t.Errorf("record %+v", r)
	}
	// a member of the wrong type leaves the record as it was
	r = newRecord(3)
	r.setJobspec([]byte(`{"attributes":{"system":{"cwd":5}},"tasks":[{"command":["x"]}]}`))
	if r.lab().name != "" || r.duration != -1 {
		t.Errorf("bad jobspec changed the record: %+v", r)
	}
	r.setR([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}},{"rank":"5","children":{"core":"0"}}],` +
		`"nodelist":["node[0-1]","node5"],"expiration":1764486000.5}}`))
	if r.ranks != "[0-1,5]" && r.ranks != "0-1,5" {
		t.Errorf("ranks %q", r.ranks)
	}
	if r.nnodes != 3 || r.ncores != 9 || r.nodelist != "node[0-1,5]" || r.expiration != 1764486000.5 {
		t.Errorf("record from R %+v", r)
	}
}

func TestDecodeJournalEntry(t *testing.T) {
	w, _, err := wire.DecodeJournalEntry([]byte(`{"id":9,"events":[{"timestamp":1.5,"name":"submit","context":{"userid":1,"urgency":16}},` +
		`{"timestamp":2,"name":"validate"}],"jobspec":{"a":1},"R":null}`))
	e := fromAttached(&w)
	if err != nil || e.ID != 9 || len(e.Events) != 2 || e.Events[0].Name != "submit" || e.Events[1].Timestamp != 2 ||
		string(e.Events[0].Context) != `{"userid":1,"urgency":16}` || string(e.Jobspec) != `{"a":1}` || e.R != nil {
		t.Fatalf("%+v %v", e, err)
	}
	if _, end, err := wire.DecodeJournalEntry([]byte(wire.JournalEnd)); err != nil || !end {
		t.Fatalf("sentinel: %v %v", end, err)
	}
	r := newRecord(9)
	for i := range e.Events {
		r.apply(&e.Events[i])
	}
	if r.userid != 1 || r.urgency != 16 || r.TSubmit != 1.5 {
		t.Errorf("record %+v", r)
	}
}

func TestRecordJobspecUpdate(t *testing.T) {
	r := newRecord(4)
	r.setLab(labels{name: "old", cwd: "/a", queue: "q1"})
	r.jobspecUpdate([]byte(`{"attributes.system.job.name":"new","attributes.system.queue":"q2",` +
		`"attributes.system.duration":30,"attributes.system.bank":5,"attributes.system.other":"x"}`))
	if l := r.lab(); l.name != "new" || l.queue != "q2" || l.cwd != "/a" || l.bank != "" || r.duration != 30 {
		t.Errorf("after update: %+v, duration %v", l, r.duration)
	}
}
