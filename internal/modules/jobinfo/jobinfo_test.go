package jobinfo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/jobinfo/kvsfake"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The job of the wire transcripts (testdata/wire/job-eventlog.jsonl).
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
)

type env struct {
	t     *testing.T
	store *kvsfake.Store
	h     *flux.Handle
}

func start(t *testing.T) *env {
	t.Helper()
	store := kvsfake.New()
	reg := module.NewRegistry()
	reg.Register("kvs", store.KVS)
	reg.Register("kvs-watch", store.Watch)
	reg.Register(Name, New)
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "kvs-watch"}, {Name: Name}}})
	return &env{t: t, store: store, h: inst.Handle(0)}
}

func (e *env) putJob(id jobid.ID, log string) {
	e.store.Put(job.KVSKey(id, "eventlog"), []byte(log))
	e.store.Put(job.KVSKey(id, "R"), []byte(transcriptR))
	e.store.Put(job.KVSKey(id, "jobspec"), []byte(`{"version":1,"resources":[],"tasks":[],"attributes":{"system":{"duration":0}}}`))
}

func TestLookupTranscript(t *testing.T) {
	e := start(t)
	e.putJob(transcriptID, transcriptLog)
	ctx := brokertest.Ctx(t)
	for _, flags := range []int{0, job.LookupCurrent} {
		var resp map[string]any
		err := e.h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": transcriptID, "keys": []string{"R"}, "flags": flags}, &resp)
		if err != nil {
			t.Fatal(err)
		}
		if resp["R"] != transcriptR || resp["id"] != float64(transcriptID) {
			t.Fatalf("flags %d: response %v", flags, resp)
		}
	}
	// the exact payload shape of the transcript: {"id":..., "eventlog": "..."}
	f, _ := e.h.RPC("job-info.lookup", flux.NodeidAny, map[string]any{"id": transcriptID, "keys": []string{"eventlog"}, "flags": 0}, 0)
	m, err := f.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"id": transcriptID, "eventlog": transcriptLog})
	var a, b any
	json.Unmarshal(m.JSON(), &a)
	json.Unmarshal(want, &b)
	if ja, _ := json.Marshal(a); string(ja) != string(mustJSON(b)) {
		t.Fatalf("got %s", m.JSON())
	}
	if !strings.HasPrefix(string(m.JSON()), `{"id":52898562048,"eventlog":`) {
		t.Fatalf("key order: %s", m.JSON())
	}
	// JSON_DECODE: R and jobspec as objects, other keys still strings
	vals, err := job.Lookup(ctx, e.h, transcriptID, []string{"R", "jobspec", "eventlog"}, job.LookupJSONDecode)
	if err != nil {
		t.Fatal(err)
	}
	if vals["R"][0] != '{' || vals["jobspec"][0] != '{' || vals["eventlog"][0] != '"' {
		t.Fatalf("decoded lookup: %v", vals)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestLookupErrors(t *testing.T) {
	e := start(t)
	ctx := brokertest.Ctx(t)
	_, err := job.Lookup(ctx, e.h, 12345, []string{"R"}, 0)
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing job: %v", err)
	}
	e.putJob(transcriptID, transcriptLog)
	_, err = job.Lookup(ctx, e.h, transcriptID, []string{"nosuchkey"}, 0)
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing key: %v", err)
	}
	_, err = job.Lookup(ctx, e.h, transcriptID, []string{"R"}, 0x10)
	if !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("bad flags: %v", err)
	}
}

