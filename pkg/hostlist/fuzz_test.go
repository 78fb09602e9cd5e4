package hostlist

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzParse checks that whatever Parse accepts encodes to text that parses
// back to the same hosts and encodes the same again (as the reference
// encoder does, for lists small enough to expand), and that what it
// rejects is reported as ErrInvalid.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "node[1-3,07-10],login1", "foo[0-4]-eth2", "[00-2]", "[005,4,11-13]",
		"foo1,foo1,foo1", "foo[1,1,2,1]", "n1a[1-2]", "foo", "foo01", "[1-3]",
		"rack[1-2]node[1-3]", "foo[", "foo]", "foo[[1]]", "foo[3-1]", "foo[1-03]",
		"a,,b", ",1,2,", "n1[2-3]", "n[1-2]3", "n[9-11],n[09-11]", "foo[0-1048575]",
		"host[999999999999999998-999999999999999999]", "n-[1-2]-[3]",
		"x99999999999999999999,x100000000000000000000", "a1b[1-2],a1b3,a2b1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		if heavy(h) {
			// Encoding a name-per-host list of a million hosts per input
			// would starve the fuzzer; small cases cover the same code.
			return
		}
		str := h.String()
		again, err := Parse(str)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but Parse of its String %q: %v", in, str, err)
		}
		if again.Len() != h.Len() || again.String() != str {
			t.Fatalf("round trip of %q: %q (%d hosts) became %q (%d hosts)", in, str, h.Len(), again, again.Len())
		}
		if h.Len() > 5000 {
			// Spot checks only: expanding a million hosts per input
			// would starve the fuzzer.
			for _, i := range []int{0, h.Len() / 2, h.Len() - 1} {
				a, _ := h.Nth(i)
				b, _ := again.Nth(i)
				if a != b || h.Find(a) > i {
					t.Fatalf("host %d of %q: %q vs %q", i, in, a, b)
				}
			}
			return
		}
		hosts := h.Hosts()
		checkList(t, again, hosts)
		checkOps(t, h, hosts)
	})
}

// FuzzEncode builds lists from arbitrary host names (the input split at
// spaces, with the characters RFC 29 reserves replaced) and checks the
// encoding and the list operations against plain slices.
func FuzzEncode(f *testing.F) {
	for _, seed := range []string{
		"n1 n2 n3", "n9 n10 n09 n10", "n1 n01", "a1b1 a1b2 a2b1", "host host",
		"n1-eth0 n2-eth0 n1-eth0", "0 1 2 00 01", "n999999999999999999 n1000000000000000000",
		"x1y1 x1y2 x2y2 x2y3", "n007 n8 n009 n010",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		clean := strings.Map(func(r rune) rune {
			switch {
			case r == ',' || r == '[' || r == ']':
				return 'x'
			case r == ' ' || r == '\n':
				return ' '
			case r < '!' || r > '~':
				return -1
			}
			return r
		}, in)
		hosts := strings.Fields(clean)
		h := New(hosts...)
		checkList(t, h, hosts)
		checkOps(t, h, hosts)
	})
}

// checkOps checks Sort, Uniq, Find, Delete and Copy on h, which holds
// hosts, against slices.
func checkOps(t *testing.T, h *Hostlist, hosts []string) {
	t.Helper()
	sorted := slices.Clone(hosts)
	slices.SortStableFunc(sorted, Compare)
	s := h.Copy()
	s.Sort()
	checkList(t, s, sorted)
	u := h.Copy()
	u.Uniq()
	checkList(t, u, slices.Compact(slices.Clone(sorted)))
	for i, host := range hosts {
		if got, want := h.Find(host), slices.Index(hosts, host); got != want {
			t.Fatalf("Find(%q) = %d, want %d", host, got, want)
		}
		if i > 3 {
			break
		}
	}
	if len(hosts) > 0 {
		victim := hosts[len(hosts)/2]
		d := h.Copy()
		want := slices.DeleteFunc(slices.Clone(hosts), func(s string) bool { return s == victim })
		if got := d.Delete(victim); got != len(hosts)-len(want) {
			t.Fatalf("Delete(%q) = %d, want %d", victim, got, len(hosts)-len(want))
		}
		checkList(t, d, want)
	}
	checkList(t, h, hosts) // unchanged by the operations on copies
}

// heavy reports whether h has so many hosts in ranges that cannot be
// encoded as ranges (a digit right after the brackets, "n[0-99999]1")
// that its text is large.
func heavy(h *Hostlist) bool {
	n := 0
	for _, r := range h.ranges {
		if r.count() > 1 && !r.normal() {
			n += r.count()
		}
	}
	return n > 20000
}
