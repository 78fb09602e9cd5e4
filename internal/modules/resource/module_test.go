package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// memKVS keeps committed values (appends included) and answers lookups,
// enough for the resource eventlog.
type memKVS struct {
	mu   sync.Mutex
	vals map[string][]byte
}

func (*memKVS) Name() string { return "kvs" }
func (k *memKVS) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("kvs.commit", func(r *flux.Request) {
		var req struct {
			Ops []kvs.Op `json:"ops"`
		}
		if r.Decode(&req) != nil {
			return
		}
		k.mu.Lock()
		for _, op := range req.Ops {
			var d treeobj.Object
			json.Unmarshal(op.Dirent, &d)
			v, _ := d.Value()
			if op.Flags&kvs.FlagAppend != 0 {
				k.vals[op.Key] = append(k.vals[op.Key], v...)
			} else {
				k.vals[op.Key] = v
			}
		}
		k.mu.Unlock()
		r.Respond(map[string]any{"rootref": "sha1-x", "rootseq": 1})
	})
	h.HandleFunc("kvs.lookup", func(r *flux.Request) {
		var req struct {
			Key string `json:"key"`
		}
		r.Decode(&req)
		k.mu.Lock()
		v, ok := k.vals[req.Key]
		k.mu.Unlock()
		if !ok {
			r.Errorf(syscall.ENOENT, "%s: no such key", req.Key)
			return
		}
		r.Respond(map[string]any{"val": treeobj.NewVal(v)})
	})
	return h.Serve(ctx)
}

func (k *memKVS) events(t *testing.T) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	evs, err := eventlog.Parse(k.vals[eventlogKey])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Name+string(e.Context))
	}
	return names
}

func startInstance(t *testing.T, size int, attrs map[string]string) (*brokertest.Instance, *memKVS) {
	kv := &memKVS{vals: map[string][]byte{}}
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return kv })
	reg.Register(Name, New)
	inst := brokertest.Start(t, brokertest.Options{
		Size: size, Registry: reg, Attrs: attrs,
		Modules: []broker.ModuleSpec{{Name: "kvs", Ranks: "0"}, {Name: Name}},
	})
	return inst, kv
}

type acquireStream struct {
	t *testing.T
	f *flux.Future
}

func (a acquireStream) next() map[string]json.RawMessage {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	m, err := a.f.Next(ctx)
	if err != nil {
		a.t.Fatalf("resource.acquire: %v", err)
	}
	var resp map[string]json.RawMessage
	m.UnmarshalPayload(&resp)
	return resp
}

