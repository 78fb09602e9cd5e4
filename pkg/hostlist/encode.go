package hostlist

// The compact form of a list is defined on its sequence of host names, in
// two greedy passes, so that it does not depend on how the list was built.
//
// Runs: a host starts a run; the next host joins it when the two differ
// only in one run of digits and the second's number is one more, written
// with the first's zero padding ("n9", "n10"; "n09", "n10"; not "n009",
// "n10"). The first two hosts of a run fix its prefix, suffix and padding;
// later hosts join while they are the next host under that split.
//
// Groups: consecutive runs (and single hosts) with the same prefix and
// suffix are written as one bracket group "prefix[a-b,c,...]suffix". Each
// member is written with its own zero padding. RFC 29 gives the padding
// of the group's first number to members written without leading zeros,
// so a member without leading zeros joins only when it has at least as
// many digits as that padding ("n[01,5]" would mean n01, n05, so n01, n5
// are not grouped). A single host followed by another single host joins
// it in a group when the two differ in one run of digits, or are the same
// name with digits in it (split at its last run of digits: "n1-eth[0,0]").
// A single host left alone is written as it is.
//
// Both passes work on whole ranges where they can, so a list of a few runs
// encodes in time proportional to its text, not its host count. The tests
// check the result against a host-by-host implementation of the rules.

// encoder runs the two passes; run-level state is "pass 1", group-level
// state "pass 2".
type encoder struct {
	buf []byte

	// pass 1: nothing, one pending host, or an open run.
	state1 int
	single hostRef
	run    hostRange

	// pass 2: nothing, one pending host, or an open group.
	state2           int
	pending          hostRef
	gPrefix, gSuffix string
	gWidth           int
	items            int // top-level items written so far
}

const (
	stNone = iota
	stSingle
	stOpen
)

// encode returns the compact form of the hosts in rs.
func encode(rs []hostRange) string {
	if len(rs) == 0 {
		return ""
	}
	e := encoder{buf: make([]byte, 0, 8*len(rs)+16)}
	for i := range rs {
		r := &rs[i]
		if c := r.count(); c >= 2 && r.normal() {
			e.block(*r)
		} else {
			for k := range c {
				x := r.ref(k)
				if !x.normal() {
					// Split at the last run of digits, which most often
					// matches the split of neighbouring hosts.
					x = decompose(x.String())
				}
				e.host(x)
			}
		}
	}
	e.flush()
	return string(e.buf)
}

// host feeds one host to pass 1.
func (e *encoder) host(x hostRef) {
	switch e.state1 {
	case stNone:
		e.single, e.state1 = x, stSingle
	case stSingle:
		// Numbered hosts reaching here are split at a whole run of
		// digits, so two with the same split differ there or nowhere.
		if sameSplit(e.single, x) {
			if x.n != e.single.n+1 || x.width != effWidth(x.n, e.single.width) {
				e.emitSingle(e.single)
				e.single = x
				return
			}
		}
		if run, ok := pairRun(e.single, x, e.run.affix); ok {
			e.run, e.state1 = run, stOpen
			return
		}
		e.emitSingle(e.single)
		e.single = x
	case stOpen:
		if e.continues(x) {
			e.run.hi++
			return
		}
		e.emitRun(e.run)
		e.single, e.state1 = x, stSingle
	}
}

// continues reports whether x is the host after the open run.
func (e *encoder) continues(x hostRef) bool {
	r := &e.run
	next := r.hi + 1
	if x.numbered && x.prefix == r.prefix && x.suffix == r.suffix {
		return x.n == next && x.width == effWidth(next, int(r.width))
	}
	return refEqual(x, r.ref(r.count()))
}

// block feeds a normal range of at least two hosts to pass 1. It is
// equivalent to feeding its hosts one by one: a block that continues the
// open run joins it whole; otherwise its first hosts go one at a time
// until they have started a run of the block's own split, which then
// takes the rest whole.
func (e *encoder) block(r hostRange) {
	for {
		switch e.state1 {
		case stNone:
			e.run, e.state1 = r, stOpen
			return
		case stOpen:
			if sameAffix(r.affix, e.run.affix) &&
				r.lo == e.run.hi+1 && widthFits(r, int(e.run.width)) {
				e.run.hi = r.hi
				return
			}
		}
		e.host(r.ref(0))
		r.lo++
		r.width = int32(effWidth(r.lo, int(r.width)))
		if r.lo == r.hi {
			e.host(r.ref(0))
			return
		}
	}
}

