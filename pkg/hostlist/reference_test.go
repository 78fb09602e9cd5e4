package hostlist

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refEncode is a host-by-host implementation of the compact form, written
// straight from the rules in encode.go and working only on names. The
// encoder, which works on whole ranges, must agree with it.
func refEncode(hosts []string) string {
	type item struct {
		name   string // a single host when run is false
		run    bool
		p, s   string
		lo, hi uint64
		w      int
	}
	pad := func(n uint64, w int) string {
		d := strconv.FormatUint(n, 10)
		for len(d) < w {
			d = "0" + d
		}
		return d
	}
	// Pass 1: runs.
	var items []item
	var cur *item
	for _, h := range hosts {
		switch {
		case cur == nil:
			cur = &item{name: h}
		case !cur.run:
			p, s, da, db, ok := pairSplitStrings(cur.name, h)
			if ok && parseDigits(db) == parseDigits(da)+1 && pad(parseDigits(db), width(da)) == db {
				cur = &item{run: true, p: p, s: s, lo: parseDigits(da), hi: parseDigits(db), w: width(da)}
				continue
			}
			items = append(items, *cur)
			cur = &item{name: h}
		default:
			if h == cur.p+pad(cur.hi+1, cur.w)+cur.s {
				cur.hi++
				continue
			}
			items = append(items, *cur)
			cur = &item{name: h}
		}
	}
	if cur != nil {
		items = append(items, *cur)
	}

	// Pass 2: groups.
	var out []string
	var b strings.Builder // the open group
	open := false
	var gp, gs string
	var gw int
	var pending *string
	fits := func(d string, gw int) bool { return width(d) > 0 || len(d) >= gw }
	member := func(lo, hi uint64, w int) {
		if !strings.HasSuffix(b.String(), "[") {
			b.WriteByte(',')
		}
		b.WriteString(pad(lo, w))
		if hi != lo {
			b.WriteString("-" + pad(hi, w))
		}
	}
	closeGroup := func() {
		if open {
			out = append(out, b.String()+"]"+gs)
			b.Reset()
			open = false
		}
	}
	openGroup := func(p, s string, w int) {
		closeGroup()
		gp, gs, gw, open = p, s, w, true
		b.WriteString(p + "[")
	}
	for _, it := range items {
		if it.run {
			lo := pad(it.lo, it.w)
			switch {
			case open && it.p == gp && it.s == gs && fits(lo, gw):
				member(it.lo, it.hi, it.w)
				continue
			case pending != nil:
				if d, ok := splitWith(*pending, it.p, it.s); ok && fits(lo, width(d)) {
					openGroup(it.p, it.s, width(d))
					member(parseDigits(d), parseDigits(d), width(d))
					member(it.lo, it.hi, it.w)
					pending = nil
					continue
				}
				out = append(out, *pending)
				pending = nil
			}
			openGroup(it.p, it.s, it.w)
			member(it.lo, it.hi, it.w)
			continue
		}
		switch {
		case open:
			if d, ok := splitWith(it.name, gp, gs); ok && fits(d, gw) {
				member(parseDigits(d), parseDigits(d), width(d))
				continue
			}
			closeGroup()
		case pending != nil:
			p, s, da, db, ok := pairSplitStrings(*pending, it.name)
			if *pending == it.name {
				// The same name: split at its last run of digits.
				end := len(it.name)
				for end > 0 && !isDigit(it.name[end-1]) {
					end--
				}
				start := end
				for start > 0 && isDigit(it.name[start-1]) {
					start--
				}
				p, s, da, db = it.name[:start], it.name[end:], it.name[start:end], it.name[start:end]
				ok = start < end && end-start <= maxDigits
			}
			if ok && fits(db, width(da)) {
				openGroup(p, s, width(da))
				member(parseDigits(da), parseDigits(da), width(da))
				member(parseDigits(db), parseDigits(db), width(db))
				pending = nil
				continue
			}
			out = append(out, *pending)
		}
		name := it.name
		pending = &name
	}
	closeGroup()
	if pending != nil {
		out = append(out, *pending)
	}
	return strings.Join(out, ",")
}

