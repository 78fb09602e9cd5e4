package rset

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// R_lite parsing. An R of thousands of nodes is mostly R_lite, one entry
// per rank (or run of ranks) with its children, so this is the hot part
// of Parse. The array and its objects are read with pkg/jsonwire (the
// project's one JSON scanner) without maps or copies: a member's value is
// a subslice of the document, and plain strings are decoded in place.
// Entries repeat the same children text, which is parsed once.
//
// There is one R_lite parser, for every input, the common shape and any
// other. Its checks and their order are those of a reader that decodes
// the array, then each entry in turn into a map and looks at the map's
// keys in sorted order (a later duplicate member wins): FuzzRlite checks
// it against such a reader written with encoding/json.

// parseRlite reads R_lite. The builder's ranges tell whether two entries
// share a rank; only then is R_lite read again, keeping the span of every
// entry, to name them (an R of thousands of entries does without a span
// list and its sort).
func (r *R) parseRlite(raw []byte) error {
	var p liteParser
	if err := p.parse(raw); err != nil {
		return err
	}
	if p.b.overlaps() {
		q := liteParser{collect: true}
		if err := q.parse(raw); err != nil {
			return err
		}
		if err := checkSpans(q.spans); err != nil {
			return err
		}
		return parseErr("execution.R_lite", "entries share ranks", nil) // not reached
	}
	r.setGroups(p.b.build())
	return nil
}

// checkSpans fails if two spans of R_lite share a rank, naming the later
// entry.
func checkSpans(spans []rankSpan) error {
	if len(spans) > 1 {
		slices.SortFunc(spans, func(a, b rankSpan) int { return cmp.Compare(a.lo, b.lo) })
		for i := 1; i < len(spans); i++ {
			if prev, cur := spans[i-1], spans[i]; cur.lo <= prev.hi {
				first, second := min(prev.entry, cur.entry), max(prev.entry, cur.entry)
				return parseErr(entryKey(second)+".rank",
					fmt.Sprintf("rank %d is also in %s", cur.lo, entryKey(first)), nil)
			}
		}
	}
	return nil
}

func entryKey(i int) string { return fmt.Sprintf("execution.R_lite[%d]", i) }

// plainRank reads a rank idset that is one decimal id (no leading zero,
// at most MaxID), the form of an R written one entry per rank, without
// building an idset. ok is false for anything else.
func plainRank(b []byte) (uint, bool) {
	if len(b) == 0 || len(b) > 10 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint(c-'0')
	}
	return n, n <= MaxID
}

// rankSpan is a range of ranks and the R_lite entry it came from.
type rankSpan struct {
	lo, hi uint
	entry  int
}

// liteParser reads the entries of an R_lite array.
type liteParser struct {
	b builder
	// the span of each entry, kept only when collect is set: the builder's
	// ranges suffice to tell whether entries share ranks, spans say which
	collect bool
	spans   []rankSpan
	n       int   // entries seen
	err     error // error of the first bad entry; later ones are only scanned
	// slot of children already seen, by their JSON text: entries repeat
	// it (often all of them the same, hence last)
	last     []byte
	lastSlot int
	slots    map[string]int
}

// parse reads the R_lite array raw into p.b (and p.spans).
func (p *liteParser) parse(raw []byte) error {
	const key = "execution.R_lite"
	if !startsWith(raw, '[') {
		return parseErr(key, "not an array", nil)
	}
	if err := jsonwire.Array(raw, p.entry); err != nil {
		// the whole array is checked first, as decoding it would
		return parseErr(key, "invalid JSON", err)
	}
	return p.err
}