func str(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

type status struct {
	R       json.RawMessage
	Online  string
	Offline string
	Exclude string
	Drain   map[string]struct {
		Timestamp float64
		Reason    string
	}
}

func getStatus(t *testing.T, h *flux.Handle, nodeid uint32) status {
	t.Helper()
	var st status
	if err := h.Call(brokertest.Ctx(t), "resource.status", nodeid, nil, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDiscoveryAndMonitoring discovers four ranks' resources, follows a
// rank going away and coming back, and drains and undrains.
func TestDiscoveryAndMonitoring(t *testing.T) {
	attrs := map[string]string{}
	wantCores, wantGPUs := "", ""
	xml := filepath.Join("..", "..", "..", "..", "shared", "conformance", "hwloc", "sierra.xml")
	if abs, err := filepath.Abs(xml); err == nil {
		if _, err := os.Stat(abs); err == nil {
			attrs["resource.hwloc-xml"] = abs
			wantCores, wantGPUs = "0-43", "0-3"
		}
	}
	if wantCores == "" {
		l, _ := discover("")
		wantCores = l.Cores.String()
	}
	inst, kv := startInstance(t, 4, attrs)
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)

	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	first := acq.next()
	R, err := rset.Parse(first["resources"])
	if err != nil {
		t.Fatal(err)
	}
	if R.NNodes() != 4 || !R.HasHostnames() {
		t.Fatalf("inventory %s", first["resources"])
	}
	for n := range R.All() {
		if n.Cores.String() != wantCores || n.GPUs.String() != wantGPUs {
			t.Fatalf("rank %d: cores %s gpus %s", n.Rank, n.Cores, n.GPUs)
		}
	}
	if str(first["up"]) != "0-3" {
		t.Fatalf("up %s", first["up"])
	}
	// every rank reported sierra's two NUMA domains in its hello: one
	// group in R's scheduling key (numa.go)
	if wantGPUs != "" {
		want := `{"fluxgo.numa":[{"ranks":"0-3","domains":[{"cores":"0-21","gpus":"0-1","socket":0,"nics":["hsi0","mlx5_0","hsi1","mlx5_1","enP5p1s0f0","enP5p1s0f1"],"memory":137132310528},` +
			`{"cores":"22-43","gpus":"2-3","socket":1,"nics":["hsi2","mlx5_2","hsi3","mlx5_3"],"memory":137166979072}]}]}`
		if got := string(R.Scheduling()); got != want {
			t.Fatalf("scheduling %s\nwant       %s", got, want)
		}
	}

	// rank 3's module goes away: down; it comes back: up
	if err := h.Call(ctx, "module.remove", 3, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	if u := acq.next(); str(u["down"]) != "3" || u["up"] != nil {
		t.Fatalf("update %v", u)
	}
	if st := getStatus(t, h, 0); st.Online != "0-2" || st.Offline != "3" {
		t.Fatalf("status %+v", st)
	}
	if err := h.Call(ctx, "module.load", 3, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	if u := acq.next(); str(u["up"]) != "3" {
		t.Fatalf("update %v", u)
	}

	// drain and undrain
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "1", "reason": "bad fan"}, nil); err != nil {
		t.Fatal(err)
	}
	if u := acq.next(); str(u["down"]) != "1" {
		t.Fatalf("update %v", u)
	}
	// flux-core's resource.status is for rank 0 only
	if err := h.Call(ctx, "resource.status", 2, nil, nil); err == nil || !strings.Contains(err.Error(), "only works on rank 0") {
		t.Fatalf("resource.status on rank 2: %v", err)
	}
	st := getStatus(t, h, 0)
	if d, ok := st.Drain["1"]; !ok || d.Reason != "bad fan" || d.Timestamp == 0 {
		t.Fatalf("drain info %+v", st.Drain)
	}
	err = h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "0-1"}, nil)
	if !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("drain of a drained rank: %v", err)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "1", "reason": "new", "mode": "update"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h, 0); st.Drain["1"].Reason != "bad fan" {
		t.Fatalf("update mode changed the reason: %+v", st.Drain)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "1", "reason": "new", "mode": "overwrite"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h, 0); st.Drain["1"].Reason != "new" {
		t.Fatalf("overwrite mode kept the reason: %+v", st.Drain)
	}
	for _, bad := range []map[string]any{{"targets": "7"}, {"targets": "node[", "reason": "x"}, {"targets": "1", "mode": "sometimes"}} {
		if err := h.Call(ctx, "resource.drain", 0, bad, nil); !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("drain %v: %v", bad, err)
		}
	}
	if err := h.Call(ctx, "resource.drain", 1, map[string]any{"targets": "1"}, nil); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("drain on rank 1: %v", err)
	}
	if err := h.Call(ctx, "resource.undrain", 0, map[string]any{"targets": "1-2"}, nil); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("undrain of an undrained rank: %v", err)
	}
	if err := h.Call(ctx, "resource.undrain", 0, map[string]any{"targets": "1-2", "mode": "force"}, nil); err != nil {
		t.Fatal(err)
	}
	if u := acq.next(); str(u["up"]) != "1" {
		t.Fatalf("update %v", u)
	}

	// without a scheduler, sched-status is the resource module's view
	var ss struct{ All, Down, Allocated json.RawMessage }
	if err := h.Call(ctx, "resource.sched-status", 0, nil, &ss); err != nil {
		t.Fatal(err)
	}
	all, _ := rset.Parse(ss.All)
	down, _ := rset.Parse(ss.Down)
	alloc, err := rset.Parse(ss.Allocated)
	if err != nil || all.NNodes() != 4 || !down.Empty() || !alloc.Empty() {
		t.Fatalf("sched-status %s", ss.All)
	}

	// rank 3's broker shuts down: down again
	inst.Brokers[3].Shutdown(0)
	if u := acq.next(); str(u["down"]) != "3" {
		t.Fatalf("update after broker shutdown %v", u)
	}

	// the KVS eventlog has the story
	want := []string{`resource-define{"method":"dynamic-discovery"}`, `offline{"idset":"3"}`, `online{"idset":"3"}`,
		`drain{"idset":"1","nodelist":`, `drain{"idset":"1","nodelist":`, `undrain{"idset":"1","nodelist":`,
		`offline{"idset":"3"}`}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := kv.events(t)
		if matchPrefixes(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eventlog:\n%s\nwant prefixes:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// matchPrefixes reports whether want's prefixes match a subsequence of
// got (online events of ranks joining are interleaved at will).
func matchPrefixes(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && strings.HasPrefix(g, want[i]) {
			i++
		}
	}
	return i == len(want)
}

// TestConfigExcludeForceUpAndReplay uses a fake inventory larger than the
// instance, and checks that drains survive a restart of the module.
func TestConfigExcludeForceUpAndReplay(t *testing.T) {
	inst, _ := startInstance(t, 1, map[string]string{
		"resource.config":           `[{"hosts":"node[0-15]","cores":"0-63"},{"hosts":"node[12-15]","properties":["gpu"],"gpus":"0-1"}]`,
		"resource.exclude":          "node15",
		"resource.monitor-force-up": "true",
	})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	first := acq.next()
	R, _ := rset.Parse(first["resources"])
	if R.NNodes() != 15 || R.NCores() != 15*64 || R.NGPUs() != 6 || str(first["up"]) != "0-14" {
		t.Fatalf("acquire %s up %s", R.String(), first["up"])
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "node[2-3]", "reason": "swap"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "15"}, nil); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("drain of an excluded rank: %v", err)
	}
	st := getStatus(t, h, 0)
	if st.Exclude != "15" || st.Online != "0-15" || st.Drain["2-3"].Reason != "swap" {
		t.Fatalf("status %+v", st)
	}
	// restart the module: the drain comes back from the eventlog
	f.Close()
	if err := h.Call(ctx, "module.remove", 0, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "module.load", 0, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	st = getStatus(t, h, 0)
	if st.Drain["2-3"].Reason != "swap" {
		t.Fatalf("drain not restored: %+v", st.Drain)
	}
	f, _ = h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if up := str(acquireStream{t, f}.next()["up"]); up != "0-1,4-14" {
		t.Fatalf("up after restart %s", up)
	}
}