// randomHosts returns n host names from a small vocabulary, so that runs,
// repeats, padding clashes and several digit runs per name all happen.
func randomHosts(r *rand.Rand, n int) []string {
	prefixes := []string{"n", "n", "node", "a1b", "x-", "", "r1-n", "n0"}
	suffixes := []string{"", "", "", "-ib", "x", "2", "-eth0"}
	var hosts []string
	num := r.IntN(20)
	for range n {
		switch r.IntN(10) {
		case 0, 1, 2, 3, 4:
			num++ // a run
		case 5:
			num = r.IntN(130)
		case 6:
			// the same number again
		default:
			num += r.IntN(3)
		}
		p := prefixes[r.IntN(len(prefixes))]
		if r.IntN(3) > 0 && len(hosts) > 0 {
			p = "" // reuse the previous split most of the time
			prev := hosts[len(hosts)-1]
			x := decompose(prev)
			p = x.prefix
			if x.numbered {
				d := strconv.Itoa(num)
				if x.width > 0 && len(d) < x.width && r.IntN(4) > 0 {
					d = strings.Repeat("0", x.width-len(d)) + d
				}
				hosts = append(hosts, p+d+x.suffix)
				continue
			}
		}
		d := strconv.Itoa(num)
		switch r.IntN(6) {
		case 0:
			d = "0" + d
		case 1:
			d = "" // no number
		}
		hosts = append(hosts, p+d+suffixes[r.IntN(len(suffixes))])
	}
	return slices.DeleteFunc(hosts, func(s string) bool { return s == "" })
}

func TestEncoderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		hosts := randomHosts(r, r.IntN(25))
		checkList(t, New(hosts...), hosts)

		// The same hosts reached through Parse of the reference text, and
		// through a list built from a mix of Parse and Append.
		ref := refEncode(hosts)
		p, err := Parse(ref)
		if err != nil {
			t.Fatalf("case %d: Parse(reference %q): %v", i, ref, err)
		}
		checkList(t, p, hosts)
		mixed := New()
		for k := 0; k < len(hosts); {
			m := 1 + r.IntN(4)
			part := hosts[k:min(k+m, len(hosts))]
			if r.IntN(2) == 0 {
				mixed.Append(part...)
			} else {
				mixed.AppendList(mustParse(t, refEncode(part)))
			}
			k += m
		}
		checkList(t, mixed, hosts)

		// Sort, Uniq, Delete and Find against slices.
		sorted := slices.Clone(hosts)
		slices.SortStableFunc(sorted, Compare)
		s := p.Copy()
		s.Sort()
		checkList(t, s, sorted)
		u := p.Copy()
		u.Uniq()
		checkList(t, u, slices.Compact(slices.Clone(sorted)))
		if len(hosts) > 0 {
			victim := hosts[r.IntN(len(hosts))]
			d := p.Copy()
			want := slices.DeleteFunc(slices.Clone(hosts), func(s string) bool { return s == victim })
			if got := d.Delete(victim); got != len(hosts)-len(want) {
				t.Fatalf("case %d: Delete(%q) = %d, want %d", i, victim, got, len(hosts)-len(want))
			}
			checkList(t, d, want)
			if got := p.Find(victim); got != slices.Index(hosts, victim) {
				t.Fatalf("case %d: Find(%q) = %d, want %d", i, victim, got, slices.Index(hosts, victim))
			}
		}
	}
}

// checkList fails unless h holds exactly hosts, encodes as the reference
// encoder does, and parses back from its encoding.
func checkList(t *testing.T, h *Hostlist, hosts []string) {
	t.Helper()
	if got := h.Hosts(); !slices.Equal(got, hosts) && !(len(got) == 0 && len(hosts) == 0) {
		t.Fatalf("hosts %q, want %q", got, hosts)
	}
	if h.Len() != len(hosts) {
		t.Fatalf("Len() = %d, want %d (%q)", h.Len(), len(hosts), hosts)
	}
	for i, want := range hosts {
		if got, err := h.Nth(i); err != nil || got != want {
			t.Fatalf("Nth(%d) = %q, %v; want %q", i, got, err, want)
		}
	}
	str := h.String()
	if ref := refEncode(hosts); str != ref {
		t.Fatalf("String() = %q, reference %q (hosts %q)", str, ref, hosts)
	}
	back, err := Parse(str)
	if err != nil {
		t.Fatalf("Parse(String() %q): %v", str, err)
	}
	if got := back.Hosts(); !slices.Equal(got, hosts) && !(len(got) == 0 && len(hosts) == 0) {
		t.Fatalf("Parse(%q) = %q, want %q", str, got, hosts)
	}
}