func TestLookupCurrentAppliesUpdates(t *testing.T) {
	e := start(t)
	log := strings.Replace(transcriptLog, `{"timestamp":1796013269.4331894,"name":"start"}`,
		`{"timestamp":1796013269.4331894,"name":"start"}`+"\n"+`{"timestamp":1796013269.44,"name":"resource-update","context":{"expiration":1796099999.5}}`, 1)
	e.putJob(transcriptID, log)
	ctx := brokertest.Ctx(t)
	vals, err := job.Lookup(ctx, e.h, transcriptID, []string{"R"}, job.LookupCurrent|job.LookupJSONDecode)
	if err != nil {
		t.Fatal(err)
	}
	var R struct {
		Execution struct {
			Expiration float64 `json:"expiration"`
		} `json:"execution"`
	}
	if err := json.Unmarshal(vals["R"], &R); err != nil || R.Execution.Expiration != 1796099999.5 {
		t.Fatalf("R: %s %v", vals["R"], err)
	}
	var resp map[string]json.RawMessage
	if err := e.h.Call(ctx, "job-info.update-lookup", flux.NodeidAny, map[string]any{"id": transcriptID, "key": "R", "flags": 0}, &resp); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp["R"], &R); err != nil || R.Execution.Expiration != 1796099999.5 {
		t.Fatalf("update-lookup: %s", resp["R"])
	}
}

func TestAllow(t *testing.T) {
	guest := func(uid uint32) *flux.Request {
		return &flux.Request{Msg: &message.Message{Userid: uid, Rolemask: message.RoleUser}}
	}
	if err := allow(guest(0), transcriptID, []byte(transcriptLog)); err != nil {
		t.Fatalf("job owner denied: %v", err)
	}
	if err := allow(guest(1000), transcriptID, []byte(transcriptLog)); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("other user allowed: %v", err)
	}
	owner := &flux.Request{Msg: &message.Message{Userid: 1000, Rolemask: message.RoleOwner}}
	if err := allow(owner, transcriptID, []byte(transcriptLog)); err != nil {
		t.Fatalf("instance owner denied: %v", err)
	}
	operator := &flux.Request{Msg: &message.Message{Userid: 1000, Rolemask: message.RoleUser | message.RoleOperator}}
	if err := allow(operator, transcriptID, []byte(transcriptLog)); err != nil {
		t.Fatalf("operator denied: %v", err)
	}
}

// collect reads a watch to its end.
func collect(t *testing.T, w *job.EventWatch) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for {
		ev, err := w.Next(ctx)
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("watch: %v (after %v)", err, names)
		}
		names = append(names, ev.Name)
	}
}

