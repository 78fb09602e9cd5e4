package rset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

func TestNUMARoundTrip(t *testing.T) {
	r, err := Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-47","gpu":"0-7"}}]},"scheduling":{"graph":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := r.NUMA(); g != nil || err != nil {
		t.Fatalf("NUMA of an R without it: %v %v", g, err)
	}
	groups := []NUMAGroup{{Ranks: idset.MustParse("0-3"), Domains: []NUMADomain{
		{Cores: idset.MustParse("0-23"), GPUs: idset.MustParse("0-3")},
		{Cores: idset.MustParse("24-47")},
	}}}
	if err := r.SetNUMA(groups); err != nil {
		t.Fatal(err)
	}
	want := `{"fluxgo.numa":[{"ranks":"0-3","domains":[{"cores":"0-23","gpus":"0-3"},{"cores":"24-47"}]}],"graph":null}`
	if got := string(r.Scheduling()); got != want {
		t.Fatalf("scheduling %s, want %s", got, want)
	}
	back, err := Parse(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	g, err := back.NUMA()
	if err != nil || len(g) != 1 || g[0].Ranks.String() != "0-3" || len(g[0].Domains) != 2 ||
		g[0].Domains[0].GPUs.String() != "0-3" || !g[0].Domains[1].GPUs.Empty() {
		t.Fatalf("NUMA after a round trip: %+v %v", g, err)
	}
	if got := string(SchedulingWithoutNUMA(r.Scheduling())); got != `{"graph":null}` {
		t.Fatalf("without NUMA: %s", got)
	}
	if err := r.SetNUMA(nil); err != nil || string(r.Scheduling()) != `{"graph":null}` {
		t.Fatalf("SetNUMA(nil): %s %v", r.Scheduling(), err)
	}
	if err := r.SetScheduling([]byte(`42`)); err != nil {
		t.Fatal(err)
	}
	if err := r.SetNUMA(groups); err == nil {
		t.Fatal("SetNUMA over a scheduling value that is not an object")
	}
	if string(SchedulingWithoutNUMA([]byte(`42`))) != `42` {
		t.Fatal("SchedulingWithoutNUMA changed a value that is not an object")
	}
	bad, _ := Parse([]byte(`{"version":1,"execution":{"R_lite":[]},"scheduling":{"fluxgo.numa":[{"ranks":"x"}]}}`))
	if _, err := bad.NUMA(); err == nil {
		t.Fatal("accepted a malformed domain list")
	}
}

// TestNUMASocketNICs: the socket and NIC keys round-trip, are left out
// when unknown, and a record without them reads as before.
func TestNUMASocketNICs(t *testing.T) {
	d := NUMADomain{Cores: idset.MustParse("0-3"), NICs: []string{"mlx5_0", "hsi0"}}.WithSocket(1)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"cores":"0-3","socket":1,"nics":["mlx5_0","hsi0"]}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var back NUMADomain
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if s, ok := back.SocketID(); !ok || s != 1 || len(back.NICs) != 2 || back.NICs[1] != "hsi0" {
		t.Fatalf("decoded %+v", back)
	}
	// socket 0 is a socket, not "unknown"
	b, _ = json.Marshal(NUMADomain{Cores: idset.MustParse("0")}.WithSocket(0))
	if want := `{"cores":"0","socket":0}`; string(b) != want {
		t.Fatalf("socket 0 encoded %s, want %s", b, want)
	}
	var old NUMADomain
	if err := json.Unmarshal([]byte(`{"cores":"0-1","future":true}`), &old); err != nil {
		t.Fatalf("unknown key refused: %v", err)
	}
	if _, ok := old.SocketID(); ok || old.NICs != nil {
		t.Fatalf("a record without socket or nics: %+v", old)
	}
	if err := json.Unmarshal([]byte(`{"cores":"0","socket":-1}`), &old); err == nil {
		t.Fatal("accepted socket -1")
	}
}

func TestMergeRestrictNUMA(t *testing.T) {
	two := []NUMADomain{{Cores: idset.MustParse("0-1")}, {Cores: idset.MustParse("2-3")}}
	other := []NUMADomain{{Cores: idset.MustParse("0-3"), GPUs: idset.MustParse("0")}, {Cores: idset.MustParse("4-7")}}
	a := []NUMAGroup{{Ranks: idset.MustParse("0-3"), Domains: two}}
	b := []NUMAGroup{{Ranks: idset.MustParse("3-4"), Domains: other}, {Ranks: idset.MustParse("5"), Domains: two}}
	got := MergeNUMA(a, b)
	js, _ := json.Marshal(got)
	want := `[{"ranks":"0-2,5","domains":[{"cores":"0-1"},{"cores":"2-3"}]},{"ranks":"3-4","domains":[{"cores":"0-3","gpus":"0"},{"cores":"4-7"}]}]`
	if string(js) != want {
		t.Fatalf("merged %s\nwant   %s", js, want)
	}
	js, _ = json.Marshal(RestrictNUMA(got, idset.MustParse("0,5")))
	if want := `[{"ranks":"0,5","domains":[{"cores":"0-1"},{"cores":"2-3"}]}]`; string(js) != want {
		t.Fatalf("restricted %s\nwant       %s", js, want)
	}
	if RestrictNUMA(got, idset.MustParse("9")) != nil {
		t.Fatal("restricting to no known rank left groups")
	}
}

func TestNodeNUMA(t *testing.T) {
	r, err := Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0-7","gpu":"0-3"}}]},
		"scheduling":{"fluxgo.numa":[{"ranks":"1-2","domains":[{"cores":"0-3","gpus":"0-1"},{"cores":"4-7","gpus":"2-3"}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.NodeNUMA(0); d != nil {
		t.Errorf("rank 0: %v, want none", d)
	}
	d := r.NodeNUMA(2)
	if len(d) != 2 || d[1].Cores.String() != "4-7" || d[1].GPUs.String() != "2-3" {
		t.Errorf("rank 2: %v", d)
	}
}

// TestFabricNICs: management Ethernet is left out, the fabric kept, as
// the shared topologies name them.
func TestFabricNICs(t *testing.T) {
	d := NUMADomain{NICs: []string{"hsi0", "mlx5_0", "eno1", "enP5p1s0f0", "eth0", "ibp94s0", "wlan0", "hfi1_0", "hsn0", "cxi0"}}
	got := strings.Join(d.FabricNICs(), ",")
	if want := "hsi0,mlx5_0,ibp94s0,hfi1_0,hsn0,cxi0"; got != want {
		t.Errorf("FabricNICs = %s, want %s", got, want)
	}
	if IsFabricNIC("") {
		t.Error("an empty name is a fabric NIC")
	}
}

// TestNUMAMemory: a domain's memory is carried in bytes, left out when
// unknown, and a negative or absurd value is refused.
func TestNUMAMemory(t *testing.T) {
	b, err := json.Marshal(NUMADomain{Cores: idset.MustParse("0-23"), Memory: 134734184448})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"cores":"0-23","memory":134734184448}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var back NUMADomain
	if err := json.Unmarshal(b, &back); err != nil || back.Memory != 134734184448 {
		t.Fatalf("decoded %+v (%v)", back, err)
	}
	for _, bad := range []string{`{"cores":"0","memory":-1}`, `{"cores":"0","memory":"lots"}`, `{"cores":"0","memory":2305843009213693952}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
