package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func mustParse(t testing.TB, s string) *Hostlist {
	t.Helper()
	h, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return h
}

func TestParse(t *testing.T) {
	tests := []struct {
		in    string
		hosts string // expanded, comma separated
		want  string // String()
	}{
		// RFC 29 test vectors.
		{"", "", ""},
		{"foox,fooy,fooz", "foox,fooy,fooz", "foox,fooy,fooz"},
		{"[1-3,5-6]", "1,2,3,5,6", "[1-3,5-6]"},
		{"foo[1-5]", "foo1,foo2,foo3,foo4,foo5", "foo[1-5]"},
		{"foo[0-4]-eth2", "foo0-eth2,foo1-eth2,foo2-eth2,foo3-eth2,foo4-eth2", "foo[0-4]-eth2"},
		{"foo1,foo1,foo1", "foo1,foo1,foo1", "foo[1,1,1]"},
		{"[00-02]", "00,01,02", "[00-02]"},
		{"[00-2]", "00,01,02", "[00-02]"},
		{"foo[1,1,2,1]", "foo1,foo1,foo2,foo1", "foo[1,1-2,1]"},
		{"[005,4,11-13]", "005,004,011,012,013", "[005,004,011-013]"},
		// Zero padding per range.
		{"node[1-3,07-10],login1", "node1,node2,node3,node07,node08,node09,node10,login1", "node[1-3,07-10],login1"},
		{"node[07-10]", "node07,node08,node09,node10", "node[07-10]"},
		{"node[098-101]", "node098,node099,node100,node101", "node[098-101]"},
		{"n[01,5]", "n01,n05", "n[01,05]"},
		{"n[1,05]", "n1,n05", "n[1,05]"},
		{"n[0,00]", "n0,n00", "n[0,00]"},
		// Written the way flux-core's own tests do.
		{"foo-1a-2,foo-1a-3", "foo-1a-2,foo-1a-3", "foo-1a-[2-3]"},
		{"foo1,foo2,foo3,fooi", "foo1,foo2,foo3,fooi", "foo[1-3],fooi"},
		{"foo1,fooi,foo2,foo3", "foo1,fooi,foo2,foo3", "foo1,fooi,foo[2-3]"},
		{"fooi,foo1,foo2,foo3,foo5,foo7,foo8", "fooi,foo1,foo2,foo3,foo5,foo7,foo8", "fooi,foo[1-3,5,7-8]"},
		{"1,2,3,4,5,9", "1,2,3,4,5,9", "[1-5,9]"},
		{",1,2,3,4,5,9,", "1,2,3,4,5,9", "[1-5,9]"},
		{"a,,b", "a,b", "a,b"},
		{"foo[1,3]-bar", "foo1-bar,foo3-bar", "foo[1,3]-bar"},
		{"[00-03]p", "00p,01p,02p,03p", "[00-03]p"},
		{"p[00-3]p", "p00p,p01p,p02p,p03p", "p[00-03]p"},
		{"14636", "14636", "14636"},
		{"foo[12,4,1-2]", "foo12,foo4,foo1,foo2", "foo[12,4,1-2]"},
		// Odd but valid.
		{"foo", "foo", "foo"},
		{"foo01", "foo01", "foo01"},
		{"[1-3]", "1,2,3", "[1-3]"},
		{"n1a[1-2]", "n1a1,n1a2", "n1a[1-2]"},
		{"n1[2-3]", "n12,n13", "n[12-13]"},
		{"n[1-2]3", "n13,n23", "n[13,23]"},
		{"n[9-11]", "n9,n10,n11", "n[9-11]"},
		{"n[09-11]", "n09,n10,n11", "n[09-11]"},
		{"n9,n010", "n9,n010", "n[9,010]"},
		{"n9,n-010", "n9,n-010", "n9,n-010"},
		{"rack1-n[1-2],rack2-n[1-2]", "rack1-n1,rack1-n2,rack2-n1,rack2-n2", "rack1-n[1-2],rack2-n[1-2]"},
		{"a-b_c.d:e~f[1-2]", "a-b_c.d:e~f1,a-b_c.d:e~f2", "a-b_c.d:e~f[1-2]"},
		{"foo[1-2],foo[3-4]", "foo1,foo2,foo3,foo4", "foo[1-4]"},
		{"foo[0-3],foo[0-3]", "foo0,foo1,foo2,foo3,foo0,foo1,foo2,foo3", "foo[0-3,0-3]"},
		{"host[999999999999999998-999999999999999999]", "host999999999999999998,host999999999999999999", "host[999999999999999998-999999999999999999]"},
		{"h0000000000000000000001,h0000000000000000000002", "h0000000000000000000001,h0000000000000000000002", "h0000000000000000000001,h0000000000000000000002"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h := mustParse(t, tt.in)
			hosts := h.Hosts()
			if got := strings.Join(hosts, ","); got != tt.hosts {
				t.Errorf("hosts = %q, want %q", got, tt.hosts)
			}
			if h.Len() != len(hosts) {
				t.Errorf("Len() = %d, but %d hosts", h.Len(), len(hosts))
			}
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := mustParse(t, h.String()).Hosts(); !slices.Equal(got, hosts) {
				t.Errorf("round trip: %q, want %q", got, hosts)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, part string // part: what the error must name
	}{
		{"[]", "[]"},
		{"foo[]", "foo[]"},
		{"foo[", "foo["},
		{"foo[1,3", "foo[1,3"},
		{"foo[[1,3]", "foo[[1,3]"},
		{"foo]", "foo]"},
		{"foo[x-y]", `x-y`},
		{"foo[0-1,2--5]", `2--5`},
		{"rack[1-2]node[1-3]", "rack[1-2]node[1-3]"},
		{"foo[3-1]", "3-1"},
		{"foo[1,,2]", "foo[1,,2]"},
		{"foo[1,]", "foo[1,]"},
		{"foo[,1]", "foo[,1]"},
		{"foo[-1]", "-1"},
		{"foo[1-]", "1-"},
		{"foo[+1]", "+1"},
		{"foo[1-03]", "1-03"},
		{"foo[0000000000000000001]", "0000000000000000001"},
		{"foo[0-1048576]", "0-1048576"},
		{"foo bar", "foo bar"},
		{"foo,b\tr", "b\tr"},
		{"foo\n", "foo\n"},
		{"héllo", "héllo"},
		{"a,b]", "b]"},
		{"a[1]b]", "a[1]b]"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tt.in, h)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if want := fmt.Sprintf("%q", tt.part); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
	if _, err := Parse("foo[0-1048575]"); err != nil {
		t.Errorf("a range of MaxRange hosts: %v", err)
	}
}

func TestEncodeHosts(t *testing.T) {
	tests := []struct {
		hosts string // space separated
		want  string
	}{
		{"", ""},
		{"a", "a"},
		{"a a", "a,a"},
		{"n1 n2 n3", "n[1-3]"},
		{"n3 n2 n1", "n[3,2,1]"},
		{"n1 n3 n5", "n[1,3,5]"},
		{"n1 n1", "n[1,1]"},
		{"n1-eth0 n1-eth0", "n1-eth[0,0]"},
		{"a01b a01b", "a[01,01]b"},
		{"n1 n2 n2 n3", "n[1-2,2-3]"},
		{"n9 n10", "n[9-10]"},
		{"n09 n10", "n[09-10]"},
		{"n009 n10", "n009,n10"},
		{"n009 n010", "n[009-010]"},
		{"n1 n01", "n[1,01]"},
		{"n01 n1", "n01,n1"},
		{"n01 n5", "n01,n5"},
		{"n01 n05", "n[01,05]"},
		{"n01 n100", "n[01,100]"},
		{"n1 n05", "n[1,05]"},
		{"n1-eth0 n2-eth0 n4-eth0", "n[1-2,4]-eth0"},
		{"n1-eth0 n1-eth1", "n1-eth[0-1]"},
		{"a1b1 a1b2 a2b1", "a1b[1-2],a2b1"},
		{"a1b1 a2b1 a3b1", "a[1-3]b1"},
		{"x y1 y2 z", "x,y[1-2],z"},
		{"node1 login node2", "node1,login,node2"},
		{"0 1 2", "[0-2]"},
		{"n1x n2x n3y", "n[1-2]x,n3y"},
		{"n18446744073709551615 n18446744073709551616", "n18446744073709551615,n18446744073709551616"},
		{"n999999999999999999 n1000000000000000000", "n999999999999999999,n1000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.hosts, func(t *testing.T) {
			hosts := strings.Fields(tt.hosts)
			h := New(hosts...)
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := h.Hosts(); !slices.Equal(got, hosts) && len(hosts) > 0 {
				t.Errorf("Hosts() = %q, want %q", got, hosts)
			}
			if got := refEncode(hosts); got != tt.want {
				t.Errorf("reference encoder = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppend(t *testing.T) {
	h := New()
	h.Append("")
	if h.Len() != 0 {
		t.Fatalf("Append(\"\") added a host")
	}
	h.Append("foo12")
	h.AppendList(mustParse(t, "foo[4,1-2]"))
	if got, want := h.String(), "foo[12,4,1-2]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	h.AppendList(mustParse(t, "bar[26-30]"))
	if h.Len() != 9 || h.String() != "foo[12,4,1-2],bar[26-30]" {
		t.Errorf("after AppendList: %d hosts, %q", h.Len(), h)
	}
	h.AppendList(h)
	if h.Len() != 18 || h.String() != "foo[12,4,1-2],bar[26-30],foo[12,4,1-2],bar[26-30]" {
		t.Errorf("after AppendList(self): %d hosts, %q", h.Len(), h)
	}
	// Appending continues a range built by Parse, whatever its split.
	g := mustParse(t, "a1b[1-2]")
	g.Append("a1b3", "a1b4")
	if len(g.ranges) != 1 || g.String() != "a1b[1-4]" {
		t.Errorf("continuing a1b[1-2]: %d ranges, %q", len(g.ranges), g)
	}
	var zero Hostlist
	zero.Append("n1", "n2")
	if zero.String() != "n[1-2]" {
		t.Errorf("zero Hostlist after Append: %q", zero.String())
	}
}

func TestNthFind(t *testing.T) {
	h := mustParse(t, "foo[1-2,4,5],bar")
	for i, want := range []string{"foo1", "foo2", "foo4", "foo5", "bar"} {
		if got, err := h.Nth(i); err != nil || got != want {
			t.Errorf("Nth(%d) = %q, %v; want %q", i, got, err, want)
		}
	}
	for _, i := range []int{-1, 5, 100} {
		if _, err := h.Nth(i); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Nth(%d) error = %v, want ErrOutOfRange", i, err)
		}
	}
	var empty *Hostlist
	if _, err := empty.Nth(0); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Nth(0) of nil list: %v", err)
	}

	// flux-core's hostlist_find cases.
	finds := []struct {
		list, host string
		want       int
	}{
		{"tst0", "tst", -1},
		{"tst0,tst", "tst", 1},
		{"tst,tst0", "tst", 0},
		{"tst", "tst0", -1},
		{"foo[1-5]-eth0", "foo3-eth0", 2},
		{"foo[1-5]", "foo3-eth0", -1},
		{"[0-5]", "3", 3},
		{"[0-5]i", "0", -1},
		{"i[0-5]", "i00", -1},
		{"i[00-05]", "i00", 0},
		{"i[00-05]", "i04", 4},
		{"f00[7-8]", "f007", 0},
		{"f00[7-8,10]", "f0010", 2},
		{"f0010001[07-08]", "f001000108", 1},
		{"cornp2", "corn", -1},
		{"cornp2", "corn2", -1},
		{"corn-p2", "corn2", -1},
		{"corn1-p2", "corn2", -1},
		{"n[09-11]", "n10", 1},
		{"n[9-11]", "n010", -1},
		{"n1,n2,n1", "n1", 0},
		{"", "n1", -1},
	}
	for _, tt := range finds {
		if got := mustParse(t, tt.list).Find(tt.host); got != tt.want {
			t.Errorf("Parse(%q).Find(%q) = %d, want %d", tt.list, tt.host, got, tt.want)
		}
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		list, host string
		n          int
		want       string
	}{
		{"foo[2-5]", "foo6", 0, "foo[2-5]"},
		{"foo[2-5]", "foo3", 1, "foo[2,4-5]"},
		{"foo[2-5],fooi", "fooi", 1, "foo[2-5]"},
		{"foo[2-5],fooi", "foo3", 1, "foo[2,4-5],fooi"},
		{"foo[2-4]-eth2", "foo3-eth2", 1, "foo[2,4]-eth2"},
		{"foo[0-3],foo[0-3]", "foo0", 2, "foo[1-3,1-3]"},
		{"n[08-10]", "n09", 1, "n[08,10]"},
		{"n[08-10]", "n08", 1, "n[09-10]"},
		{"n[08-10]", "n8", 0, "n[08-10]"},
		{"a", "a", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.list+"-"+tt.host, func(t *testing.T) {
			h := mustParse(t, tt.list)
			before := h.Hosts()
			if got := h.Delete(tt.host); got != tt.n {
				t.Errorf("Delete = %d, want %d", got, tt.n)
			}
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			want := slices.DeleteFunc(before, func(s string) bool { return s == tt.host })
			if got := h.Hosts(); !slices.Equal(got, want) || h.Len() != len(want) {
				t.Errorf("Hosts() = %q (Len %d), want %q", got, h.Len(), want)
			}
		})
	}
}

func TestSortUniq(t *testing.T) {
	tests := []struct {
		in, sorted, uniq string
	}{
		{"foo,f,bar,baz", "bar,baz,f,foo", "bar,baz,f,foo"},
		{"[5-6],[3-4],[1-2,0]", "[0-6]", "[0-6]"},
		{"[0-20],12,15", "[0-12,12-15,15-20]", "[0-20]"},
		{"0,1,2,3,4,5,1,5", "[0-1,1-5,5]", "[0-5]"},
		{"[0-20],45,12,15", "[0-12,12-15,15-20,45]", "[0-20,45]"},
		// flux-core sorts zero-padded numbers after unpadded ones
		// ("[0-12,12-20,45,015]"); here 015 sorts by value, after 15.
		{"[0-20],45,12,015", "[0-12,12-15,015,16-20,45]", "[0-15,015,16-20,45]"},
		{"bar1,bar2,foo1,foo,foo", "bar[1-2],foo,foo,foo1", "bar[1-2],foo,foo1"},
		{"foo[5-6],foo3,foo4", "foo[3-6]", "foo[3-6]"},
		{"foo[5-6],foo[4-7]", "foo[4-5,5-6,6-7]", "foo[4-7]"},
		{"foo[0-3],foo[0-3]", "foo[0,0-1,1-2,2-3,3]", "foo[0-3]"},
		{"foo[0-2],foo[0-2],foo[0-2]", "foo[0,0,0-1,1,1-2,2,2]", "foo[0-2]"},
		{"n10,n9,n100,n1", "n[1,9-10,100]", "n[1,9-10,100]"},
		{"n[1-2]-ib,n[1-2]-eth", "n1-eth,n1-ib,n2-eth,n2-ib", "n1-eth,n1-ib,n2-eth,n2-ib"},
		{"node[0-9],node[10-19],node[20-29]", "node[0-29]", "node[0-29]"},
		{"node[20-29],node[10-19],node[0-9]", "node[0-29]", "node[0-29]"},
		{"n[07-10],n[1-8]", "n[1-7,07,8,08-10]", "n[1-7,07,8,08-10]"},
		{"", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h := mustParse(t, tt.in)
			want := h.Hosts()
			slices.SortStableFunc(want, Compare)
			s := h.Copy()
			s.Sort()
			if got := s.String(); got != tt.sorted {
				t.Errorf("Sort: %q, want %q", got, tt.sorted)
			}
			if got := s.Hosts(); !slices.Equal(got, want) || s.Len() != len(want) {
				t.Errorf("Sort hosts: %q, want %q", got, want)
			}
			u := h.Copy()
			u.Uniq()
			if got := u.String(); got != tt.uniq {
				t.Errorf("Uniq: %q, want %q", got, tt.uniq)
			}
			want = slices.Compact(want)
			if got := u.Hosts(); !slices.Equal(got, want) || u.Len() != len(want) {
				t.Errorf("Uniq hosts: %q, want %q", got, want)
			}
			if h.String() != mustParse(t, tt.in).String() {
				t.Errorf("sorting a copy changed the original")
			}
		})
	}
}

func TestCompare(t *testing.T) {
	names := []string{"", "0", "00", "1", "01", "001", "2", "9", "10", "010", "a", "a1", "a2", "a10", "a10b",
		"a-", "ab", "b", "a01", "a1b", "a1-", "n1-eth0", "n10-eth0", "n2-eth1", "n2-eth0", "x99999999999999999999", "x100000000000000000000"}
	for _, a := range names {
		if Compare(a, a) != 0 {
			t.Errorf("Compare(%q, %q) != 0", a, a)
		}
		for _, b := range names {
			if a != b && Compare(a, b) == 0 {
				t.Errorf("Compare(%q, %q) = 0 for different names", a, b)
			}
			if Compare(a, b) != -Compare(b, a) {
				t.Errorf("Compare(%q, %q) is not antisymmetric", a, b)
			}
			for _, c := range names {
				if Compare(a, b) < 0 && Compare(b, c) < 0 && Compare(a, c) >= 0 {
					t.Errorf("Compare not transitive on %q < %q < %q", a, b, c)
				}
			}
		}
	}
	pairs := [][2]string{{"n9", "n10"}, {"n5", "n05"}, {"n05", "n6"}, {"a", "a1"}, {"n2-eth0", "n10-eth0"}, {"n1-eth0", "n1-eth1"},
		{"x99999999999999999999", "x100000000000000000000"}}
	for _, p := range pairs {
		if Compare(p[0], p[1]) >= 0 {
			t.Errorf("Compare(%q, %q) >= 0", p[0], p[1])
		}
	}
}

func TestCopyIndependent(t *testing.T) {
	h := mustParse(t, "n[1-5]")
	c := h.Copy()
	c.Delete("n3")
	c.Append("x")
	if h.String() != "n[1-5]" || c.String() != "n[1-2,4-5],x" {
		t.Errorf("h = %q, copy = %q", h, c)
	}
	var nilList *Hostlist
	if nilList.Len() != 0 || nilList.String() != "" || nilList.Find("a") != -1 || nilList.Copy().Len() != 0 {
		t.Error("nil *Hostlist does not read as empty")
	}
	if nilList.Delete("a") != 0 || len(nilList.Hosts()) != 0 {
		t.Error("nil *Hostlist does not read as empty")
	}
}

func TestAllStopsEarly(t *testing.T) {
	n := 0
	for range mustParse(t, "n[1-100]").All() {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("iterated %d hosts", n)
	}
}

func TestText(t *testing.T) {
	h := mustParse(t, "n[1-3]")
	b, err := h.MarshalText()
	if err != nil || string(b) != "n[1-3]" {
		t.Errorf("MarshalText = %q, %v", b, err)
	}
	var g Hostlist
	if err := g.UnmarshalText([]byte("a,b[1-2]")); err != nil || g.String() != "a,b[1-2]" {
		t.Errorf("UnmarshalText: %q, %v", g.String(), err)
	}
	if err := g.UnmarshalText([]byte("a[")); !errors.Is(err, ErrInvalid) {
		t.Errorf("UnmarshalText(a[) error = %v", err)
	}
}

func TestLarge(t *testing.T) {
	h := mustParse(t, "node[00001-16384]")
	if h.Len() != 16384 || len(h.ranges) != 1 {
		t.Fatalf("Len %d, %d ranges", h.Len(), len(h.ranges))
	}
	if got, _ := h.Nth(16383); got != "node16384" {
		t.Errorf("Nth(16383) = %q", got)
	}
	if got := h.Find("node09999"); got != 9998 {
		t.Errorf("Find = %d", got)
	}
	hosts := h.Hosts()
	if g := New(hosts...); g.String() != "node[00001-16384]" || len(g.ranges) != 1 {
		t.Errorf("New(16384 hosts) = %q in %d ranges", g, len(g.ranges))
	}
	// 8192 hosts with the same name, as flux-core tests.
	many := New(slices.Repeat([]string{"host"}, 8192)...)
	if many.Len() != 8192 || len(many.String()) != 8192*5-1 {
		t.Errorf("8192 x host: Len %d, String length %d", many.Len(), len(many.String()))
	}
	many.Uniq()
	if many.String() != "host" {
		t.Errorf("Uniq of 8192 x host = %q", many)
	}
}

func TestDigitsBeforeBrackets(t *testing.T) {
	tests := []struct {
		in, want string
		ranges   int
	}{
		{"n1[0-19]", "n[10-19,110-119]", 2},
		{"n1[2-3]", "n[12-13]", 1},
		{"n0[1-12]", "n[01-09,010-012]", 2},
		{"n0[01-12]", "n[001-012]", 1},
		{"n12[8-10]", "n[128-129,1210]", 2},
		{"n1[0-1048575]", "n[10-19,110-199,1100-1999,11000-19999,110000-199999,1100000-1999999,11000000-11048575]", 7},
		{"1[0-9]", "[10-19]", 1},
		{"n12345678901234567[0-11]", "n[123456789012345670-123456789012345679],n1234567890123456710,n1234567890123456711", 2},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			h := mustParse(t, tt.in)
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if len(h.ranges) != tt.ranges {
				t.Errorf("%d ranges, want %d", len(h.ranges), tt.ranges)
			}
			if h.Len() <= 5000 {
				checkList(t, h, mustParse(t, tt.want).Hosts())
			}
		})
	}
}