// hwlocXML is a minimal hwloc topology of host with ncores cores.
func hwlocXML(host string, ncores int) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<topology version=\"2.0\">\n <object type=\"Machine\" os_index=\"0\">\n")
	b.WriteString(`  <info name="HostName" value="` + host + `"/>` + "\n")
	for i := range ncores {
		b.WriteString(fmt.Sprintf("  <object type=\"Core\" os_index=\"%d\"><object type=\"PU\" os_index=\"%d\"/></object>\n", i, i))
	}
	b.WriteString(" </object>\n</topology>\n")
	return b.String()
}

// TestReloadAndAcquireMute replaces the inventory from an R file and from
// hwloc XML files, refuses while a scheduler holds resource.acquire, and
// mutes resource.acquire updates.
func TestReloadAndAcquireMute(t *testing.T) {
	inst, kv := startInstance(t, 2, map[string]string{
		"resource.config":           `[{"hosts":"node[0-1]","cores":"0-1"}]`,
		"resource.monitor-force-up": "true",
	})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	reload := func(path string, xml, force bool) error {
		return h.Call(ctx, "resource.reload", 0, map[string]any{"path": path, "xml": xml, "force": force}, nil)
	}
	big := write("big.json", `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-7"}}],"nodelist":["big[0-3]"],"starttime":0,"expiration":0}}`)
	small := write("small.json", `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}}],"nodelist":["small[0-1]"],"starttime":0,"expiration":0}}`)

	// a scheduler holds the resources: busy
	sched := inst.Handle(0)
	f, err := sched.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acquireStream{t, f}.next()
	if err := reload(small, false, false); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("reload with an acquirer: %v", err)
	}
	sched.Close() // the disconnect frees them
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := reload(small, false, false)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			t.Fatalf("reload: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	R, _ := rset.Parse(getStatus(t, h, 0).R)
	if R.NCores() != 8 || R.Nodelist().String() != "small[0-1]" {
		t.Fatalf("after reload: %s %s", R, R.Nodelist())
	}
	if evs := kv.events(t); evs[len(evs)-1] != `resource-define{"method":"reload"}` {
		t.Fatalf("events %v", evs)
	}
	// more ranks than brokers: only with force
	if err := reload(big, false, false); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "-f") {
		t.Fatalf("reload of 4 ranks on 2 brokers: %v", err)
	}
	if err := reload(big, false, true); err != nil {
		t.Fatal(err)
	}
	if R, _ := rset.Parse(getStatus(t, h, 0).R); R.NNodes() != 4 {
		t.Fatalf("forced reload: %s", R)
	}
	// bad input names the path
	if err := reload(filepath.Join(dir, "nosuch.json"), false, false); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "nosuch.json") {
		t.Fatalf("missing file: %v", err)
	}
	bad := write("bad.json", `{"version":99}`)
	if err := reload(bad, false, false); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("bad R: %v", err)
	}
	if err := reload(dir, true, false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("no xml files: %v", err)
	}
	// hwloc XML, one file per rank
	xdir := filepath.Join(dir, "xml")
	os.Mkdir(xdir, 0o755)
	os.WriteFile(filepath.Join(xdir, "0.xml"), []byte(hwlocXML("fake0", 2)), 0o644)
	os.WriteFile(filepath.Join(xdir, "1.xml"), []byte(hwlocXML("fake1", 4)), 0o644)
	os.WriteFile(filepath.Join(xdir, "README"), []byte("not a topology"), 0o644)
	if err := reload(xdir, true, false); err != nil {
		t.Fatal(err)
	}
	R, _ = rset.Parse(getStatus(t, h, 0).R)
	if R.String() != "rank0/core[0-1] rank1/core[0-3]" || R.Nodelist().String() != "fake[0-1]" {
		t.Fatalf("from xml: %s %s", R, R.Nodelist())
	}

	// acquire-mute: no more updates on the stream
	f, err = h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	if up := str(acq.next()["up"]); up != "0-1" {
		t.Fatalf("up %s", up)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "0"}, nil); err != nil {
		t.Fatal(err)
	}
	if down := str(acq.next()["down"]); down != "0" {
		t.Fatalf("down %s", down)
	}
	if err := h.Call(ctx, "resource.acquire-mute", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if m, err := f.Next(short); err == nil {
		t.Fatalf("update after acquire-mute: %s", m.JSON())
	}
}
