package resource

import (
	"encoding/json"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func eventLine(t *testing.T, name string, ctx map[string]any) string {
	t.Helper()
	ev, err := eventlog.New(name, ctx)
	if err != nil {
		t.Fatal(err)
	}
	line, err := eventlog.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(line)
}

// nextWith returns the next acquire response that has key.
func (a acquireStream) nextWith(key string) json.RawMessage {
	a.t.Helper()
	for {
		if v, ok := a.next()[key]; ok {
			return v
		}
	}
}

// TestNestedFollowsJob: a nested instance's inventory follows its job
// in the enclosing instance as the job grows and shrinks, through a
// module reload in between (the mapping of enclosing ranks is rebuilt
// from the job's eventlog; nothing is applied twice).
func TestNestedFollowsJob(t *testing.T) {
	id := jobid.ID(4242)
	R0 := `{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0-1"}},{"rank":"5","children":{"core":"0-3"}}],"nodelist":["n3","n5"],"starttime":100,"expiration":4000000000}}`
	fake := &fakeJobInfo{id: id, R: R0, eventlog: eventLine(t, "submit", map[string]any{"userid": 0}) + eventLine(t, "alloc", map[string]any{})}
	parent, ph := parentJob(t, fake)
	inst, kv := startInstance(t, 2, map[string]string{"parent-uri": parent, "jobid": id.String()})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	if R, _ := rset.Parse(acq.next()["resources"]); R.Ranks().String() != "0-1" {
		t.Fatalf("acquired %s", R.Ranks())
	}
	cur, _ := rset.Parse([]byte(R0))
	change := func(key, delta string) {
		t.Helper()
		d, err := rset.Parse([]byte(delta))
		if err != nil {
			t.Fatal(err)
		}
		if key == "R_delta_add" {
			cur = cur.Union(d)
		} else {
			cur = cur.Difference(d)
		}
		line := eventLine(t, "resource-update", map[string]any{key: json.RawMessage(delta)})
		if err := ph.Call(ctx, "job-info.test-append", 0, map[string]any{"event": line, "R": string(cur.Encode())}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// enclosing ranks 9 and 7 join: this instance's ranks 2 (7) and 3 (9)
	change("R_delta_add", `{"version":1,"execution":{"R_lite":[{"rank":"7","children":{"core":"0-5"}},{"rank":"9","children":{"core":"0-1","gpu":"0"}}],"nodelist":["n7","n9"]}}`)
	added, _ := rset.Parse(acq.nextWith("resources"))
	n2, _ := added.Node(2)
	n3, _ := added.Node(3)
	if added.Ranks().String() != "2-3" || n2.Hostname != "n7" || n2.Cores.String() != "0-5" || n3.Hostname != "n9" || n3.GPUs.String() != "0" || added.Expiration() != 4000000000 {
		t.Fatalf("grown by %s", added)
	}
	st := getStatus(t, h, 0)
	if all, _ := rset.Parse(st.R); all.Ranks().String() != "0-3" || st.Offline != "2-3" {
		t.Fatalf("status: R %s offline %s", st.R, st.Offline)
	}
	// enclosing rank 9 leaves (it never came up here: it may go)
	change("R_delta_sub", `{"version":1,"execution":{"R_lite":[{"rank":"9","children":{"core":"0-1","gpu":"0"}}]}}`)
	if s := str(acq.nextWith("shrink")); s != "3" {
		t.Fatalf("shrink %s", s)
	}
	f.Close()
	reloadModule(t, h)
	f, err = h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq = acquireStream{t, f}
	if R, _ := rset.Parse(acq.next()["resources"]); R.Ranks().String() != "0-2" {
		t.Fatalf("acquired after reload %s", R.Ranks())
	}
	// enclosing rank 11 joins as rank 3; rank 7 (2) leaves after it
	change("R_delta_add", `{"version":1,"execution":{"R_lite":[{"rank":"11","children":{"core":"0"}}],"nodelist":["n11"]}}`)
	added, _ = rset.Parse(acq.nextWith("resources"))
	if n, _ := added.Node(3); added.Ranks().String() != "3" || n.Hostname != "n11" {
		t.Fatalf("grown after reload by %s", added)
	}
	change("R_delta_sub", `{"version":1,"execution":{"R_lite":[{"rank":"11","children":{"core":"0"}}]}}`)
	if s := str(acq.nextWith("shrink")); s != "3" {
		t.Fatalf("shrink after reload %s", s)
	}
	// the acquire stream hears before the eventlog commit ends
	waitFor(t, func() bool { return countEvents(t, kv, "resource-shrink") == 2 })
	if g := countEvents(t, kv, "resource-grow"); g != 2 {
		t.Fatalf("%d resource-grow events: %v", g, kv.events(t))
	}

	// a fresh instance of the grown job starts from its original nodes
	// and the changes since
	inst2, _ := startInstance(t, 2, map[string]string{"parent-uri": parent, "jobid": id.String()})
	f2, err := inst2.Handle(0).RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq2 := acquireStream{t, f2}
	R, _ := rset.Parse(acq2.next()["resources"])
	if h0, _ := R.Host(0); h0 != "n3" {
		t.Fatalf("fresh instance: %s", R)
	}
	waitFor(t, func() bool {
		all, _ := rset.Parse(getStatus(t, inst2.Handle(0), 0).R)
		h2, _ := all.Host(2)
		return all.Ranks().String() == "0-2" && h2 == "n7"
	})
}
