package rset

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// spec is a uniform set written as ranks/cores/gpus/hosts.
type spec struct{ ranks, cores, gpus, hosts string }

func (s spec) build(t testing.TB) *R { return mk(t, s.ranks, s.cores, s.gpus, s.hosts) }

func TestUnionDifferenceIntersect(t *testing.T) {
	tests := []struct {
		name                string
		a, b                spec
		union, diff, inters string
	}{
		{
			name:   "partial cores on shared rank",
			a:      spec{"0-1", "0-1", "", ""},
			b:      spec{"1-2", "2-3", "", ""},
			union:  "rank0/core[0-1] rank1/core[0-3] rank2/core[2-3]",
			diff:   "rank[0-1]/core[0-1]",
			inters: "",
		},
		{
			name:   "diff removes some cores",
			a:      spec{"0-1", "0-1", "", ""},
			b:      spec{"0-1", "0", "", ""},
			union:  "rank[0-1]/core[0-1]",
			diff:   "rank[0-1]/core1",
			inters: "rank[0-1]/core0",
		},
		{
			name:   "intersect ranks and cores",
			a:      spec{"0-3", "0-1", "", ""},
			b:      spec{"1-5", "0", "", ""},
			union:  "rank[0-3]/core[0-1] rank[4-5]/core0",
			diff:   "rank0/core[0-1] rank[1-3]/core1",
			inters: "rank[1-3]/core0",
		},
		{
			name:   "disjoint ranks",
			a:      spec{"0-3", "0-1", "", ""},
			b:      spec{"4-5", "0", "", ""},
			union:  "rank[0-3]/core[0-1] rank[4-5]/core0",
			diff:   "rank[0-3]/core[0-1]",
			inters: "",
		},
		{
			name:   "gpus",
			a:      spec{"0-3", "0-1", "0-1", ""},
			b:      spec{"2-3", "", "1", ""},
			union:  "rank[0-3]/core[0-1],gpu[0-1]",
			diff:   "rank[0-1]/core[0-1],gpu[0-1] rank[2-3]/core[0-1],gpu0",
			inters: "rank[2-3]/gpu1",
		},
		{
			name:   "whole rank removed",
			a:      spec{"0-3", "0-3", "0", ""},
			b:      spec{"1", "0-3", "0", ""},
			union:  "rank[0-3]/core[0-3],gpu0",
			diff:   "rank[0,2-3]/core[0-3],gpu0",
			inters: "rank1/core[0-3],gpu0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.a.build(t), tt.b.build(t)
			if got := a.Union(b).String(); got != tt.union {
				t.Errorf("Union = %q, want %q", got, tt.union)
			}
			if got := a.Difference(b).String(); got != tt.diff {
				t.Errorf("Difference = %q, want %q", got, tt.diff)
			}
			if got := a.Intersect(b).String(); got != tt.inters {
				t.Errorf("Intersect = %q, want %q", got, tt.inters)
			}
			// The operands are left alone.
			if a.String() != tt.a.build(t).String() || b.String() != tt.b.build(t).String() {
				t.Errorf("operands changed: %s, %s", a, b)
			}
		})
	}
}

// TestFragmented builds a set like a busy scheduler's (allocations carved
// out of a uniform set) and checks it against the short forms flux-core
// prints for the same history.
func TestFragmented(t *testing.T) {
	all := mk(t, "0-1023", "0-3", "", "")
	alloc := mk(t, "0-511", "0-1", "", "")
	alloc = alloc.Union(mk(t, "512-521", "0", "", ""))
	alloc = alloc.Union(mk(t, "522-649", "0-1", "", ""))
	if got, want := alloc.String(), "rank[0-511,522-649]/core[0-1] rank[512-521]/core0"; got != want {
		t.Errorf("alloc = %q, want %q", got, want)
	}
	avail := all.Difference(alloc)
	if got, want := avail.String(), "rank[0-511,522-649]/core[2-3] rank[512-521]/core[1-3] rank[650-1023]/core[0-3]"; got != want {
		t.Errorf("avail = %q, want %q", got, want)
	}
	if !avail.Union(alloc).Equal(all) {
		t.Errorf("avail ∪ alloc = %s, want %s", avail.Union(alloc), all)
	}
	if !avail.Intersect(alloc).Empty() {
		t.Errorf("avail ∩ alloc = %s, want empty", avail.Intersect(alloc))
	}
	if got, want := avail.NCores(), 1024*4-(640*2+10); got != want {
		t.Errorf("NCores = %d, want %d", got, want)
	}
}

