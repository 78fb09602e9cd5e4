// Package hostlist reads, writes and edits RFC 29 hostlists: ordered
// lists of host names in the compact form "node[1-3,07-10],login1" that
// Flux uses for the hosts of an instance or a job.
//
// A [Hostlist] keeps its hosts as runs of consecutive numbered names
// (prefix, first and last number, zero-padding width, suffix), so a list
// like "node[0001-16384]" is one run: counting, indexing and searching
// cost time in proportion to the number of runs, and parsing and encoding
// in proportion to the length of the text.
//
// A Hostlist is an ordered list, not a set: it keeps the order hosts were
// given in and repeated hosts. [Hostlist.Sort] and [Hostlist.Uniq] order
// it (and drop repeats) on request.
//
// [Hostlist.String] writes the shortest form this package knows for the
// list, which depends only on the sequence of host names, not on how the
// list was built: see [Hostlist.String] for the rules.
package hostlist

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Error kinds. Every error this package returns wraps one of them.
var (
	// ErrInvalid: a string is not a valid RFC 29 hostlist.
	ErrInvalid = errors.New("invalid hostlist")
	// ErrOutOfRange: an index does not name a host of the list.
	ErrOutOfRange = errors.New("index out of range")
)

// hostRange is a run of hosts prefix+pad(n,width)+suffix for n from lo to
// hi, or the single host prefix when numbered is false (lo, hi, width and
// suffix are then zero).
//
// Invariants of numbered ranges: lo <= hi < 10^maxDigits; width <=
// maxDigits; width is 0 ("natural", no padding) unless lo has fewer digits
// than width, so a non-zero width always shows as a leading zero on lo.
//
// The prefix and suffix sit behind a pointer shared by neighbouring
// ranges, which keeps a range at 32 bytes: a list of one range per host
// stays small.
type hostRange struct {
	*affix
	lo, hi   uint64
	width    int32
	numbered bool
}

// affix is the text around the number of a hostRange. It is never
// modified once a range points to it.
type affix struct {
	prefix, suffix string
}

// newAffix returns an affix for prefix and suffix, reusing near when it
// holds the same text.
func newAffix(prefix, suffix string, near *affix) *affix {
	if near != nil && near.prefix == prefix && near.suffix == suffix {
		return near
	}
	return &affix{prefix, suffix}
}

// sameAffix reports whether a and b have the same prefix and suffix.
func sameAffix(a, b *affix) bool {
	return a == b || (a.prefix == b.prefix && a.suffix == b.suffix)
}

// count returns the number of hosts in r.
func (r *hostRange) count() int {
	if !r.numbered {
		return 1
	}
	return int(r.hi-r.lo) + 1
}

// ref returns the i-th host of r as a hostRef.
func (r *hostRange) ref(i int) hostRef {
	if !r.numbered {
		return hostRef{prefix: r.prefix}
	}
	n := r.lo + uint64(i)
	return hostRef{prefix: r.prefix, suffix: r.suffix, n: n, width: effWidth(n, int(r.width)), numbered: true}
}

// host returns the i-th host name of r.
func (r *hostRange) host(i int) string { return r.ref(i).String() }

// index returns the position of host name h in r, or -1.
func (r *hostRange) index(h string) int {
	if !r.numbered {
		if h == r.prefix {
			return 0
		}
		return -1
	}
	d, ok := splitWith(h, r.prefix, r.suffix)
	if !ok {
		return -1
	}
	n := parseDigits(d)
	if n < r.lo || n > r.hi || width(d) != effWidth(n, int(r.width)) {
		return -1
	}
	return int(n - r.lo)
}

// normal reports whether the number of every host of r is the whole run
// of digits it sits in: prefix does not end and suffix does not start
// with a digit. Only normal ranges take part in compression as a block.
func (r *hostRange) normal() bool {
	return r.numbered && !endsWithDigit(r.prefix) && !startsWithDigit(r.suffix)
}

// Hostlist is an ordered list of host names. The zero value is an empty
// list ready to use. A *Hostlist is not safe for concurrent use when any
// goroutine modifies it.
type Hostlist struct {
	ranges []hostRange
	n      int
}

// New returns a list of the given host names, in order. Each argument is
// one literal host name, not a hostlist expression; empty names are
// skipped. See [Hostlist.Append] for the names that can be encoded.
func New(hosts ...string) *Hostlist {
	h := &Hostlist{}
	h.Append(hosts...)
	return h
}

// Len returns the number of hosts in h.
func (h *Hostlist) Len() int {
	if h == nil {
		return 0
	}
	return h.n
}

// Nth returns the host at index i, counting from 0. The error wraps
// ErrOutOfRange when i is negative or not less than Len.
func (h *Hostlist) Nth(i int) (string, error) {
	if i < 0 || i >= h.Len() {
		return "", fmt.Errorf("%w: host %d of a list of %d", ErrOutOfRange, i, h.Len())
	}
	for k := range h.ranges {
		r := &h.ranges[k]
		c := r.count()
		if i < c {
			return r.host(i), nil
		}
		i -= c
	}
	panic("hostlist: count out of step with ranges")
}

// Find returns the index of the first occurrence of host in h, or -1 when
// host is not in h.
func (h *Hostlist) Find(host string) int {
	if h == nil {
		return -1
	}
	base := 0
	for k := range h.ranges {
		r := &h.ranges[k]
		if i := r.index(host); i >= 0 {
			return base + i
		}
		base += r.count()
	}
	return -1
}

// All returns an iterator over the hosts of h in order.
func (h *Hostlist) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		if h == nil {
			return
		}
		for k := range h.ranges {
			r := &h.ranges[k]
			for i, c := 0, r.count(); i < c; i++ {
				if !yield(r.host(i)) {
					return
				}
			}
		}
	}
}