// flush ends both passes.
func (e *encoder) flush() {
	switch e.state1 {
	case stSingle:
		e.emitSingle(e.single)
	case stOpen:
		e.emitRun(e.run)
	}
	e.state1 = stNone
	switch e.state2 {
	case stSingle:
		e.writeHost(e.pending)
	case stOpen:
		e.closeGroup()
	}
	e.state2 = stNone
}

// emitRun feeds a run of two or more hosts, with a normal split, to pass 2.
func (e *encoder) emitRun(r hostRange) {
	switch e.state2 {
	case stOpen:
		// Hosts of a run differ in the run's digits, so a group can only
		// take a run of the very same split.
		if r.prefix == e.gPrefix && r.suffix == e.gSuffix && fitsGroup(r.lo, int(r.width), e.gWidth) {
			e.writeIDs(r.lo, r.hi, int(r.width))
			return
		}
		e.closeGroup()
	case stSingle:
		if n, w, ok := matchSplit(e.pending, r.prefix, r.suffix); ok && fitsGroup(r.lo, int(r.width), w) {
			e.openGroup(r.prefix, r.suffix, w)
			e.writeIDs(n, n, w)
			e.writeIDs(r.lo, r.hi, int(r.width))
			e.state2 = stOpen
			return
		}
		e.writeHost(e.pending)
	}
	e.openGroup(r.prefix, r.suffix, int(r.width))
	e.writeIDs(r.lo, r.hi, int(r.width))
	e.state2 = stOpen
}

// emitSingle feeds a host that is not part of a run to pass 2.
func (e *encoder) emitSingle(x hostRef) {
	switch e.state2 {
	case stNone:
		e.pending, e.state2 = x, stSingle
	case stOpen:
		if n, w, ok := matchSplit(x, e.gPrefix, e.gSuffix); ok && fitsGroup(n, w, e.gWidth) {
			e.writeIDs(n, n, w)
			return
		}
		e.closeGroup()
		e.pending, e.state2 = x, stSingle
	case stSingle:
		if p, s, na, wa, nb, wb, ok := pairSplit(e.pending, x); ok && fitsGroup(nb, wb, wa) {
			e.openGroup(p, s, wa)
			e.writeIDs(na, na, wa)
			e.writeIDs(nb, nb, wb)
			e.state2 = stOpen
			return
		}
		e.writeHost(e.pending)
		e.pending = x
	}
}

func (e *encoder) separate() {
	if e.items > 0 {
		e.buf = append(e.buf, ',')
	}
	e.items++
}

func (e *encoder) writeHost(x hostRef) {
	e.separate()
	e.buf = x.appendTo(e.buf)
}

func (e *encoder) openGroup(prefix, suffix string, w int) {
	e.separate()
	e.buf = append(e.buf, prefix...)
	e.buf = append(e.buf, '[')
	e.gPrefix, e.gSuffix, e.gWidth = prefix, suffix, w
}

// writeIDs adds lo-hi (or lo) with zero padding w to the open group.
func (e *encoder) writeIDs(lo, hi uint64, w int) {
	if c := e.buf[len(e.buf)-1]; c != '[' {
		e.buf = append(e.buf, ',')
	}
	e.buf = appendPadded(e.buf, lo, w)
	if hi != lo {
		e.buf = append(e.buf, '-')
		e.buf = appendPadded(e.buf, hi, w)
	}
}

// fitsGroup reports whether a member starting at lo with effective
// padding w reads back correctly in a group whose first number has
// padding gw: its own leading zeros set its padding, and without them it
// takes gw, which must then change nothing.
func fitsGroup(lo uint64, w, gw int) bool {
	return w > 0 || ndigits(lo) >= gw
}

func (e *encoder) closeGroup() {
	e.buf = append(e.buf, ']')
	e.buf = append(e.buf, e.gSuffix...)
	e.state2 = stNone
}
