package resource

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// numaOf returns the domains of an R as a scheduling key of their own
// ("none" without).
func numaOf(t *testing.T, raw []byte) string {
	t.Helper()
	R, err := rset.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := R.NUMA()
	if err != nil {
		t.Fatal(err)
	}
	if groups == nil {
		return "none"
	}
	w := rset.New()
	if err := w.SetNUMA(groups); err != nil {
		t.Fatal(err)
	}
	return string(w.Scheduling())
}

// TestGrowKeepsNUMA: a grown node keeps the domains its R brings, next
// to the configured ones; a node that leaves takes its domains with it
// (a later node of the same rank does not inherit them); a module
// reload replays both.
func TestGrowKeepsNUMA(t *testing.T) {
	inst, _ := startInstance(t, 1, map[string]string{
		"resource.config":   `[{"hosts":"node[0-1]","cores":"0-3","numa":[{"cores":"0-1"},{"cores":"2-3"}]}]`,
		"resource.noverify": "true",
	})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	f, err := h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	acq := acquireStream{t, f}
	acq.next()
	grow := func(R string) {
		t.Helper()
		if err := h.Call(ctx, "resource.grow", 0, map[string]any{"R": mustR(t, R)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	status := func() string { return numaOf(t, getStatus(t, h, 0).R) }

	grow(`{"version":1,"execution":{"R_lite":[{"rank":"2","children":{"core":"0-3","gpu":"0"}}],"nodelist":["node2"]},` +
		`"scheduling":{"fluxgo.numa":[{"ranks":"2","domains":[{"cores":"0-1"},{"cores":"2-3","gpus":"0","socket":1,"nics":["ib0"]}]}]}}`)
	if got := numaOf(t, acq.next()["resources"]); got != `{"fluxgo.numa":[{"ranks":"2","domains":[{"cores":"0-1"},{"cores":"2-3","gpus":"0","socket":1,"nics":["ib0"]}]}]}` {
		t.Fatalf("acquire's grown R: %s", got)
	}
	want := `{"fluxgo.numa":[{"ranks":"0-1","domains":[{"cores":"0-1"},{"cores":"2-3"}]},` +
		`{"ranks":"2","domains":[{"cores":"0-1"},{"cores":"2-3","gpus":"0","socket":1,"nics":["ib0"]}]}]}`
	if got := status(); got != want {
		t.Fatalf("after grow %s\nwant        %s", got, want)
	}
	// a grown node with the configured layout joins their group
	grow(`{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0-3"}}],"nodelist":["node3"]},` +
		`"scheduling":{"fluxgo.numa":[{"ranks":"3","domains":[{"cores":"0-1"},{"cores":"2-3"}]}]}}`)
	acq.next()
	want = `{"fluxgo.numa":[{"ranks":"0-1,3","domains":[{"cores":"0-1"},{"cores":"2-3"}]},` +
		`{"ranks":"2","domains":[{"cores":"0-1"},{"cores":"2-3","gpus":"0","socket":1,"nics":["ib0"]}]}]}`
	if got := status(); got != want {
		t.Fatalf("after the second grow %s\nwant                   %s", got, want)
	}
	f.Close()
	reloadModule(t, h)
	if got := status(); got != want {
		t.Fatalf("replayed %s\nwant     %s", got, want)
	}

	if err := h.Call(ctx, "resource.shrink", 0, map[string]any{"ranks": "2-3"}, nil); err != nil {
		t.Fatal(err)
	}
	want = `{"fluxgo.numa":[{"ranks":"0-1","domains":[{"cores":"0-1"},{"cores":"2-3"}]}]}`
	if got := status(); got != want {
		t.Fatalf("after shrink %s\nwant         %s", got, want)
	}
	// rank 2 again, without domains: none are left over for it
	grow(`{"version":1,"execution":{"R_lite":[{"rank":"2","children":{"core":"0-7"}}],"nodelist":["node9"]}}`)
	if got := status(); got != want {
		t.Fatalf("after a grow without domains %s\nwant                          %s", got, want)
	}
	reloadModule(t, h)
	if got := status(); got != want {
		t.Fatalf("replayed after shrink and grow %s\nwant                           %s", got, want)
	}
}

// TestReloadXMLKeepsNUMA: flux resource reload --xml gives each rank the
// domains of its topology.
func TestReloadXMLKeepsNUMA(t *testing.T) {
	src := filepath.Join("..", "..", "..", "..", "shared", "conformance", "hwloc")
	corona, err := os.ReadFile(filepath.Join(src, "corona.xml"))
	if err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	tuo, err := os.ReadFile(filepath.Join(src, "tuo.SPX.xml"))
	if err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"0.xml": corona, "1.xml": corona, "2.xml": tuo} {
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	R, err := rFromXMLDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := R.NUMA()
	if err != nil || len(groups) != 2 || groups[0].Ranks.String() != "0-1" || len(groups[0].Domains) != 2 ||
		groups[1].Ranks.String() != "2" || len(groups[1].Domains) != 4 {
		t.Fatalf("domains after reload: %s (%v)", R.Scheduling(), err)
	}
	if s, ok := groups[1].Domains[3].SocketID(); !ok || s != 3 {
		t.Fatalf("tuo's last domain: socket %d %v", s, ok)
	}
}
