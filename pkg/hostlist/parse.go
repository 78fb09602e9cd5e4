package hostlist

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxRange is the largest number of hosts one bracketed range ("lo-hi")
// may hold, the limit Flux applies, so that a typing slip such as
// "node[1-100000000]" is an error rather than a list too long to expand.
const MaxRange = 1 << 20

// invalid returns an ErrInvalid error naming part of hostlist s.
func invalid(s, part, why string) error {
	if len(s) > 64 || s == part {
		return fmt.Errorf("%w %q: %s", ErrInvalid, part, why)
	}
	return fmt.Errorf("%w %q: %q: %s", ErrInvalid, s, part, why)
}

// Parse reads an RFC 29 hostlist: comma-separated expressions of the form
// prefix[idlist]suffix, where the prefix, the bracketed idlist and the
// suffix are each optional, e.g. "node[1-3,07-10],login1" or
// "rack2-n[01-16]-ib". An empty string, and empty expressions between
// commas, stand for no hosts.
//
// An idlist is a comma-separated list of numbers and ranges "lo-hi" in any
// order, repeats allowed. A range's zero padding is the width of its low
// number when that has leading zeros ("[07-10]" is 07, 08, 09, 10), else,
// as RFC 29 says, that of the idlist's first number: "[005,4,11-13]" is
// 005, 004, 011, 012, 013, "[00-2]" is 00, 01, 02, and "[1-3,07-10]" is
// 1, 2, 3, 07, 08, 09, 10. Parse rejects a high number whose leading zeros
// disagree with its range's padding ("[1-03]"), a number of more than 18
// digits, a range of more than MaxRange hosts or one that runs backwards.
//
// Prefix and suffix may hold any printable ASCII character other than
// space, ',', '[' and ']'. An expression has at most one bracket group, as
// RFC 29 defines it: "rack[1-2]n[1-3]" is an error. Every error wraps
// ErrInvalid and names the part of the input at fault.
func Parse(s string) (*Hostlist, error) {
	// At most one range per comma-separated element; ranges merge, so
	// give back the excess of a large estimate at the end.
	h := &Hostlist{ranges: make([]hostRange, 0, min(strings.Count(s, ",")+1, 1<<16))}
	defer func() {
		if cap(h.ranges) > 2*len(h.ranges)+8 {
			h.ranges = slices.Clone(h.ranges)
		}
	}()
	start, open := 0, -1
	for i := 0; i <= len(s); i++ {
		if i == len(s) || (s[i] == ',' && open < 0) {
			if open >= 0 {
				return nil, invalid(s, s[start:], "'[' without a closing ']'")
			}
			if err := h.parseExpr(s, s[start:i]); err != nil {
				return nil, err
			}
			start = i + 1
			continue
		}
		switch c := s[i]; {
		case c == '[':
			if open >= 0 {
				return nil, invalid(s, s[start:], "'[' inside brackets")
			}
			open = i
		case c == ']':
			if open < 0 {
				return nil, invalid(s, exprAt(s, start), "']' without an opening '['")
			}
			open = -1
		case c <= ' ' || c > '~':
			// Name the whole (UTF-8) character, not its first byte.
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, invalid(s, exprAt(s, start), fmt.Sprintf("character %q at offset %d is not allowed in a hostlist", r, i))
		}
	}
	return h, nil
}

// exprAt returns the expression of s that starts at start, for messages.
func exprAt(s string, start int) string {
	depth := 0
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth <= 0 {
				return s[start:i]
			}
		}
	}
	return s[start:]
}

