package joblist

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/modules/jobinfo/kvsfake"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

const (
	transcriptID  = jobid.ID(52898562048)
	transcriptR   = `{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "starttime": 1796013269.424749, "expiration": 0.0, "nslots": 1, "nodelist": ["vm"]}}`
	transcriptLog = `{"timestamp":1796013269.4011328,"name":"submit","context":{"userid":0,"urgency":16,"flags":0,"version":1}}
{"timestamp":1796013269.4125094,"name":"validate"}
{"timestamp":1796013269.4236302,"name":"depend"}
{"timestamp":1796013269.4236693,"name":"priority","context":{"priority":16}}
{"timestamp":1796013269.4271228,"name":"alloc","context":{"annotations":{"sched":{"resource_summary":"rank0/core0"}}}}
{"timestamp":1796013269.4331894,"name":"start"}
{"timestamp":1796013269.4554298,"name":"finish","context":{"status":0}}
{"timestamp":1796013269.4573538,"name":"release","context":{"ranks":"all","final":true}}
{"timestamp":1796013269.4573994,"name":"free"}
{"timestamp":1796013269.4574146,"name":"clean"}
`
	transcriptSpec = `{"resources": [{"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}], "label": "task"}], "tasks": [{"command": ["true"], "slot": "task", "count": {"per_slot": 1}}], "attributes": {"system": {"duration": 0, "cwd": "/root", "shell": {"options": {"rlimit": {"cpu": -1}}}}}, "version": 1}`
)

func putInactive(s *kvsfake.Store, id jobid.ID, log, spec, R string) {
	s.Put(job.KVSKey(id, "eventlog"), []byte(log))
	s.Put(job.KVSKey(id, "jobspec"), []byte(spec))
	if R != "" {
		s.Put(job.KVSKey(id, "R"), []byte(R))
	}
}

// wireResponse returns the payload of the job-list.list response in
// testdata/wire/jobs.jsonl (the byte-exact reference).
func wireResponse(t *testing.T) (req, resp []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "wire", "jobs.jsonl"))
	if err != nil {
		t.Skipf("transcript: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var rec struct {
			Dir     string          `json:"dir"`
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Topic != "job-list.list" || string(rec.Payload) == "null" {
			continue
		}
		if rec.Dir == "client->broker" {
			req = rec.Payload
		} else {
			resp = rec.Payload
		}
	}
	return req, resp
}

func TestListTranscript(t *testing.T) {
	e := start(t, envOpts{beforeLoad: func(s *kvsfake.Store) {
		putInactive(s, transcriptID, transcriptLog, transcriptSpec, transcriptR)
	}})
	req, want := wireResponse(t)
	// the KVS restore runs in the background: list-id waits for the job
	if _, err := job.ListID(brokertest.Ctx(t), e.h, transcriptID, []string{}, 0); err != nil {
		t.Fatal(err)
	}
	f, err := e.h.RPC("job-list.list", flux.NodeidAny, req, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	ctx := brokertest.Ctx(t)
	m, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// the transcript shows it decoded; compare compacted forms
	var wantBuf, gotBuf []byte
	wantBuf = compactBytes(t, want)
	gotBuf = compactBytes(t, m.JSON())
	if string(gotBuf) != string(wantBuf) {
		t.Fatalf("response\n got %s\nwant %s", gotBuf, wantBuf)
	}
	if _, err := f.Next(ctx); err == nil {
		t.Fatal("stream did not end")
	}
}

func compactBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	// keep key order: re-encode through a RawMessage compaction instead
	out := make([]byte, 0, len(b))
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			if c == '\\' {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\t', '\r':
			continue
		case '"':
			inStr = true
		}
		out = append(out, c)
	}
	return out
}

