package bothways

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// submitWay is one way of sending job-manager.submit, as job-ingest
// sends it (records, jobspecs attached) or as flux-core's does (the
// jobspec in the payload).
type submitWay struct {
	name     string
	side     int // index in sides()
	attached bool
}

var submitWays = []submitWay{
	{"in-broker, jobspec attached", 1, true},
	{"socket, jobspec attached (the broker writes it out)", 0, true},
	{"socket, jobspec in the payload", 0, false},
}

// TestSubmitAndJournal: a job handed to job-manager.submit with its
// record the three ways is recorded the same (KVS J, jobspec,
// eventlog), and job-manager.events-journal tells a subscriber in the
// broker (entries attached) and one over the socket the same entries.
func TestSubmitAndJournal(t *testing.T) {
	c := ctx(t)
	all := sides(t, []string{"job-exec", "job-shell"})
	sock := all[0].h
	hash, err := content.HashName(c, sock)
	if err != nil {
		t.Fatal(err)
	}
	// both subscribers first, so they see every job from its submit
	journals := make([]*collector[wire.JournalEntry], len(all))
	for i, s := range all {
		journals[i] = subscribe(t, s)
	}
	gen, err := jobid.NewGenerator(999, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := jobspec.FromCommand([]string{"hostname"}, jobspec.CommandOptions{NTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := spec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	J := sign.Wrap(raw, owner())
	var ids []jobid.ID
	for _, way := range submitWays {
		h := all[way.side].h
		id, err := gen.Next()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		var rec wire.SubmitRecord
		if rec.J, err = content.Store(c, h, []byte(J), 0); err != nil {
			t.Fatal(err)
		}
		if rec.Jobspec, err = content.Store(c, h, raw, 0); err != nil {
			t.Fatal(err)
		}
		if want, _ := content.Blobref(hash, raw); rec.Jobspec != want {
			t.Fatalf("jobspec blobref %s, want %s", rec.Jobspec, want)
		}
		sj := wire.SubmitJob{ID: id, Userid: owner(), Urgency: 0, TSubmit: float64(time.Now().UnixNano()) / 1e9, Record: &rec}
		req := message.NewRequest("job-manager.submit", flux.NodeidAny, nil)
		if way.attached {
			parsed, err := jobspec.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			req.Attached = &wire.SubmitAttachment{Specs: []*jobspec.Jobspec{parsed}, Raw: [][]byte{raw}}
		} else {
			sj.Jobspec = raw
		}
		req.SetJSONBuffer(wire.AppendSubmitRequest(nil, []wire.SubmitJob{sj}))
		f, err := h.SendRequest(req, 0)
		if err != nil {
			t.Fatalf("%s: %v", way.name, err)
		}
		m, err := f.Get(c)
		if err != nil {
			t.Fatalf("%s: job-manager.submit: %v", way.name, err)
		}
		rejected, rootseq, err := wire.DecodeSubmitResponse(m.JSON())
		if err != nil || len(rejected) != 0 || rootseq < 0 {
			t.Fatalf("%s: job-manager.submit answered %s (rejected %v, rootseq %d, err %v)", way.name, m.JSON(), rejected, rootseq, err)
		}
		// urgency 0 holds it; cancelling ends it without a scheduler
		if _, err := job.WaitEvent(c, sock, id, "eventlog", 0, func(e eventlog.Event) bool { return e.Name == "priority" }); err != nil {
			t.Fatalf("%s: %v", way.name, err)
		}
		f, err = job.Raise(sock, id, "cancel", 0, "bothways")
		if err == nil {
			_, err = f.Get(c)
		}
		if err != nil {
			t.Fatalf("%s: cancel: %v", way.name, err)
		}
		if _, err := job.WaitEvent(c, sock, id, "eventlog", 0, func(e eventlog.Event) bool { return e.Name == "clean" }); err != nil {
			t.Fatalf("%s: %v", way.name, err)
		}
	}

	// the record: J and jobspec as submitted, the same events
	records := make([][]string, len(ids))
	for i, id := range ids {
		for _, key := range []string{"J", "jobspec"} {
			v, err := kvs.GetRaw(c, sock, kvs.PrimaryNamespace, job.KVSKey(id, key))
			if err != nil {
				t.Fatalf("%s: %s: %v", submitWays[i].name, key, err)
			}
			records[i] = append(records[i], key+" "+string(v))
		}
		v, err := kvs.GetRaw(c, sock, kvs.PrimaryNamespace, job.KVSKey(id, "eventlog"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := eventlog.Parse(v)
		if err != nil {
			t.Fatalf("%s: eventlog: %v", submitWays[i].name, err)
		}
		for _, e := range events {
			records[i] = append(records[i], e.Name+" "+stripTimes(e.Context))
		}
	}
	if records[0][0] != "J "+J || records[0][1] != "jobspec "+string(raw) {
		t.Errorf("%s: J and jobspec in the KVS are not the submitted ones: %q", submitWays[0].name, records[0][:2])
	}
	for i := 1; i < len(records); i++ {
		if !slices.Equal(records[0], records[i]) {
			t.Errorf("the records differ (%s -, %s +):%s", submitWays[0].name, submitWays[i].name, diffLines(records[0], records[i]))
		}
	}

	// the journal: the same entries for each job on both sides
	seenClean := func(es []wire.JournalEntry) bool {
		n := 0
		for _, e := range es {
			for _, ev := range e.Events {
				if ev.Name == "clean" && slices.Contains(ids, e.ID) {
					n++
				}
			}
		}
		return n == len(ids)
	}
	var streams [][]string
	for i, j := range journals {
		es := j.wait(t, c, all[i].name+" journal", seenClean)
		var lines []string
		for _, e := range es {
			if slices.Contains(ids, e.ID) {
				lines = append(lines, journalLine(e))
			}
		}
		streams = append(streams, lines)
	}
	if len(streams[0]) == 0 {
		t.Fatal("the journal had no entry for the jobs")
	}
	if !slices.Equal(streams[0], streams[1]) {
		t.Errorf("the journals differ (socket -, in-broker +):%s", diffLines(streams[0], streams[1]))
	}
}

// subscribe asks for events-journal entries attached (a subscriber in
// the broker gets them as Go values, one over the socket as JSON) and
// returns once the backlog has come, so no later entry is missed.
func subscribe(t *testing.T, s side) *collector[wire.JournalEntry] {
	t.Helper()
	col := newCollector[wire.JournalEntry]()
	ready := make(chan struct{}) // the backlog's end: subscribed
	f, err := s.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"full": true, "attached": true}, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	go func() {
		for {
			m, err := f.Next(context.Background())
			if err != nil {
				return // the test ended (Close) or the stream did
			}
			if att, ok := m.Attached.(*wire.JournalEntry); ok {
				col.add(*att)
				continue
			}
			e, end, err := wire.DecodeJournalEntry(m.JSON())
			if err != nil {
				t.Errorf("%s: events-journal response %s: %v", s.name, m.JSON(), err)
				return
			}
			if end {
				close(ready)
			} else {
				col.add(e)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: events-journal: no end of backlog in 20 s", s.name)
	}
	return col
}

// journalLine writes an entry out exactly: timestamps, contexts, jobspec
// and R as they came.
func journalLine(e wire.JournalEntry) string {
	s := fmt.Sprintf("%s jobspec=%s R=%s", e.ID, e.Jobspec, e.R)
	for _, ev := range e.Events {
		s += fmt.Sprintf(" {%v %s %s}", ev.Timestamp, ev.Name, ev.Context)
	}
	return s
}

// stripTimes writes an event context with the members that hold times
// (which differ from job to job) left out.
func stripTimes(ctx json.RawMessage) string {
	if len(ctx) == 0 {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal(ctx, &m); err != nil {
		return "unparsable " + string(ctx)
	}
	for _, k := range []string{"t_submit", "timestamp"} {
		delete(m, k)
	}
	b, _ := json.Marshal(m)
	return string(b)
}
