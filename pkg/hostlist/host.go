package hostlist

import "strconv"

// maxDigits is the longest run of digits read as a host number. Longer
// runs are plain text, so numbers always fit a uint64 with room to add 1.
const maxDigits = 18

// hostRef is one host name, split as prefix+pad(n,width)+suffix when
// numbered, else just prefix. width is the effective width: 0 unless n
// has fewer digits than width (the host shows leading zeros).
//
// The same name can be split in several ways ("a1b2" is "a"+1+"b2" or
// "a1b"+2); code comparing hostRefs with different splits falls back to
// comparing the names.
type hostRef struct {
	prefix, suffix string
	n              uint64
	width          int
	numbered       bool
}

// decompose splits name at its last run of digits, when that run has at
// most maxDigits digits.
func decompose(name string) hostRef {
	end := len(name)
	for end > 0 && !isDigit(name[end-1]) {
		end--
	}
	start := end
	for start > 0 && isDigit(name[start-1]) {
		start--
	}
	if start == end || end-start > maxDigits {
		return hostRef{prefix: name}
	}
	d := name[start:end]
	return hostRef{prefix: name[:start], suffix: name[end:], n: parseDigits(d), width: width(d), numbered: true}
}

// appendTo appends the name of x to b.
func (x hostRef) appendTo(b []byte) []byte {
	b = append(b, x.prefix...)
	if x.numbered {
		b = appendPadded(b, x.n, x.width)
		b = append(b, x.suffix...)
	}
	return b
}

// String returns the host name.
func (x hostRef) String() string {
	if !x.numbered {
		return x.prefix
	}
	var buf [64]byte
	return string(x.appendTo(buf[:0]))
}

// normal reports whether x's number is the whole run of digits around it.
func (x hostRef) normal() bool {
	return x.numbered && !endsWithDigit(x.prefix) && !startsWithDigit(x.suffix)
}

// toRange returns the range of the one host x, sharing near's prefix and
// suffix when they are x's.
func (x hostRef) toRange(near *affix) hostRange {
	return hostRange{affix: newAffix(x.prefix, x.suffix, near), lo: x.n, hi: x.n, width: int32(x.width), numbered: x.numbered}
}

// sameSplit reports whether a and b are both numbered with the same
// prefix and suffix.
func sameSplit(a, b hostRef) bool {
	return a.numbered && b.numbered && a.prefix == b.prefix && a.suffix == b.suffix
}

// refEqual reports whether a and b name the same host.
func refEqual(a, b hostRef) bool {
	if sameSplit(a, b) {
		return a.n == b.n && a.width == b.width
	}
	var ab, bb [64]byte
	return string(a.appendTo(ab[:0])) == string(b.appendTo(bb[:0]))
}

// pairSplit finds where hosts a and b differ. It succeeds when they
// differ only inside one run of digits (of at most maxDigits in each):
// a = p+na+s and b = p+nb+s with na and nb those whole runs, read as
// numbers with their effective widths wa and wb. When a and b are the
// same name it splits them at their last run of digits, if they have one.
func pairSplit(a, b hostRef) (p, s string, na uint64, wa int, nb uint64, wb int, ok bool) {
	if sameSplit(a, b) && a.normal() && b.normal() {
		if a.n != b.n || a.width != b.width {
			return a.prefix, a.suffix, a.n, a.width, b.n, b.width, true
		}
		if !hasDigit(a.suffix) { // a's split is at its last run of digits
			return a.prefix, a.suffix, a.n, a.width, a.n, a.width, true
		}
	}
	as, bs := a.String(), b.String()
	if as == bs {
		x := decompose(as)
		return x.prefix, x.suffix, x.n, x.width, x.n, x.width, x.numbered
	}
	p, s, da, db, ok := pairSplitStrings(as, bs)
	if !ok {
		return "", "", 0, 0, 0, 0, false
	}
	return p, s, parseDigits(da), width(da), parseDigits(db), width(db), true
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			return true
		}
	}
	return false
}

// pairSplitStrings is pairSplit on two different names: a = p+da+s,
// b = p+db+s where da and db are the whole runs of digits the names
// differ in.
func pairSplitStrings(a, b string) (p, s, da, db string, ok bool) {
	if a == b {
		return "", "", "", "", false
	}
	short := min(len(a), len(b))
	i := 0
	for i < short && a[i] == b[i] {
		i++
	}
	c := 0 // length of the common suffix, not overlapping the prefix
	for c < short-i && a[len(a)-1-c] == b[len(b)-1-c] {
		c++
	}
	for i > 0 && isDigit(a[i-1]) {
		i--
	}
	for c > 0 && isDigit(a[len(a)-c]) {
		c--
	}
	da, db = a[i:len(a)-c], b[i:len(b)-c]
	if len(da) > maxDigits || len(db) > maxDigits || !allDigits(da) || !allDigits(db) {
		return "", "", "", "", false
	}
	return a[:i], a[len(a)-c:], da, db, true
}

// pairRun returns the range of the two hosts a, b when b directly follows
// a: they differ in one run of digits, b's number is one more, and b is
// written with a's zero padding. The range shares near's prefix and
// suffix when they are the same.
func pairRun(a, b hostRef, near *affix) (hostRange, bool) {
	p, s, na, wa, nb, wb, ok := pairSplit(a, b)
	if !ok || nb != na+1 || effWidth(nb, wa) != wb {
		return hostRange{}, false
	}
	return hostRange{affix: newAffix(p, s, near), lo: na, hi: nb, width: int32(wa), numbered: true}, true
}

// matchSplit reports whether x is prefix+d+suffix with d a run of digits,
// and returns d's number and effective width.
func matchSplit(x hostRef, prefix, suffix string) (uint64, int, bool) {
	if x.numbered && x.prefix == prefix && x.suffix == suffix {
		return x.n, x.width, true
	}
	d, ok := splitWith(x.String(), prefix, suffix)
	if !ok {
		return 0, 0, false
	}
	return parseDigits(d), width(d), true
}

// widthFits reports whether every host of the numbered range r is written
// the same way with zero padding w as with its own.
func widthFits(r hostRange, w int) bool {
	return int(r.width) == w || (r.width == 0 && ndigits(r.lo) >= w)
}

// effWidth returns the effective width of n written with zero padding w:
// w when that adds leading zeros, else 0.
func effWidth(n uint64, w int) int {
	if w > 0 && ndigits(n) < w {
		return w
	}
	return 0
}

// width returns the zero-padding width digits d show: their length when
// they have a leading zero, else 0.
func width(d string) int {
	if len(d) > 1 && d[0] == '0' {
		return len(d)
	}
	return 0
}

// parseDigits reads at most maxDigits decimal digits.
func parseDigits(d string) uint64 {
	var n uint64
	for i := 0; i < len(d); i++ {
		n = n*10 + uint64(d[i]-'0')
	}
	return n
}

// pow10s holds the powers of ten that fit a uint64.
var pow10s = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// ndigits returns the number of decimal digits of n.
func ndigits(n uint64) int {
	k := 1
	for k < len(pow10s) && n >= pow10s[k] {
		k++
	}
	return k
}

// appendPadded appends n in decimal, zero padded to w digits.
func appendPadded(b []byte, n uint64, w int) []byte {
	for k := ndigits(n); k < w; k++ {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, n, 10)
}