// parseExpr appends the hosts of one expression of hostlist s to h.
func (h *Hostlist) parseExpr(s, expr string) error {
	if expr == "" {
		return nil
	}
	open := strings.IndexByte(expr, '[')
	if open < 0 {
		h.appendRef(decompose(expr))
		return nil
	}
	closing := open + strings.IndexByte(expr[open:], ']')
	prefix, ids, suffix := expr[:open], expr[open+1:closing], expr[closing+1:]
	if strings.IndexByte(suffix, '[') >= 0 {
		return invalid(s, expr, "more than one bracket group (RFC 29 allows one per host expression)")
	}
	if ids == "" {
		return invalid(s, expr, "empty brackets")
	}
	around := &affix{prefix, suffix}
	w := -1 // padding, set by the first number
	for len(ids) > 0 {
		tok := ids
		if k := strings.IndexByte(ids, ','); k >= 0 {
			tok, ids = ids[:k], ids[k+1:]
			if ids == "" {
				return invalid(s, expr, "empty element at the end of the brackets")
			}
		} else {
			ids = ""
		}
		lo, hi, rw, err := parseIDs(tok, &w)
		if err != "" {
			return invalid(s, expr, fmt.Sprintf("%q: %s", tok, err))
		}
		h.appendSplit(hostRange{affix: around, lo: lo, hi: hi, width: int32(effWidth(lo, rw)), numbered: true})
	}
	return nil
}

// appendSplit appends r to h. When r's prefix ends in digits ("n1[0-19]"),
// those digits and each host's number form one run of digits in the name
// (n10 ... n119), so r is rewritten as the ranges of those whole numbers
// (n[10-19,110-119]), at most one per number length, which keeps the list
// in the form the encoder and Sort handle by whole ranges.
func (h *Hostlist) appendSplit(r hostRange) {
	end := len(r.prefix)
	start := end
	for start > 0 && isDigit(r.prefix[start-1]) {
		start--
	}
	if start == end || startsWithDigit(r.suffix) {
		h.appendRange(r)
		return
	}
	lead := r.prefix[start:]
	var around *affix
	for a := r.lo; ; {
		k := max(int(r.width), ndigits(a)) // digits each number of this piece shows
		b := min(r.hi, pow10(k)-1)
		piece := r
		piece.lo, piece.hi, piece.width = a, b, int32(effWidth(a, int(r.width)))
		if total := len(lead) + k; total <= maxDigits {
			base := parseDigits(lead) * pow10(k)
			w := 0
			if lead[0] == '0' {
				w = total
			}
			around = newAffix(r.prefix[:start], r.suffix, around)
			piece = hostRange{affix: around, lo: base + a, hi: base + b, width: int32(w), numbered: true}
		}
		h.appendRange(piece)
		if b == r.hi {
			return
		}
		a = b + 1
	}
}

// pow10 returns 10^k for k <= maxDigits.
func pow10(k int) uint64 { return pow10s[k] }

// parseIDs reads "n" or "lo-hi" inside brackets and returns its zero
// padding rw. *w is the padding of the idlist's first number, or -1 before
// that number, which sets it.
func parseIDs(tok string, w *int) (lo, hi uint64, rw int, err string) {
	if tok == "" {
		return 0, 0, 0, "empty element"
	}
	a, b, isRange := strings.Cut(tok, "-")
	if lo, err = parseID(a); err != "" {
		return 0, 0, 0, err
	}
	if *w < 0 {
		*w = width(a)
	}
	rw = width(a)
	if rw == 0 {
		rw = *w
	}
	if !isRange {
		return lo, lo, rw, ""
	}
	if hi, err = parseID(b); err != "" {
		return 0, 0, 0, err
	}
	switch bw := width(b); {
	case bw != 0 && bw != rw:
		return 0, 0, 0, fmt.Sprintf("leading zeros of %q disagree with the zero padding of the range (%d digits)", b, rw)
	case hi < lo:
		return 0, 0, 0, "range ends before it starts"
	case hi-lo >= MaxRange:
		return 0, 0, 0, fmt.Sprintf("range holds more than %d hosts", MaxRange)
	}
	return lo, hi, rw, ""
}

func parseID(d string) (uint64, string) {
	switch {
	case d == "":
		return 0, "missing number"
	case !allDigits(d):
		return 0, "not a number or a range of numbers"
	case len(d) > maxDigits:
		return 0, fmt.Sprintf("number has more than %d digits", maxDigits)
	}
	return parseDigits(d), ""
}