func TestLifecycleAndOrder(t *testing.T) {
	e := start(t, envOpts{})
	ok := e.submit("true", 16, 0, nil)
	bad := e.submit("false", 16, 0, map[string]any{"job": map[string]any{"name": "failing"}})
	run := e.submit("sleep", 16, 0, map[string]any{"queue": "batch"})
	jok := e.waitState(ok, job.StateInactive)
	if jok.Result != job.ResultCompleted || !jok.Success || jok.Name != "true" || jok.Ntasks != 1 || jok.Cwd != "/home/user" {
		t.Fatalf("completed job: %+v", jok)
	}
	if jok.Nnodes != 1 || jok.Ranks != "0" || jok.Ncores != 1 || !jok.Has.Has(job.AttrTRun) || jok.TCleanup < jok.TRun {
		t.Fatalf("completed job resources: %+v", jok)
	}
	jbad := e.waitState(bad, job.StateInactive)
	if jbad.Result != job.ResultFailed || jbad.Success || jbad.Waitstatus != 256 || jbad.Name != "failing" {
		t.Fatalf("failed job: %+v", jbad)
	}
	jrun := e.waitState(run, job.StateRun)
	if jrun.Queue != "batch" || jrun.Has.Has(job.AttrResult) {
		t.Fatalf("running job: %+v", jrun)
	}
	all := e.list(job.ListRequest{Attrs: []string{"state"}})
	if len(all) != 3 || all[0].ID != run || all[1].ID != bad || all[2].ID != ok {
		t.Fatalf("order: %v", ids(all))
	}
	// cancel the running job: result CANCELED
	if err := e.h.Call(brokertest.Ctx(t), "job-manager.raise", flux.NodeidAny, map[string]any{"id": run, "type": "cancel", "severity": 0, "note": "bye"}, nil); err != nil {
		t.Fatal(err)
	}
	jc := e.waitState(run, job.StateInactive)
	if jc.Result != job.ResultCanceled || !jc.ExceptionOccurred || jc.ExceptionType != "cancel" || jc.ExceptionNote != "bye" {
		t.Fatalf("canceled job: %+v", jc)
	}
	// inactive: most recently inactive first
	all = e.list(job.ListRequest{Attrs: []string{"state"}})
	if len(all) != 3 || all[0].ID != run {
		t.Fatalf("order after cancel: %v", ids(all))
	}
	// filters
	got := e.list(job.ListRequest{Attrs: []string{}, Constraint: map[string]any{"results": []string{"failed", "canceled"}}})
	if len(got) != 2 {
		t.Fatalf("failed|canceled: %v", ids(got))
	}
	got = e.list(job.ListRequest{Attrs: []string{}, Constraint: map[string]any{"name": []string{"failing"}}})
	if len(got) != 1 || got[0].ID != bad {
		t.Fatalf("by name: %v", ids(got))
	}
	got = e.list(job.ListRequest{Attrs: []string{}, Constraint: map[string]any{"not": []any{map[string]any{"queue": []string{"batch"}}}}})
	if len(got) != 2 {
		t.Fatalf("not queue: %v", ids(got))
	}
	got = e.list(job.ListRequest{Attrs: []string{}, MaxEntries: 1})
	if len(got) != 1 {
		t.Fatalf("max_entries: %v", ids(got))
	}
	got = e.list(job.ListRequest{Attrs: []string{}, Since: jc.TInactive - 1e-6})
	if len(got) != 1 || got[0].ID != run {
		t.Fatalf("since: %v", ids(got))
	}
	got = e.list(job.ListRequest{Attrs: []string{}, Constraint: map[string]any{"and": []any{
		map[string]any{"userid": []int{0}}, map[string]any{"states": []int{int(job.StateActive)}}}}})
	if len(got) != 0 {
		t.Fatalf("active: %v", ids(got))
	}
}

func ids(jobs []*job.Info) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID.String())
	}
	return out
}

