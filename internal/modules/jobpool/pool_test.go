package jobpool

import (
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/kvs"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	kvsapi "github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

func start(t *testing.T) *brokertest.Instance {
	reg := module.NewRegistry()
	reg.Register(content.Name, content.New)
	reg.Register(kvs.Name, kvs.New)
	reg.Register(Name, New)
	return brokertest.Start(t, brokertest.Options{Registry: reg,
		Modules: []broker.ModuleSpec{{Name: content.Name}, {Name: kvs.Name}, {Name: Name}}})
}

func spec(t *testing.T, cmd string) json.RawMessage {
	js, err := jobspec.FromCommand([]string{cmd}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := js.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type pulledItems struct {
	Items []struct {
		ID      int64           `json:"id"`
		Jobspec json.RawMessage `json:"jobspec"`
	} `json:"items"`
}

// TestPullWaitsAndHandsOutInOrder checks a pull of an empty pool waits
// for work, items come out in the order added, at most max at a time,
// and a closed pool ends its pullers with ENODATA once empty.
func TestPullWaitsAndHandsOutInOrder(t *testing.T) {
	inst := start(t)
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	if err := h.Call(ctx, Name+".create", 0, map[string]any{"pool": "p"}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := h.RPC(Name+".pull", 0, map[string]any{"pool": "p", "max": 2, "child": "c1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got pulledItems
	answered := make(chan error, 1)
	go func() { answered <- f.Decode(ctx, &got) }()
	select {
	case err := <-answered:
		t.Fatalf("a pull of an empty pool was answered at once: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	var added struct {
		IDs []int64 `json:"ids"`
	}
	specs := []json.RawMessage{spec(t, "a"), spec(t, "b"), spec(t, "c")}
	if err := h.Call(ctx, Name+".add", 0, map[string]any{"pool": "p", "jobspecs": specs}, &added); err != nil {
		t.Fatal(err)
	}
	if len(added.IDs) != 3 || added.IDs[0] != 1 || added.IDs[2] != 3 {
		t.Fatalf("add answered %v", added.IDs)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || got.Items[0].ID != 1 || got.Items[1].ID != 2 {
		t.Fatalf("first pull got %+v, want items 1 and 2", got.Items)
	}
	if err := h.Call(ctx, Name+".close", 0, map[string]any{"pool": "p"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": 5}, &got); err != nil || len(got.Items) != 1 || got.Items[0].ID != 3 {
		t.Fatalf("second pull: %+v, %v; want item 3", got.Items, err)
	}
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": 5}, &got); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("pull of a closed, empty pool: %v, want ENODATA", err)
	}
	// results: only for items handed out, once
	res := map[string]any{"result": "COMPLETED", "jobid": "ƒ2"}
	if err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "p", "id": 1, "result": res}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "p", "id": 1, "result": res}, nil); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("second result of item 1: %v, want EINVAL", err)
	}
	if err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "p", "id": 9, "result": res}, nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("result of item 9: %v, want ENOENT", err)
	}
	if err := h.Call(ctx, Name+".add", 0, map[string]any{"pool": "p", "jobspecs": specs}, nil); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("add to a closed pool: %v, want EPERM", err)
	}
}

// TestDisconnectReturnsItems checks what a client took and did not
// finish goes back to the front of the pool when it disconnects, and its
// waiting pull is forgotten.
func TestDisconnectReturnsItems(t *testing.T) {
	inst := start(t)
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	specs := []json.RawMessage{spec(t, "a"), spec(t, "b"), spec(t, "c")}
	if err := h.Call(ctx, Name+".add", 0, map[string]any{"pool": "p", "jobspecs": specs}, nil); err != nil {
		t.Fatal(err)
	}
	child, err := flux.Open(inst.Brokers[0].LocalURI())
	if err != nil {
		t.Fatal(err)
	}
	var got pulledItems
	if err := child.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": 2, "child": "c"}, &got); err != nil || len(got.Items) != 2 {
		t.Fatalf("child's pull: %+v %v", got, err)
	}
	if _, err := child.RPC(Name+".pull", 0, map[string]any{"pool": "p", "max": 2}, 0); err != nil {
		t.Fatal(err) // answered with item 3 at once
	}
	if _, err := child.RPC(Name+".pull", 0, map[string]any{"pool": "p", "max": 2}, 0); err != nil {
		t.Fatal(err) // waits: nothing left
	}
	time.Sleep(100 * time.Millisecond)
	child.Close()
	// items 1-3 come back, in order; the forgotten pull takes none
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list struct {
			Pool  PoolInfo `json:"pool"`
			Items []Item   `json:"items"`
		}
		if err := h.Call(ctx, Name+".list", 0, map[string]any{"pool": "p"}, &list); err != nil {
			t.Fatal(err)
		}
		if list.Pool.Pending == 3 && list.Pool.Waiting == 0 {
			for _, it := range list.Items {
				if it.Pulls != 1 || it.Child == "" && it.ID < 3 {
					t.Errorf("item %+v", it)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the disconnect: %+v", list.Pool)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": 3}, &got); err != nil || len(got.Items) != 3 || got.Items[0].ID != 1 {
		t.Fatalf("pull after the disconnect: %+v %v", got.Items, err)
	}
}

// TestRestoreMovesOldLayout checks a pool written before the buckets
// (items.ID holding the jobspec) comes back whole after a reload, is
// moved into the buckets (no stale record left to be read again), and a
// batch of results naming a bad item records the good ones.
func TestRestoreMovesOldLayout(t *testing.T) {
	inst := start(t)
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	js := spec(t, "true")
	var txn kvsapi.Txn
	txn.Put("job-pool.0.old.meta", []byte(`{"closed":false,"next":3}`))
	for _, id := range []string{"1", "2"} {
		txn.Put("job-pool.0.old.items."+id, []byte(`{"id":`+id+`,"jobspec":`+string(js)+`,"state":"pending","t_add":1}`))
	}
	if _, err := kvsapi.Commit(ctx, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	reload := func() {
		if err := h.Call(ctx, "module.remove", 0, map[string]string{"name": Name}, nil); err != nil {
			t.Fatal(err)
		}
		if err := h.Call(ctx, "module.load", 0, map[string]any{"name": Name, "args": []string{}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	reload()
	var got pulledItems
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "old", "max": 1, "child": "c"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0].ID != 1 || string(got.Items[0].Jobspec) != string(js) {
		t.Fatalf("pull after restore: %+v", got)
	}
	res := map[string]any{"result": "COMPLETED"}
	err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "old", "results": []map[string]any{
		{"id": 1, "result": res}, {"id": 2, "result": res}}}, nil)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "1 of 2 results refused") {
		t.Fatalf("batch with an unassigned item: %v", err)
	}
	reload()
	if _, err := kvsapi.Get(ctx, h, "", "job-pool.0.old.items.1"); err == nil {
		t.Fatal("the old record items.1 is still there")
	}
	var info struct {
		Items []struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		} `json:"items"`
	}
	if err := h.Call(ctx, Name+".list", 0, map[string]any{"pool": "old"}, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Items) != 2 || info.Items[0].State != "done" || info.Items[1].State != "pending" {
		t.Fatalf("after a second restore: %+v", info.Items)
	}
}