// entry reads the entry val, the i-th. A JSON error (which the array's
// scan has already ruled out) stops the scan; an error in the entry
// itself is kept for after the scan.
func (p *liteParser) entry(val []byte) error {
	i := p.n
	p.n++
	if p.err != nil {
		return nil
	}
	if val[0] != '{' {
		p.err = parseErr(entryKey(i), "not an object", nil)
		return nil
	}
	var rank, kids []byte
	var unknown string
	var hasUnknown bool
	err := jsonwire.Object(val, func(k, v []byte) error {
		switch string(k) {
		case "rank":
			rank = v
		case "children":
			kids = v
		default:
			if u := mapKey(k); !hasUnknown || u < unknown {
				unknown, hasUnknown = u, true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if hasUnknown {
		p.err = parseErr(entryKey(i), fmt.Sprintf("unknown key %q", unknown), nil)
		return nil
	}
	p.err = p.add(i, rank, kids)
	return nil
}

// add checks the rank and children values of entry i and adds its spans.
func (p *liteParser) add(i int, rank, kids []byte) error {
	if rank == nil {
		return parseErr(entryKey(i)+".rank", "missing", nil)
	}
	if rank[0] != '"' {
		return parseErr(entryKey(i)+".rank", "not a string", nil)
	}
	rb, err := jsonwire.StringBytes(rank)
	if err != nil {
		return parseErr(entryKey(i)+".rank", "invalid JSON", err)
	}
	lo, single := plainRank(rb)
	var ranks idset.Set
	if !single {
		if ranks, err = liteIDs(string(rb), i, ".rank"); err != nil {
			return err
		}
		if ranks.Empty() {
			return parseErr(entryKey(i)+".rank", "empty idset", nil)
		}
	}
	if kids == nil {
		return parseErr(entryKey(i)+".children", "missing", nil)
	}
	slot, err := p.slot(i, kids)
	if err != nil {
		return err
	}
	if single {
		p.addRange(i, slot, lo, lo)
		return nil
	}
	first, _ := ranks.First()
	last, _ := ranks.Last()
	if uint(ranks.Count()) == last-first+1 { // one range: skip copying Ranges
		p.addRange(i, slot, first, last)
		return nil
	}
	for _, rg := range ranks.Ranges() {
		p.addRange(i, slot, rg.Lo, rg.Hi)
	}
	return nil
}

func (p *liteParser) addRange(i, slot int, lo, hi uint) {
	if p.collect {
		p.spans = append(p.spans, rankSpan{lo, hi, i})
	}
	p.b.add(slot, lo, hi)
}

// slot returns the builder slot of the children value kids of entry i,
// parsing it only if its text is new.
func (p *liteParser) slot(i int, kids []byte) (int, error) {
	if p.last != nil && bytes.Equal(kids, p.last) {
		return p.lastSlot, nil
	}
	slot, ok := p.slots[string(kids)]
	if !ok {
		ch, err := liteChildren(i, kids)
		if err != nil {
			return 0, err
		}
		slot = p.b.slot(ch)
		// the map is needed from the second text on
		if p.last != nil {
			if p.slots == nil {
				p.slots = map[string]int{string(p.last): p.lastSlot}
			}
			p.slots[string(kids)] = slot
		}
	}
	p.last, p.lastSlot = kids, slot
	return slot, nil
}

// liteChildren parses the children value raw of entry i.
func liteChildren(i int, raw []byte) (ch children, err error) {
	if raw[0] != '{' {
		return ch, parseErr(entryKey(i)+".children", "not an object", nil)
	}
	var core, gpu []byte
	var unknown string
	var hasUnknown bool
	err = jsonwire.Object(raw, func(k, v []byte) error {
		switch string(k) {
		case "core":
			core = v
		case "gpu":
			gpu = v
		default:
			if u := mapKey(k); !hasUnknown || u < unknown {
				unknown, hasUnknown = u, true
			}
		}
		return nil
	})
	if err != nil {
		return ch, parseErr(entryKey(i)+".children", "invalid JSON", err)
	}
	// the first bad key in sorted order is the one reported
	unknownErr := func() error {
		return parseErr(entryKey(i)+".children", fmt.Sprintf("unknown resource type %q", unknown), nil)
	}
	if hasUnknown && unknown < "core" {
		return ch, unknownErr()
	}
	if core != nil {
		if ch.cores, err = liteIDValue(core, i, ".children.core"); err != nil {
			return ch, err
		}
	}
	if hasUnknown && unknown < "gpu" {
		return ch, unknownErr()
	}
	if gpu != nil {
		if ch.gpus, err = liteIDValue(gpu, i, ".children.gpu"); err != nil {
			return ch, err
		}
	}
	if hasUnknown {
		return ch, unknownErr()
	}
	if ch.empty() {
		return ch, parseErr(entryKey(i)+".children", "no cores or gpus", nil)
	}
	return ch, nil
}

// liteIDValue parses the idset JSON string val at field of entry i.
func liteIDValue(val []byte, i int, field string) (idset.Set, error) {
	if val[0] != '"' {
		return idset.Set{}, parseErr(entryKey(i)+field, "not a string", nil)
	}
	s, err := jsonwire.String(val)
	if err != nil {
		return idset.Set{}, parseErr(entryKey(i)+field, "invalid JSON", err)
	}
	return liteIDs(s, i, field)
}

// liteIDs parses the idset s at field of entry i. Keys for error messages
// are only built on error: this runs once per entry.
func liteIDs(s string, i int, field string) (idset.Set, error) {
	ids, msg, err := parseIDs(s)
	if msg != "" {
		return ids, parseErr(entryKey(i)+field, msg, err)
	}
	return ids, nil
}

// mapKey returns a member name as a map of decoded members holds it:
// invalid UTF-8 becomes U+FFFD per bad byte, as with encoding/json.
func mapKey(k []byte) string {
	if utf8.Valid(k) {
		return string(k)
	}
	return string([]rune(string(k)))
}
