package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/resource"
)

// schedStatusNUMA is 2 nodes x 4 cores, two domains each (cores 0-1 on
// socket 0 with mlx5_0, cores 2-3 on socket 1 with mlx5_1 and ib1); rank
// 0's cores 0-1 are allocated, rank 2 has no domain record.
const schedStatusNUMA = `{
 "all": {"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0-3"}}],"nodelist":["n[0-2]"],"starttime":0,"expiration":0},
   "scheduling":{"fluxgo.numa":[{"ranks":"0-1","domains":[{"cores":"0-1","socket":0,"nics":["mlx5_0"]},{"cores":"2-3","socket":1,"nics":["mlx5_1","ib1"]}]}]}},
 "down": {"version":1,"execution":{"R_lite":[],"starttime":0,"expiration":0}},
 "allocated": {"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}}],"nodelist":["n0"],"starttime":0,"expiration":0}}
}`

// TestResourceListNUMA: {nnuma}, {nsockets} and {nnics} count what holds
// a line's cores; the default format does not change with domains.
func TestResourceListNUMA(t *testing.T) {
	ss, err := resource.ParseSchedStatus([]byte(schedStatusNUMA))
	if err != nil {
		t.Fatal(err)
	}
	run := func(o resourceListOptions) string {
		t.Helper()
		var out bytes.Buffer
		if err := runResourceList(ss, o, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	got := run(resourceListOptions{format: "{state:>10} {nnodes:>6} {nnuma:>5} {nsockets:>8} {nnics:>5} {nodelist}", states: "free,allocated,all"})
	want := `     STATE NNODES NNUMA NSOCKETS NNICS NODELIST
      free      3     3        3     5 n[0-2]
 allocated      1     1        1     1 n0
       all      3     4        4     6 n[0-2]
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// info's one line, asked for (sockets are counted per node)
	if got := run(resourceListOptions{format: "{nnodes} Nodes, {nnuma} NUMA domains, {nsockets} Sockets", states: "all", noHeader: true}); got != "3 Nodes, 4 NUMA domains, 4 Sockets\n" {
		t.Fatalf("info line %q", got)
	}
	// the default format is the same with or without domains
	plain, err := resource.ParseSchedStatus([]byte(strings.Replace(schedStatusNUMA, `"scheduling":`, `"x-unused":`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	o := resourceListOptions{format: "default", states: "free,allocated,down"}
	if err := runResourceList(ss, o, &a); err != nil {
		t.Fatal(err)
	}
	if err := runResourceList(plain, o, &b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || strings.Contains(a.String(), "NUMA") {
		t.Fatalf("default output changed by domains:\n%s\nwithout:\n%s", a.String(), b.String())
	}
	if got := run(resourceListOptions{format: "{nnuma}", states: "all", noHeader: true}); got != "4\n" {
		t.Fatalf("{nnuma} alone: %q", got)
	}
	if got := run(resourceListOptions{format: "{nnuma}", states: "all", noHeader: true, include: "2"}); got != "0\n" {
		t.Fatalf("{nnuma} of a node without a record: %q", got)
	}
}

// TestResourceListMemory: {memory} sums the memory of the domains
// holding a line's cores, "-" where the record has none.
func TestResourceListMemory(t *testing.T) {
	withMem := strings.Replace(schedStatusNUMA, `"socket":0,"nics":["mlx5_0"]}`, `"socket":0,"nics":["mlx5_0"],"memory":68719476736}`, 1)
	withMem = strings.Replace(withMem, `"nics":["mlx5_1","ib1"]}`, `"nics":["mlx5_1","ib1"],"memory":34359738368}`, 1)
	ss, err := resource.ParseSchedStatus([]byte(withMem))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runResourceList(ss, resourceListOptions{format: "{state:>10} {memory:>6} {nodelist}", states: "free,allocated,all"}, &out); err != nil {
		t.Fatal(err)
	}
	// free: rank 0's domain 1 (32G) and rank 1's both (96G); allocated:
	// rank 0's domain 0
	want := `     STATE MEMORY NODELIST
      free   128G n[0-2]
 allocated    64G n0
       all   192G n[0-2]
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	plain, err := resource.ParseSchedStatus([]byte(schedStatusNUMA))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runResourceList(plain, resourceListOptions{format: "{memory}", states: "all", noHeader: true}, &out); err != nil || out.String() != "-\n" {
		t.Fatalf("{memory} without a record: %q %v", out.String(), err)
	}
}