func TestWatchCompleteEventlog(t *testing.T) {
	e := start(t)
	e.putJob(transcriptID, transcriptLog)
	w, err := job.WatchEventlog(e.h, transcriptID, "eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	names := collect(t, w)
	if strings.Join(names, ",") != "submit,validate,depend,priority,alloc,start,finish,release,free,clean" {
		t.Fatalf("events: %v", names)
	}
}

func TestWatchFollowsAppends(t *testing.T) {
	e := start(t)
	lines := strings.SplitAfter(transcriptLog, "\n")
	e.putJob(transcriptID, lines[0])
	w, err := job.WatchEventlog(e.h, transcriptID, "eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := brokertest.Ctx(t)
	raw, err := w.NextRaw(ctx)
	if err != nil || raw != lines[0] {
		t.Fatalf("first event %q %v", raw, err)
	}
	go func() {
		for _, l := range lines[1:] {
			time.Sleep(time.Millisecond)
			e.store.Append(job.KVSKey(transcriptID, "eventlog"), []byte(l))
		}
	}()
	names := collect(t, w)
	if len(names) != 9 || names[8] != "clean" {
		t.Fatalf("events: %v", names)
	}
}

func TestWatchCancel(t *testing.T) {
	e := start(t)
	lines := strings.SplitAfter(transcriptLog, "\n")
	e.putJob(transcriptID, lines[0]+lines[1])
	w, err := job.WatchEventlog(e.h, transcriptID, "eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := brokertest.Ctx(t)
	for i := 0; i < 2; i++ {
		if _, err := w.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Cancel(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(ctx); err != io.EOF {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestWatchMissingJob(t *testing.T) {
	e := start(t)
	w, err := job.WatchEventlog(e.h, 777, "eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(brokertest.Ctx(t)); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing job: %v", err)
	}
}

func TestWatchGuestLogs(t *testing.T) {
	e := start(t)
	lines := strings.SplitAfter(transcriptLog, "\n")
	e.putJob(transcriptID, strings.Join(lines[:6], ""))
	exec, err := job.WatchEventlog(e.h, transcriptID, "guest.exec.eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := job.WatchEventlog(e.h, transcriptID, "guest.output", 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	execKey := job.KVSKey(transcriptID, "guest.exec.eventlog")
	outKey := job.KVSKey(transcriptID, "guest.output")
	e.store.Put(execKey, []byte(`{"timestamp":1796013269.4292829,"name":"init"}`+"\n"))
	e.store.Put(outKey, []byte(`{"timestamp":1796013269.44,"name":"header","context":{"version":1,"encoding":{"stdout":"UTF-8","stderr":"UTF-8"},"count":{"stdout":1,"stderr":1},"options":{}}}`+"\n"))
	e.store.Append(execKey, []byte(`{"timestamp":1796013269.43,"name":"starting"}`+"\n"))
	e.store.Append(outKey, []byte(`{"timestamp":1796013269.45,"name":"data","context":{"stream":"stdout","rank":"0","data":"hi\n"}}`+"\n"))
	e.store.Append(outKey, []byte(`{"timestamp":1796013269.45,"name":"data","context":{"stream":"stderr","rank":"0","eof":true}}`+"\n"))
	e.store.Append(outKey, []byte(`{"timestamp":1796013269.45,"name":"data","context":{"stream":"stdout","rank":"0","eof":true}}`+"\n"))
	e.store.Append(execKey, []byte(`{"timestamp":1796013269.455385,"name":"done"}`+"\n"))
	if got := strings.Join(collect(t, exec), ","); got != "init,starting,done" {
		t.Fatalf("exec events: %s", got)
	}
	if got := strings.Join(collect(t, out), ","); got != "header,data,data,data" {
		t.Fatalf("output events: %s", got)
	}
}

func TestWatchGuestEndsWithJob(t *testing.T) {
	e := start(t)
	lines := strings.SplitAfter(transcriptLog, "\n")
	e.putJob(transcriptID, strings.Join(lines[:4], ""))
	exec, err := job.WatchEventlog(e.h, transcriptID, "guest.exec.eventlog", 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// canceled before it ran: no exec eventlog ever
	e.store.Append(job.KVSKey(transcriptID, "eventlog"), []byte(`{"timestamp":1796013275.2853711,"name":"exception","context":{"type":"cancel","severity":0,"note":"","userid":0}}`+"\n"))
	e.store.Append(job.KVSKey(transcriptID, "eventlog"), []byte(`{"timestamp":1796013275.2854545,"name":"clean"}`+"\n"))
	if got := collect(t, exec); len(got) != 0 {
		t.Fatalf("exec events of a job that never ran: %v", got)
	}
}

func TestWaitEventAndResult(t *testing.T) {
	e := start(t)
	e.putJob(transcriptID, transcriptLog)
	ctx := brokertest.Ctx(t)
	ev, err := job.WaitEvent(ctx, e.h, transcriptID, "eventlog", 0, job.EventNamed("start"))
	if err != nil || ev.Name != "start" {
		t.Fatalf("wait-event: %v %v", ev, err)
	}
	if _, err := job.WaitEvent(ctx, e.h, transcriptID, "eventlog", 0, job.EventNamed("nosuch")); !errors.Is(err, job.ErrEventNotFound) {
		t.Fatalf("missing event: %v", err)
	}
	res, err := job.WaitResult(ctx, e.h, transcriptID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != job.ResultCompleted || res.ExitCode(1) != 0 || res.TRun != 1796013269.4271228 {
		t.Fatalf("result: %+v", res)
	}
}