func TestPendingOrderAndAnnotations(t *testing.T) {
	e := start(t, envOpts{hold: true})
	a := e.submit("true", 16, 0, nil)
	b := e.submit("true", 20, 0, nil)
	c := e.submit("true", 16, 0, nil)
	held := e.submit("true", 0, 0, nil)
	for _, id := range []jobid.ID{a, b, c, held} {
		e.waitState(id, job.StateSched)
	}
	jobs := e.list(job.ListRequest{Attrs: []string{"priority", "annotations", "urgency"}})
	if len(jobs) != 4 || jobs[0].ID != b || jobs[1].ID != a || jobs[2].ID != c || jobs[3].ID != held {
		t.Fatalf("pending order: %v", ids(jobs))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		j, err := job.ListID(brokertest.Ctx(t), e.h, a, []string{"annotations"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(j.Annotations), "held by test") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("annotations: %s", j.Annotations)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestListIDWaitsAndErrors(t *testing.T) {
	e := start(t, envOpts{})
	ctx := brokertest.Ctx(t)
	if _, err := job.ListID(ctx, e.h, 424242, []string{"state"}, 0); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, err := job.ListID(ctx, e.h, 424242, []string{"nosuch"}, 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad attr: %v", err)
	}
	id := e.submit("true", 16, 0, nil)
	j, err := job.ListID(ctx, e.h, id, []string{"state", "result"}, job.StateInactive)
	if err != nil || j.State != job.StateInactive || j.Result != job.ResultCompleted {
		t.Fatalf("list-id state=inactive: %+v %v", j, err)
	}
	attrs, err := job.ListAttrs(ctx, e.h)
	if err != nil || len(attrs) != len(job.Attrs())+1 || attrs[len(attrs)-1] != "all" {
		t.Fatalf("list-attrs: %v %v", attrs, err)
	}
}

func TestStartsBeforeJobManagerAndRestores(t *testing.T) {
	var old []jobid.ID
	var wasActive jobid.ID
	e := start(t, envOpts{listFirst: true, beforeLoad: func(s *kvsfake.Store) {
		gen, _ := jobid.NewGenerator(1, time.Now().Add(-48*time.Hour))
		for i := 0; i < 50; i++ {
			id, _ := gen.Next()
			old = append(old, id)
			putInactive(s, id, transcriptLog, transcriptSpec, transcriptR)
		}
		// a job that was pending when the previous instance stopped: the
		// job manager restores it and it runs to completion here
		wasActive, _ = gen.Next()
		putInactive(s, wasActive, strings.Join(strings.SplitAfter(transcriptLog, "\n")[:4], ""), transcriptSpec, "")
	}})
	id := e.submit("true", 16, 0, nil)
	e.waitState(id, job.StateInactive)
	e.waitState(wasActive, job.StateInactive)
	// the restore runs in the background: wait for it
	var jobs []*job.Info
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if jobs = e.list(job.ListRequest{Attrs: []string{"name", "nodelist", "annotations"}}); len(jobs) == 52 {
			break
		}
	}
	if len(jobs) != 52 {
		t.Fatalf("jobs: %d", len(jobs))
	}
	restored := map[jobid.ID]bool{}
	for _, o := range old {
		restored[o] = true
	}
	seen := 0
	for _, j := range jobs {
		if !restored[j.ID] {
			continue
		}
		seen++
		if j.Nodelist != "vm" || j.Name != "true" || !strings.Contains(string(j.Annotations), "rank0/core0") {
			t.Fatalf("restored job: %+v", j)
		}
	}
	if seen != 50 {
		t.Fatalf("%d of 50 old jobs listed", seen)
	}
	var stats struct {
		JobStates  map[string]int `json:"job_states"`
		Successful int            `json:"successful"`
	}
	if err := e.h.Call(brokertest.Ctx(t), "job-list.job-stats", flux.NodeidAny, map[string]any{}, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.JobStates["inactive"] != 52 {
		t.Fatalf("stats: %+v", stats)
	}
}

func TestListRequestErrors(t *testing.T) {
	e := start(t, envOpts{})
	ctx := brokertest.Ctx(t)
	cases := []struct {
		req   string
		errno syscall.Errno
	}{
		{`{"attrs":[]}`, syscall.EPROTO},
		{`{"max_entries":-1,"attrs":[]}`, syscall.EPROTO},
		{`{"max_entries":0}`, syscall.EPROTO},
		{`{"max_entries":0,"attrs":["bogus"]}`, syscall.EINVAL},
		{`{"max_entries":0,"attrs":[],"constraint":{"bogus":[1]}}`, syscall.EPROTO},
		{`{"max_entries":0,"attrs":[],"constraint":{"t_submit":["1"]}}`, syscall.EPROTO},
		{`{"max_entries":0,"attrs":[],"since":-1}`, syscall.EPROTO},
	}
	for _, c := range cases {
		t.Run(c.req, func(t *testing.T) {
			f, err := e.h.RPC("job-list.list", flux.NodeidAny, json.RawMessage(c.req), flux.Streaming)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Next(ctx); !errors.Is(err, c.errno) {
				t.Fatalf("got %v, want %v", err, c.errno)
			}
		})
	}
}