// reload removes and loads the module again (it restores from the KVS).
func reload(t *testing.T, h *flux.Handle) {
	t.Helper()
	ctx := brokertest.Ctx(t)
	if err := h.Call(ctx, "module.remove", 0, map[string]string{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "module.load", 0, map[string]any{"name": Name, "args": []string{}}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestLogsRestore checks what an add and a batch of results write (one
// log record per item, nothing for a pull) and that a reload restores
// it: done items with their results, the pulled and unfinished ones
// pending again with their jobspecs, across two buckets; and that a
// pool of the bucket-per-record layout is moved into the logs.
func TestLogsRestore(t *testing.T) {
	inst := start(t)
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	var specs []json.RawMessage
	for range bucketSize + 2 {
		specs = append(specs, spec(t, "true"))
	}
	specs[bucketSize] = spec(t, "last") // item bucketSize+1, the second bucket
	if err := h.Call(ctx, Name+".add", 0, map[string]any{"pool": "p", "jobspecs": specs}, nil); err != nil {
		t.Fatal(err)
	}
	var got pulledItems
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": 3, "child": "c"}, &got); err != nil || len(got.Items) != 3 {
		t.Fatalf("pull: %+v %v", got, err)
	}
	res := map[string]any{"result": "COMPLETED", "jobid": "ƒ2"}
	if err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "p", "results": []map[string]any{
		{"id": 1, "result": res}, {"id": 3, "result": res}}}, nil); err != nil {
		t.Fatal(err)
	}
	dir, err := kvsapi.Dir(ctx, h, "", "job-pool.0.p")
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(dir.Names(), " "); names != "added meta results" {
		t.Fatalf("the pool's KVS directory holds %q, want added meta results", names)
	}
	lines := func(key string) int {
		v, err := kvsapi.Get(ctx, h, "", key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return strings.Count(v, "\n")
	}
	if n0, n1, r := lines("job-pool.0.p.added.0"), lines("job-pool.0.p.added.1"), lines("job-pool.0.p.results.0.0"); n0 != bucketSize-1 || n1 != 3 || r != 2 {
		t.Fatalf("logs hold %d + %d added and %d result records, want %d + 3 and 2", n0, n1, r, bucketSize-1)
	}
	reload(t, h)
	var list struct {
		Pool  PoolInfo `json:"pool"`
		Items []Item   `json:"items"`
	}
	if err := h.Call(ctx, Name+".list", 0, map[string]any{"pool": "p"}, &list); err != nil {
		t.Fatal(err)
	}
	if list.Pool.Done != 2 || list.Pool.Pending != bucketSize || list.Pool.Assigned != 0 {
		t.Fatalf("after a reload: %+v", list.Pool)
	}
	if it := list.Items[2]; it.ID != 3 || it.State != StateDone || it.Result == nil || it.Result.Jobid != "ƒ2" || it.Child != "c" || it.Pulls != 1 {
		t.Fatalf("item 3 after a reload: %+v", it)
	}
	// item 2 (pulled, not done) comes first, then 4...
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "p", "max": bucketSize}, &got); err != nil || len(got.Items) != bucketSize || got.Items[0].ID != 2 {
		t.Fatalf("pull after a reload: %d items %v", len(got.Items), err)
	}
	if last := got.Items[bucketSize-2]; last.ID != bucketSize+1 || string(last.Jobspec) != string(specs[bucketSize]) {
		t.Fatalf("item %d after a reload: %s", last.ID, last.Jobspec)
	}
	// results in other logs (items 150 and 1001) read back too
	if err := h.Call(ctx, Name+".done", 0, map[string]any{"pool": "p", "results": []map[string]any{
		{"id": 150, "result": res}, {"id": bucketSize + 1, "result": res}}}, nil); err != nil {
		t.Fatal(err)
	}
	reload(t, h)
	if err := h.Call(ctx, Name+".list", 0, map[string]any{"pool": "p"}, &list); err != nil {
		t.Fatal(err)
	}
	if list.Pool.Done != 4 || list.Items[149].State != StateDone || list.Items[bucketSize].State != StateDone {
		t.Fatalf("after the second reload: %+v", list.Pool)
	}

	// the layout before the logs: a state record and a jobspec per item
	js := spec(t, "old")
	var txn kvsapi.Txn
	txn.Put("job-pool.0.b.meta", []byte(`{"closed":true,"next":3}`))
	txn.Put("job-pool.0.b.items.0.1", []byte(`{"id":1,"state":"done","t_add":1,"child":"x","result":{"result":"FAILED"}}`))
	txn.Put("job-pool.0.b.items.0.2", []byte(`{"id":2,"state":"assigned","t_add":1}`))
	txn.Put("job-pool.0.b.jobspecs.0.1", js)
	txn.Put("job-pool.0.b.jobspecs.0.2", js)
	if _, err := kvsapi.Commit(ctx, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ { // moved, then read from the logs
		reload(t, h)
		if err := h.Call(ctx, Name+".list", 0, map[string]any{"pool": "b"}, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 2 || list.Items[0].State != StateDone || list.Items[0].Result.Result != "FAILED" || list.Items[1].State != StatePending || !list.Pool.Closed {
			t.Fatalf("round %d: the old layout's pool: %+v %+v", round, list.Pool, list.Items)
		}
		dir, err := kvsapi.Dir(ctx, h, "", "job-pool.0.b")
		if err != nil {
			t.Fatal(err)
		}
		if names := strings.Join(dir.Names(), " "); round == 2 && names != "added meta results" {
			t.Fatalf("after the move the pool's directory holds %q", names)
		}
	}
	if err := h.Call(ctx, Name+".pull", 0, map[string]any{"pool": "b", "max": 5}, &got); err != nil || len(got.Items) != 1 || string(got.Items[0].Jobspec) != string(js) {
		t.Fatalf("pull of the moved pool: %+v %v", got, err)
	}
}

// TestParseLogsErrors checks a damaged log is refused naming the record.
func TestParseLogsErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"id":1,"t_add":1,"jobspec":{}}` + "\n" + `{"id":2,`, "record 2"},
		{`{"id":0,"jobspec":{}}`, "record 1: want an id"},
		{`{"id":3,"jobspec":"x"}`, "jobspec object"},
		{`[1]`, "record 1"},
		{`{"id":5,"t_add":1,"same":1}`, "record 1: same jobspec"},
	} {
		err := parseAdded([]byte(c.data), func(*Item) {})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseAdded(%q): %v, want %q", c.data, err, c.want)
		}
	}
	if err := parseResults([]byte(`{"id":4,"state":"pending"}`), func(*wire.PoolItem) {}); err == nil || !strings.Contains(err.Error(), "state done") {
		t.Errorf("a results record not done: %v", err)
	}
}

// FuzzParseLogs checks the log readers never panic and what they accept
// is what a record holds.
func FuzzParseLogs(f *testing.F) {
	f.Add([]byte(`{"id":1,"t_add":1.5,"jobspec":{"version":1}}` + "\n"))
	f.Add([]byte(`{"id":1,"t_add":1.5,"jobspec":{"version":1}}` + "\n" + `{"id":2,"t_add":1.5,"same":1}` + "\n"))
	f.Add([]byte(`{"id":7,"state":"done","result":{"result":"COMPLETED"}}` + "\n" + `{"id":8`))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseAdded(data, func(it *Item) {
			if it.ID < 1 || it.State != StatePending || len(it.Jobspec) == 0 {
				t.Fatalf("parseAdded gave %+v", it)
			}
			// what appendAdded writes reads back the same
			var again []*Item
			if err := parseAdded(appendAdded(nil, it, false), func(x *Item) { again = append(again, x) }); err != nil || len(again) != 1 || again[0].ID != it.ID {
				t.Fatalf("the record of %+v did not read back: %v", it, err)
			}
		})
		parseResults(data, func(rec *wire.PoolItem) {
			if rec.ID < 1 || rec.State != StateDone || rec.Result == nil || rec.Jobspec != nil {
				t.Fatalf("parseResults gave %+v", rec)
			}
		})
	})
}

// TestInternIdenticalJobspecs: a stream of identical jobspecs (flux
// pool submit --bcc) shares one copy of the bytes in the pool; a
// different one is kept as given.
func TestInternIdenticalJobspecs(t *testing.T) {
	p := &pool{}
	a1, a2, b := spec(t, "a"), spec(t, "a"), spec(t, "b")
	x, y := p.intern(a1), p.intern(a2)
	if &x[0] != &y[0] || &x[0] != &a1[0] {
		t.Error("identical jobspecs hold two copies")
	}
	if z := p.intern(b); &z[0] != &b[0] || string(z) != string(b) {
		t.Error("a different jobspec was not kept as given")
	}
	if w := p.intern(spec(t, "a")); &w[0] == &a1[0] {
		t.Error("intern remembers more than the last jobspec")
	}
}

// TestAddedLogSameJobspec: a run of identical jobspecs is written once
// per added log, each later record saying "same", and reads back whole.
func TestAddedLogSameJobspec(t *testing.T) {
	js := spec(t, "a")
	var data []byte
	for i := int64(1); i <= 3; i++ {
		data = appendAdded(data, &Item{PoolItem: wire.PoolItem{ID: i, TAdd: 1, Jobspec: js}}, i > 1)
	}
	other := spec(t, "b")
	data = appendAdded(data, &Item{PoolItem: wire.PoolItem{ID: 4, TAdd: 1, Jobspec: other}}, false)
	if n := strings.Count(string(data), `"jobspec"`); n != 2 {
		t.Fatalf("%d jobspecs written for 4 records of 2 jobspecs:\n%s", n, data)
	}
	var got []*Item
	if err := parseAdded(data, func(it *Item) { got = append(got, it) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || string(got[2].Jobspec) != string(js) || string(got[3].Jobspec) != string(other) {
		t.Fatalf("read back %+v", got)
	}
}

// TestDoneRecord: a done item compacted reads back as it was, its
// repeated strings shared.
func TestDoneRecord(t *testing.T) {
	p := &pool{items: map[int64]*Item{}}
	ws := 256
	for i, res := range []*Result{
		{Jobid: "ƒa", Result: string([]byte("COMPLETED")), Waitstatus: new(int)},
		{Jobid: "ƒb", Result: string([]byte("COMPLETED")), Waitstatus: &ws, Note: "n"},
		{Jobid: "", Result: "REFUSED"},
	} {
		it := &Item{PoolItem: wire.PoolItem{ID: int64(i + 1), State: StateDone, Child: "job ƒx", Pulls: 2, TAdd: 1, TAssign: 2, TDone: 3, Result: res}}
		p.items[it.ID] = it
		want := *it
		p.retire(it)
		got := p.done[i].item()
		if got.ID != want.ID || got.State != StateDone || got.Child != want.Child || got.Pulls != 2 || got.TAdd != 1 || got.TAssign != 2 || got.TDone != 3 ||
			got.Result.Jobid != res.Jobid || got.Result.Result != res.Result || got.Result.Note != res.Note ||
			(res.Waitstatus == nil) != (got.Result.Waitstatus == nil) || res.Waitstatus != nil && *got.Result.Waitstatus != *res.Waitstatus {
			t.Errorf("item %d: %+v (result %+v), want %+v (result %+v)", i+1, got, got.Result, want, res)
		}
	}
	if len(p.items) != 0 || p.count()[StateDone] != 3 {
		t.Errorf("items %d, done %d", len(p.items), p.count()[StateDone])
	}
	if unsafe.StringData(p.done[0].result) != unsafe.StringData(p.done[1].result) {
		t.Error("two COMPLETED results hold two copies")
	}
}
