package rset

import (
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