func TestAppend(t *testing.T) {
	tests := []struct {
		name    string
		a, b    spec
		want    string
		wantErr error
	}{
		{"disjoint cores", spec{"0-1", "0-1", "", ""}, spec{"1-2", "2-3", "", ""}, "rank0/core[0-1] rank1/core[0-3] rank2/core[2-3]", nil},
		{"some nodes with gpus", spec{"0-1", "0-1", "", ""}, spec{"2-3", "0-1", "0-1", ""}, "rank[0-1]/core[0-1] rank[2-3]/core[0-1],gpu[0-1]", nil},
		{"shared core", spec{"0-1", "0", "", ""}, spec{"1-2", "0", "", ""}, "", ErrOverlap},
		{"shared gpu", spec{"0-1", "0-1", "0", ""}, spec{"1", "2-3", "0", ""}, "", ErrOverlap},
		{"hostname conflict", spec{"0", "0", "", "a"}, spec{"0", "1", "", "b"}, "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.build(t).Append(tt.b.build(t))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Append error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("Append = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCopyExcludeRanks(t *testing.T) {
	r := mk(t, "0-1023", "0", "", "n[0-1023]")
	c := r.CopyRanks(idset.MustParse("5-7,2000"))
	if got, want := c.String(), "rank[5-7]/core0"; got != want {
		t.Errorf("CopyRanks = %q, want %q", got, want)
	}
	if got, want := c.Nodelist().String(), "n[5-7]"; got != want {
		t.Errorf("CopyRanks nodelist = %q, want %q", got, want)
	}
	r = mk(t, "1-10", "0", "", "n[1-10]")
	x := r.ExcludeRanks(idset.MustParse("5-7"))
	if got, want := x.String(), "rank[1-4,8-10]/core0"; got != want {
		t.Errorf("ExcludeRanks = %q, want %q", got, want)
	}
	if got, want := x.Nodelist().String(), "n[1-4,8-10]"; got != want {
		t.Errorf("ExcludeRanks nodelist = %q, want %q", got, want)
	}
	if h, _ := x.Host(8); h != "n8" {
		t.Errorf("Host(8) = %q, want n8", h)
	}
}

func TestRemap(t *testing.T) {
	r := mk(t, "5,99,1000", "0", "", "a,b,c")
	if err := r.SetProperty("p", idset.MustParse("99,1000")); err != nil {
		t.Fatal(err)
	}
	m := r.Remap()
	if got, want := m.String(), "rank[0-2]/core0"; got != want {
		t.Errorf("Remap = %q, want %q", got, want)
	}
	if h, _ := m.Host(1); h != "b" {
		t.Errorf("Host(1) = %q, want b", h)
	}
	if got := m.PropertyRanks("p").String(); got != "1-2" {
		t.Errorf("property p = %q, want 1-2", got)
	}
}

func TestRerank(t *testing.T) {
	r := mk(t, "0-3", "0", "", "foo[0-3]")
	if err := r.SetProperty("login", idset.New(0)); err != nil {
		t.Fatal(err)
	}
	out, err := r.Rerank(mustHosts(t, "foo[3,2,1,0]"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Nodelist().String(), "foo[3,2,1,0]"; got != want {
		t.Errorf("nodelist = %q, want %q", got, want)
	}
	if h, _ := out.Host(0); h != "foo3" {
		t.Errorf("Host(0) = %q, want foo3", h)
	}
	if got := out.PropertyRanks("login").String(); got != "3" {
		t.Errorf("login = %q, want 3", got)
	}
	for _, tt := range []struct {
		hosts string
		want  error
	}{
		{"foo[0-2]", ErrInvalid},
		{"foo[0-4]", ErrInvalid},
		{"foo[0-2],bar", ErrNotFound},
		{"foo[0-2],foo0", ErrInvalid},
	} {
		if _, err := r.Rerank(mustHosts(t, tt.hosts)); !errors.Is(err, tt.want) {
			t.Errorf("Rerank(%s) error = %v, want %v", tt.hosts, err, tt.want)
		}
	}
	if _, err := mk(t, "0-1", "0", "", "").Rerank(mustHosts(t, "a,b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("Rerank without hostnames: error = %v, want ErrInvalid", err)
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name             string
		expected, actual spec
		extra, err       string
	}{
		{"subset of ranks", spec{"1-10", "0-3", "", ""}, spec{"1", "0-3", "", ""}, "", ""},
		{"unknown rank", spec{"1-10", "0-3", "", ""}, spec{"0", "0-3", "", ""}, "", "rank0 not in the expected set"},
		{"hostname", spec{"1", "0-3", "", "foo1"}, spec{"1", "0-3", "", "foo12"}, "", "rank1 hostname is foo12, expected foo1"},
		{"missing core", spec{"1", "0-3", "", ""}, spec{"1", "0-2", "", ""}, "", "rank1 is missing core3"},
		{"missing gpu", spec{"0-3", "0-3", "0-1", ""}, spec{"0-3", "0-3", "0", ""}, "", "rank[0-3] is missing gpu1"},
		{"extra", spec{"1", "0-3", "", ""}, spec{"1", "0-7", "1", ""}, "rank1/core[4-7],gpu1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra, err := Verify(tt.expected.build(t), tt.actual.build(t))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrMismatch) {
					t.Fatalf("Verify error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if extra.String() != tt.extra {
				t.Errorf("extra = %q, want %q", extra, tt.extra)
			}
		})
	}
}

func TestProperties(t *testing.T) {
	r := mk(t, "0-1", "0-1", "0", "foo[0-1]")
	for _, p := range []struct{ name, ranks string }{{"xx", "0"}, {"yy", "1"}, {"all", "0-1"}} {
		if err := r.SetProperty(p.name, idset.MustParse(p.ranks)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.RankProperties(1); !slices.Equal(got, []string{"all", "yy"}) {
		t.Errorf("RankProperties(1) = %q", got)
	}
	if got := r.PropertyRanks("nope"); !got.Empty() {
		t.Errorf("PropertyRanks(nope) = %s", got)
	}
	r2 := mustParse(t, string(r.Encode()))
	if !r2.Equal(r) {
		t.Errorf("properties lost in round trip: %s", r.Encode())
	}
	// Properties follow their ranks through set operations.
	if got := r.CopyRanks(idset.New(1)).Properties(); len(got) != 2 || got["yy"].String() != "1" || got["all"].String() != "1" {
		t.Errorf("CopyRanks properties = %v", got)
	}
	u := mk(t, "2", "0", "", "foo2")
	if err := u.SetProperty("xx", idset.New(2)); err != nil {
		t.Fatal(err)
	}
	if got := r.Union(u).PropertyRanks("xx").String(); got != "0,2" {
		t.Errorf("union xx = %s, want 0,2", got)
	}

	for _, tt := range []struct {
		name, ranks string
		want        error
	}{
		{"foo", "1-2", ErrNotFound},
		{"de^bug", "0", ErrInvalid},
		{"", "0", ErrInvalid},
		{"ok", "", ErrInvalid},
	} {
		if err := r.SetProperty(tt.name, idset.MustParse(tt.ranks)); !errors.Is(err, tt.want) {
			t.Errorf("SetProperty(%q, %q) error = %v, want %v", tt.name, tt.ranks, err, tt.want)
		}
	}
	err := r.SetProperty("foo", idset.MustParse("1-3"))
	if err == nil || err.Error() != "property foo: ranks 2-3 not found" {
		t.Errorf("error = %v", err)
	}
}

func TestOpaqueKeysSurviveOperations(t *testing.T) {
	orig := mustParse(t, `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"nodelist":["foo[0-3]"]},"scheduling":42}`)
	other := mk(t, "1", "0", "", "foo1")
	four := mk(t, "4", "0", "", "foo4")
	appended, err := orig.Append(four)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*R{
		"copy":      orig.CopyRanks(idset.New(0)),
		"exclude":   orig.ExcludeRanks(idset.New(0)),
		"append":    appended,
		"remap":     orig.Remap(),
		"diff":      orig.Difference(other),
		"intersect": orig.Intersect(other),
		"union":     other.Union(orig),
	} {
		if got := string(r.Scheduling()); got != "42" {
			t.Errorf("%s: scheduling = %q, want 42", name, got)
		}
	}
}

func TestExpand(t *testing.T) {
	r := mustParse(t, `{"version":1,"execution":{"R_lite":[{"rank":"0,2","children":{"core":"0-1"}},{"rank":"1","children":{"core":"0-3","gpu":"0"}}],"nodelist":["n[0-2]"]}}`)
	m := r.Expand()
	want := map[uint]struct{ host, cores, gpus string }{
		0: {"n0", "0-1", ""},
		1: {"n1", "0-3", "0"},
		2: {"n2", "0-1", ""},
	}
	if len(m) != len(want) {
		t.Fatalf("Expand has %d ranks, want %d", len(m), len(want))
	}
	for rank, w := range want {
		n := m[rank]
		if n.Rank != rank || n.Hostname != w.host || n.Cores.String() != w.cores || n.GPUs.String() != w.gpus {
			t.Errorf("rank %d = %+v, want %+v", rank, n, w)
		}
		if one, ok := r.Node(rank); !ok || one.Hostname != w.host || !one.Cores.Equal(n.Cores) {
			t.Errorf("Node(%d) = %+v, %v", rank, one, ok)
		}
	}
	if _, ok := r.Node(3); ok {
		t.Errorf("Node(3) found")
	}
	// Modifying an expanded node leaves r alone.
	n := m[0]
	n.Cores.Add(9)
	if got := r.String(); got != "rank[0,2]/core[0-1] rank1/core[0-3],gpu0" {
		t.Errorf("r changed to %s", got)
	}
	var order []uint
	for n := range r.All() {
		order = append(order, n.Rank)
	}
	if !slices.Equal(order, []uint{0, 1, 2}) {
		t.Errorf("All order = %v", order)
	}
	got, err := r.RanksOf(mustHosts(t, "n[2,0]"))
	if err != nil || got.String() != "0,2" {
		t.Errorf("RanksOf = %s, %v", got, err)
	}
	if _, err := r.RanksOf(mustHosts(t, "n3")); !errors.Is(err, ErrNotFound) {
		t.Errorf("RanksOf(n3) error = %v", err)
	}
}

func TestTimes(t *testing.T) {
	r := mk(t, "0", "0", "", "")
	if err := r.SetTimes(100, 200); err != nil {
		t.Fatal(err)
	}
	if r.StartTime() != 100 || r.Expiration() != 200 {
		t.Errorf("times = %v, %v", r.StartTime(), r.Expiration())
	}
	if err := r.SetTimes(200, 100); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetTimes(200, 100) error = %v", err)
	}
	if err := r.SetTimes(0, 100); err != nil {
		t.Errorf("SetTimes(0, 100): %v", err)
	}
}

// TestLarge checks a 16,384-node set end to end without expanding it.
func TestLarge(t *testing.T) {
	in := `{"version":1,"execution":{"R_lite":[{"rank":"0-16383","children":{"core":"0-63"}}],"starttime":0,"expiration":0,"nodelist":["node[0-16383]"]}}`
	r := mustParse(t, in)
	if r.NNodes() != 16384 || r.NCores() != 16384*64 {
		t.Errorf("counts = %d, %d", r.NNodes(), r.NCores())
	}
	if h, _ := r.Host(16383); h != "node16383" {
		t.Errorf("Host(16383) = %q", h)
	}
	if got := string(r.Encode()); got != in {
		t.Errorf("Encode =\n%s\nwant\n%s", got, in)
	}
	half := r.Difference(mk(t, "0-8191", "0-63", "", ""))
	if got := half.Nodelist().String(); got != "node[8192-16383]" {
		t.Errorf("half nodelist = %s", got)
	}
}

// TestConcurrentReaders runs the lazily built parts of a set (hostname
// list and index) from several goroutines at once (make check runs it
// with -race), each getting what one reader alone gets.
func TestConcurrentReaders(t *testing.T) {
	const text = `{"version":1,"execution":{"R_lite":[{"rank":"0-63","children":{"core":"0-3"}}],"nodelist":["n[0-63]"]}}`
	other := mk(t, "0-31", "0", "", "")
	hosts := mustHosts(t, "n[1-2]")
	type result struct {
		nodes             int
		ranks, host, diff string
		cores             string
		enc               string
	}
	read := func(r *R) (res result) {
		for range r.All() {
			res.nodes++
		}
		rk, err := r.RanksOf(hosts)
		res.ranks = fmt.Sprint(rk, err)
		h, ok := r.Host(5)
		res.host = fmt.Sprint(h, ok)
		n, found := r.Node(7)
		res.cores = fmt.Sprint(n.Cores.String(), found)
		res.diff = r.Difference(other).Nodelist().String()
		res.enc = string(r.Encode())
		return res
	}
	want := read(mustParse(t, text))
	if want.nodes != 64 || want.host != "n5true" {
		t.Fatalf("one reader: %+v", want)
	}
	r := mustParse(t, text) // its lazy parts not built yet
	got := make(chan result, 8)
	for range 8 {
		go func() { got <- read(r) }()
	}
	for range 8 {
		if g := <-got; g != want {
			t.Errorf("a concurrent reader got %+v, want %+v", g, want)
		}
	}
}
