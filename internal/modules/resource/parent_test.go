package resource

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// fakeJobInfo answers job-info.lookup for one job's R and eventlog and
// streams its eventlog to job-info.eventlog-watch requests. The test
// appends an event with job-info.test-append {event, R}: R (optional) is
// the job's R after it, as the job manager would store it.
type fakeJobInfo struct {
	id       jobid.ID
	R        string
	eventlog string
}

func (*fakeJobInfo) Name() string { return "job-info" }
func (f *fakeJobInfo) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	var watchers []*flux.Request
	h.HandleFunc("job-info.lookup", func(r *flux.Request) {
		var req struct {
			ID   jobid.ID `json:"id"`
			Keys []string `json:"keys"`
		}
		if r.Decode(&req) != nil {
			return
		}
		if req.ID != f.id {
			r.Errorf(syscall.ENOENT, "no such job")
			return
		}
		resp := map[string]any{"id": req.ID}
		for _, k := range req.Keys {
			switch k {
			case "R":
				resp["R"] = f.R
			case "eventlog":
				resp["eventlog"] = f.eventlog
			default:
				r.Errorf(syscall.ENOENT, "no such key %s", k)
				return
			}
		}
		r.Respond(resp)
	})
	h.HandleFunc("job-info.eventlog-watch", func(r *flux.Request) {
		var req struct {
			ID    jobid.ID `json:"id"`
			Path  string   `json:"path"`
			Flags int      `json:"flags"`
		}
		if r.Decode(&req) != nil {
			return
		}
		if req.ID != f.id || req.Path != "eventlog" || req.Flags != 0 || !r.Msg.IsStreaming() {
			r.Errorf(syscall.EPROTO, "unexpected eventlog-watch %+v", req)
			return
		}
		for _, line := range strings.SplitAfter(f.eventlog, "\n") {
			if line != "" {
				r.Respond(map[string]any{"event": line})
			}
		}
		watchers = append(watchers, r)
	})
	h.HandleFunc("job-info.eventlog-watch-cancel", func(r *flux.Request) {
		var req struct {
			Matchtag uint32 `json:"matchtag"`
		}
		r.Decode(&req)
		out := watchers[:0]
		for _, w := range watchers {
			if w.Msg.Matchtag == req.Matchtag && w.Msg.RouteString() == r.Msg.RouteString() {
				w.Errorf(syscall.ENODATA, "canceled")
				continue
			}
			out = append(out, w)
		}
		watchers = out
	})
	h.HandleFunc("job-info.disconnect", func(r *flux.Request) {
		out := watchers[:0]
		for _, w := range watchers {
			if w.Msg.RouteString() != r.Msg.RouteString() {
				out = append(out, w)
			}
		}
		watchers = out
	})
	h.HandleFunc("job-info.test-append", func(r *flux.Request) {
		var req struct {
			Event string `json:"event"`
			R     string `json:"R"`
		}
		if r.Decode(&req) != nil {
			return
		}
		f.eventlog += req.Event
		if req.R != "" {
			f.R = req.R
		}
		for _, w := range watchers {
			w.Respond(map[string]any{"event": req.Event})
		}
		r.Respond(nil)
	})
	return h.Serve(ctx)
}

// parentInstance runs an instance whose job-info knows job id's R.
func parentInstance(t *testing.T, id jobid.ID, R string) string {
	uri, _ := parentJob(t, &fakeJobInfo{id: id, R: R})
	return uri
}

// parentJob runs an instance with f as its job-info and returns its URI
// and a handle on it.
func parentJob(t *testing.T, f *fakeJobInfo) (string, *flux.Handle) {
	reg := module.NewRegistry()
	reg.Register("job-info", func() module.Module { return f })
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg, Modules: []broker.ModuleSpec{{Name: "job-info"}}})
	return inst.Brokers[0].LocalURI(), inst.Handle(0)
}

// TestInventoryFromJob: a nested instance's inventory is its job's R,
// ranks renumbered from 0, expiration kept.
func TestInventoryFromJob(t *testing.T) {
	id := jobid.ID(123456789)
	jobR := `{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"2-3"}},{"rank":"5","children":{"core":"0"}}],` +
		`"nodelist":["n3","n5"],"starttime":100,"expiration":4000000000}}`
	parent := parentInstance(t, id, jobR)
	inst, kv := startInstance(t, 2, map[string]string{"parent-uri": parent, "jobid": id.String()})
	h := inst.Handle(0)
	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	first := acquireStream{t, f}.next()
	R, err := rset.Parse(first["resources"])
	if err != nil {
		t.Fatal(err)
	}
	n0, ok0 := R.Node(0)
	n1, ok1 := R.Node(1)
	if R.NNodes() != 2 || !ok0 || !ok1 || n0.Cores.String() != "2-3" || n1.Cores.String() != "0" {
		t.Fatalf("inventory %s", first["resources"])
	}
	if h0, _ := R.Host(0); h0 != "n3" || R.Expiration() != 4000000000 {
		t.Fatalf("inventory %s", first["resources"])
	}
	waitFor(t, func() bool {
		for _, e := range kv.events(t) {
			if strings.HasPrefix(e, `resource-define{"method":"job"}`) {
				return true
			}
		}
		return false
	})
}

// TestInventoryFromJobMismatch: a job R that does not fit the instance
// (here: more nodes than brokers) is not used; resources are discovered.
func TestInventoryFromJobMismatch(t *testing.T) {
	id := jobid.ID(987654321)
	jobR := `{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0"}}]}}`
	parent := parentInstance(t, id, jobR)
	inst, _ := startInstance(t, 2, map[string]string{"parent-uri": parent, "jobid": id.String()})
	f, err := inst.Handle(0).RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	first := acquireStream{t, f}.next()
	R, err := rset.Parse(first["resources"])
	if err != nil {
		t.Fatal(err)
	}
	l, _ := discover("")
	if n, ok := R.Node(1); R.NNodes() != 2 || !ok || n.Cores.String() != l.Cores.String() {
		t.Fatalf("inventory %s", first["resources"])
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
