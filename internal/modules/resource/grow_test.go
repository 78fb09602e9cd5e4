package resource

import (
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func reloadModule(t *testing.T, h *flux.Handle) {
	t.Helper()
	ctx := brokertest.Ctx(t)
	if err := h.Call(ctx, "module.remove", 0, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "module.load", 0, map[string]any{"name": Name}, nil); err != nil {
		t.Fatal(err)
	}
}

func mustR(t *testing.T, s string) json.RawMessage {
	t.Helper()
	if _, err := rset.Parse([]byte(s)); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return json.RawMessage(s)
}

func countEvents(t *testing.T, kv *memKVS, prefix string) int {
	n := 0
	for _, e := range kv.events(t) {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// TestGrowShrinkRPCs grows a configured inventory of three nodes by two,
// refuses what resource.grow and resource.shrink must refuse, follows
// the acquire stream, and replays the changes after a module reload.
func TestGrowShrinkRPCs(t *testing.T) {
	inst, kv := startInstance(t, 2, map[string]string{
		"resource.config":   `[{"hosts":"node[0-2]","cores":"0-3"}]`,
		"resource.noverify": "true",
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
	if R.Ranks().String() != "0-2" {
		t.Fatalf("acquired %s", first["resources"])
	}
	up := str(first["up"])
	for up != "0-1" {
		up = str(acq.next()["up"]) // rank 1 says hello
		if up == "1" {
			up = "0-1"
		}
	}

	grow := func(R string) error {
		return h.Call(ctx, "resource.grow", 0, map[string]any{"R": mustR(t, R)}, nil)
	}
	for _, bad := range []string{
		`{"version":1,"execution":{"R_lite":[{"rank":"4","children":{"core":"0-1"}}]}}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"2-3","children":{"core":"0-1"}}]}}`,
	} {
		if err := grow(bad); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "next 1 ranks are 3") && !strings.Contains(err.Error(), "next 2 ranks are 3-4") {
			t.Fatalf("grow by %s: %v", bad, err)
		}
	}
	if err := h.Call(ctx, "resource.grow", 0, map[string]any{}, nil); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("grow without R: %v", err)
	}
	if err := grow(`{"version":1,"execution":{"R_lite":[{"rank":"3-4","children":{"core":"0-1","gpu":"0"}}],"nodelist":["node[3-4]"]}}`); err != nil {
		t.Fatal(err)
	}
	resp := acq.next()
	added, err := rset.Parse(resp["resources"])
	if err != nil || added.Ranks().String() != "3-4" || added.NGPUs() != 2 || added.Nodelist().String() != "node[3-4]" {
		t.Fatalf("acquire after grow: %s (%v)", resp["resources"], err)
	}
	if _, ok := resp["up"]; ok {
		t.Fatalf("grown ranks reported up: %v", resp)
	}
	st := getStatus(t, h, 0)
	all, _ := rset.Parse(st.R)
	if all.Ranks().String() != "0-4" || st.Online != "0-1" || st.Offline != "2-4" {
		t.Fatalf("status after grow: R %s online %s offline %s", all.Ranks(), st.Online, st.Offline)
	}

	shrink := func(ranks string) error {
		return h.Call(ctx, "resource.shrink", 0, map[string]any{"ranks": ranks}, nil)
	}
	for ranks, want := range map[string]error{"3": syscall.EINVAL, "5": syscall.EINVAL, "0-4": syscall.EINVAL, "1-4": syscall.EBUSY} {
		if err := shrink(ranks); !errors.Is(err, want) {
			t.Fatalf("shrink %s: %v, want %v", ranks, err, want)
		}
	}
	if err := shrink("1-4"); !strings.Contains(err.Error(), "rank 1 (node1)") {
		t.Fatalf("shrink of online rank 1: %v", err)
	}
	if err := shrink("4"); err != nil {
		t.Fatal(err)
	}
	if resp := acq.next(); str(resp["shrink"]) != "4" {
		t.Fatalf("acquire after shrink: %v", resp)
	}
	if err := h.Call(ctx, "resource.drain", 0, map[string]any{"targets": "3", "reason": "leaving"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := countEvents(t, kv, "resource-grow"); got != 1 {
		t.Fatalf("%d resource-grow events: %v", got, kv.events(t))
	}
	if got := countEvents(t, kv, `resource-shrink{"idset":"4"`); got != 1 {
		t.Fatalf("no resource-shrink event: %v", kv.events(t))
	}

	// the configuration defines ranks 0-2 again; the eventlog adds 3
	f.Close()
	reloadModule(t, h)
	st = getStatus(t, h, 0)
	all, _ = rset.Parse(st.R)
	if all.Ranks().String() != "0-3" || all.NGPUs() != 1 || st.Drain["3"].Reason != "leaving" {
		t.Fatalf("after reload: R %s (%d gpus) drain %+v", all.Ranks(), all.NGPUs(), st.Drain)
	}
	f, err = h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq = acquireStream{t, f}
	R, _ = rset.Parse(acq.next()["resources"])
	if R.Ranks().String() != "0-3" {
		t.Fatalf("acquired after reload %s", R.Ranks())
	}
	// drained rank 3 may go now, and 2 (offline) with it
	if err := shrink("2-3"); err != nil {
		t.Fatal(err)
	}
	for {
		resp := acq.next()
		if s, ok := resp["shrink"]; ok {
			if str(s) != "2-3" {
				t.Fatalf("acquire %v", resp)
			}
			break
		}
	}
	st = getStatus(t, h, 0)
	if all, _ = rset.Parse(st.R); all.Ranks().String() != "0-1" || len(st.Drain) != 0 || st.Offline != "" && st.Offline != "1" {
		t.Fatalf("after shrink: R %s drain %+v offline %s", all.Ranks(), st.Drain, st.Offline)
	}
	f.Close()
	reloadModule(t, h)
	if all, _ = rset.Parse(getStatus(t, h, 0).R); all.Ranks().String() != "0-1" {
		t.Fatalf("after a second reload: R %s", all.Ranks())
	}
}

// TestGrownRankComesUp: a rank whose broker is running and said hello
// before the inventory had it is up as soon as it is added.
func TestGrownRankComesUp(t *testing.T) {
	inst, _ := startInstance(t, 2, map[string]string{
		"resource.config":   `[{"hosts":"node0","cores":"0-1"}]`,
		"resource.noverify": "true",
	})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	waitFor(t, func() bool { return getStatus(t, h, 0).Online == "0" && len(getStatus(t, h, 0).R) > 0 })
	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	if first := acq.next(); str(first["up"]) != "0" {
		t.Fatalf("acquire %v", first)
	}
	// rank 1's hello has been heard once it is listed online... it is
	// not in the inventory, so it shows only after the grow
	if err := h.Call(ctx, "resource.grow", 0, map[string]any{"R": mustR(t,
		`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-1"}}],"nodelist":["node1"]}}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if resp := acq.next(); resp["resources"] == nil {
		t.Fatalf("acquire after grow %v", resp)
	}
	if resp := acq.next(); str(resp["up"]) != "1" {
		t.Fatalf("acquire after grow %v", resp)
	}
	waitFor(t, func() bool { st := getStatus(t, h, 0); return st.Online == "0-1" && st.Offline == "" })
}