// Hosts returns the hosts of h in order, one string each.
func (h *Hostlist) Hosts() []string {
	out := make([]string, 0, h.Len())
	for host := range h.All() {
		out = append(out, host)
	}
	return out
}

// Append adds host names to the end of h, in order. Each argument is one
// literal host name; empty names are skipped. Append does not check the
// names: one holding a character RFC 29 reserves (',', '[', ']') or a
// space or control character makes String return text that Parse
// rejects. Use Parse or AppendList for text from outside the program.
func (h *Hostlist) Append(hosts ...string) {
	for _, name := range hosts {
		if name != "" {
			h.appendRef(decompose(name))
		}
	}
}

// AppendList adds the hosts of o to the end of h, in order. o is not
// changed; h and o may be the same list.
func (h *Hostlist) AppendList(o *Hostlist) {
	if o == nil {
		return
	}
	rs := o.ranges
	if h == o {
		rs = slices.Clone(rs)
	}
	for _, r := range rs {
		h.appendRange(r)
	}
}

// Copy returns a copy of h; changing one does not change the other.
func (h *Hostlist) Copy() *Hostlist {
	if h == nil {
		return &Hostlist{}
	}
	return &Hostlist{ranges: slices.Clone(h.ranges), n: h.n}
}

// Delete removes every occurrence of the host name host from h and
// returns how many it removed.
func (h *Hostlist) Delete(host string) int {
	if h == nil {
		return 0
	}
	removed := 0
	out := h.ranges[:0:0]
	changed := false
	for k, r := range h.ranges {
		i := r.index(host)
		if i < 0 {
			if changed {
				out = append(out, r)
			}
			continue
		}
		if !changed {
			out = append(out, h.ranges[:k]...)
			changed = true
		}
		removed++
		if i > 0 {
			left := r
			left.hi = r.lo + uint64(i) - 1
			out = append(out, left)
		}
		if i < r.count()-1 {
			right := r
			right.lo = r.lo + uint64(i) + 1
			right.width = int32(effWidth(right.lo, int(r.width)))
			out = append(out, right)
		}
	}
	if changed {
		h.ranges = out
		h.n -= removed
	}
	return removed
}

// appendRef adds one host to the end of h, joining it to the last range
// when it continues it or forms a pair of consecutive hosts with it.
func (h *Hostlist) appendRef(x hostRef) {
	h.n++
	if k := len(h.ranges); k > 0 {
		last := &h.ranges[k-1]
		switch {
		case last.numbered && x.numbered && last.prefix == x.prefix && last.suffix == x.suffix:
			if x.n == last.hi+1 && effWidth(x.n, int(last.width)) == x.width {
				last.hi++
				return
			}
			if x.normal() {
				// Same split at a whole run of digits, not the next
				// number: no other split joins them either.
				h.ranges = append(h.ranges, x.toRange(last.affix))
				return
			}
		case last.count() > 1:
			// x may continue last under last's split although it was
			// split differently on its own ("a1b[1-2]" then "a1b3").
			if last.numbered && refEqual(x, last.ref(last.count())) {
				last.hi++
				return
			}
		}
		if last.count() == 1 {
			if run, ok := pairRun(last.ref(0), x, last.affix); ok {
				*last = run
				return
			}
		}
		h.ranges = append(h.ranges, x.toRange(last.affix))
		return
	}
	h.ranges = append(h.ranges, x.toRange(nil))
}

// appendRange adds the hosts of r to the end of h, merging r into the last
// range when it continues it.
func (h *Hostlist) appendRange(r hostRange) {
	if k := len(h.ranges); k > 0 {
		last := &h.ranges[k-1]
		if last.numbered && r.numbered && sameAffix(last.affix, r.affix) {
			if r.lo == last.hi+1 && widthFits(r, int(last.width)) {
				last.hi = r.hi
				h.n += r.count()
				return
			}
			if r.normal() {
				h.ranges = append(h.ranges, r)
				h.n += r.count()
				return
			}
		}
	}
	if r.count() == 1 {
		h.appendRef(r.ref(0))
		return
	}
	h.ranges = append(h.ranges, r)
	h.n += r.count()
}

// String returns h in compact RFC 29 form, "" for an empty list. Hosts
// stay in order. Consecutive names that differ in one run of digits become
// bracketed ranges, with a suffix after the brackets when the digits do
// not end the name ("n[1-4]-ib"); each range keeps its zero padding
// ("n[1-3,08-10]"). The result depends only on the sequence of names (the
// rules are in encode.go). flux-core brackets only the digits that end a
// name, so it writes "n1-ib,n2-ib" where this writes "n[1-2]-ib"; Parse
// and flux-core read both as the same list.
func (h *Hostlist) String() string {
	if h == nil {
		return ""
	}
	return encode(h.ranges)
}

// MarshalText returns the compact form of h.
func (h *Hostlist) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText replaces the contents of h with the hostlist text holds.
func (h *Hostlist) UnmarshalText(text []byte) error {
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*h = *p
	return nil
}

func endsWithDigit(s string) bool   { return s != "" && isDigit(s[len(s)-1]) }
func startsWithDigit(s string) bool { return s != "" && isDigit(s[0]) }
func isDigit(c byte) bool           { return '0' <= c && c <= '9' }

// splitWith returns the digits d when host is prefix+d+suffix and d is a
// non-empty run of at most maxDigits decimal digits.
func splitWith(host, prefix, suffix string) (string, bool) {
	if len(host) <= len(prefix)+len(suffix) ||
		!strings.HasPrefix(host, prefix) || !strings.HasSuffix(host, suffix) {
		return "", false
	}
	d := host[len(prefix) : len(host)-len(suffix)]
	if len(d) > maxDigits || !allDigits(d) {
		return "", false
	}
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
