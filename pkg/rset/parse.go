package rset

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Parse decodes an R JSON document. It is strict: a missing or mistyped
// key, a malformed idset or hostlist, a rank listed twice, a nodelist
// whose length differs from the number of ranks or a property naming
// unknown ranks is an error. Errors are *ParseError values wrapping
// ErrInvalid.
func Parse(data []byte) (*R, error) {
	top, err := object(data, "")
	if err != nil {
		return nil, err
	}
	r := &R{}
	if err := parseVersion(top); err != nil {
		return nil, err
	}
	rawExec, ok := top["execution"]
	if !ok {
		return nil, parseErr("execution", "missing", nil)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		switch k {
		case "version", "execution":
		case "scheduling":
			if r.scheduling, err = compactJSON(v); err != nil {
				return nil, parseErr("scheduling", "invalid JSON", err)
			}
		default:
			c, err := compactJSON(v)
			if err != nil {
				return nil, parseErr(k, "invalid JSON", err)
			}
			r.extra = setRaw(r.extra, k, c)
		}
	}
	if err := r.parseExecution(rawExec); err != nil {
		return nil, err
	}
	return r, nil
}

// UnmarshalJSON decodes an R document into r (see Parse).
func (r *R) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*r = *p
	return nil
}

// ReadAll reads one or more R documents, one after the other with
// optional white space between them, until the end of rd. It fails if rd
// holds none.
func ReadAll(rd io.Reader) ([]*R, error) {
	dec := json.NewDecoder(rd)
	var out []*R
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, parseErr("", fmt.Sprintf("R object %d: invalid JSON: %v", len(out)+1, err), err)
		}
		r, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("R object %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, parseErr("", "no R object found", nil)
	}
	return out, nil
}

func parseVersion(top map[string]json.RawMessage) error {
	raw, ok := top["version"]
	if !ok {
		return parseErr("version", "missing", nil)
	}
	v, err := number(raw, "version")
	if err != nil {
		return err
	}
	if v != 1 {
		return parseErr("version", fmt.Sprintf("unsupported version %s", bytes.TrimSpace(raw)), nil)
	}
	return nil
}

// rankSpan is a range of ranks and the R_lite entry it came from.
type rankSpan struct {
	lo, hi uint
	entry  int
}

func (r *R) parseExecution(raw json.RawMessage) error {
	exec, err := object(raw, "execution")
	if err != nil {
		return err
	}
	rawLite, ok := exec["R_lite"]
	if !ok {
		return parseErr("execution.R_lite", "missing", nil)
	}
	if err := r.parseRlite(rawLite, true); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(exec)) {
		v := exec[k]
		key := "execution." + k
		switch k {
		case "R_lite":
		case "nodelist":
			if err := r.parseNodelist(v); err != nil {
				return err
			}
		case "properties":
			if err := r.parseProperties(v); err != nil {
				return err
			}
		case "starttime":
			if r.start, err = number(v, key); err != nil {
				return err
			}
		case "expiration":
			if r.expiration, err = number(v, key); err != nil {
				return err
			}
		default:
			c, err := compactJSON(v)
			if err != nil {
				return parseErr(key, "invalid JSON", err)
			}
			r.execExtra = setRaw(r.execExtra, k, c)
		}
	}
	if err := checkTimes(r.start, r.expiration); err != nil {
		return parseErr("execution", err.Error(), nil)
	}
	return nil
}

// parseRlite reads R_lite, trying the fast scanner first when fast is set
// (tests turn it off to compare both paths).
func (r *R) parseRlite(raw json.RawMessage, fast bool) error {
	const key = "execution.R_lite"
	var b builder
	var spans []rankSpan
	addSlot := func(i int, ranks idset.Set, slot int) {
		lo, _ := ranks.First()
		hi, _ := ranks.Last()
		if uint(ranks.Count()) == hi-lo+1 { // one range: skip copying Ranges
			spans = append(spans, rankSpan{lo, hi, i})
			b.add(slot, lo, hi)
			return
		}
		for _, rg := range ranks.Ranges() {
			spans = append(spans, rankSpan{rg.Lo, rg.Hi, i})
			b.add(slot, rg.Lo, rg.Hi)
		}
	}
	add := func(i int, ranks idset.Set, ch children) { addSlot(i, ranks, b.slot(ch)) }
	if entries, ok := scanLite(raw); fast && ok {
		spans = make([]rankSpan, 0, len(entries))
		// Entries often repeat the same children text: parse it once.
		slots := make(map[liteChildren]int)
		for i, e := range entries {
			lo, single := plainRank(e.rank)
			var ranks idset.Set
			if !single {
				var err error
				if ranks, err = e.parseRank(i); err != nil {
					return err
				}
			}
			slot, ok := slots[e.kids]
			if !ok {
				ch, err := e.parseChildren(i)
				if err != nil {
					return err
				}
				slot = b.slot(ch)
				slots[e.kids] = slot
			}
			if single {
				spans = append(spans, rankSpan{lo, lo, i})
				b.add(slot, lo, lo)
				continue
			}
			addSlot(i, ranks, slot)
		}
	} else {
		if !startsWith(raw, '[') {
			return parseErr(key, "not an array", nil)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			return parseErr(key, "invalid JSON", err)
		}
		for i, e := range entries {
			ranks, ch, err := parseEntry(e, entryKey(i))
			if err != nil {
				return err
			}
			add(i, ranks, ch)
		}
	}
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
	r.setGroups(b.build())
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

// parseRank checks the rank idset of an entry found by the fast scanner.
// Keys for error messages are only built on error: this runs once per
// entry.
func (e liteEntry) parseRank(i int) (idset.Set, error) {
	ranks, msg, err := parseIDs(string(e.rank))
	if msg != "" {
		return ranks, parseErr(entryKey(i)+".rank", msg, err)
	}
	if ranks.Empty() {
		return ranks, parseErr(entryKey(i)+".rank", "empty idset", nil)
	}
	return ranks, nil
}

// parseChildren checks the children of an entry found by the fast
// scanner.
func (e liteEntry) parseChildren(i int) (children, error) {
	var ch children
	var msg string
	var err error
	if e.kids.hasCore {
		if ch.cores, msg, err = parseIDs(e.kids.core); msg != "" {
			return ch, parseErr(entryKey(i)+".children.core", msg, err)
		}
	}
	if e.kids.hasGPU {
		if ch.gpus, msg, err = parseIDs(e.kids.gpu); msg != "" {
			return ch, parseErr(entryKey(i)+".children.gpu", msg, err)
		}
	}
	if ch.empty() {
		return ch, parseErr(entryKey(i)+".children", "no cores or gpus", nil)
	}
	return ch, nil
}

func parseEntry(raw json.RawMessage, key string) (idset.Set, children, error) {
	var ch children
	e, err := object(raw, key)
	if err != nil {
		return idset.Set{}, ch, err
	}
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if k != "rank" && k != "children" {
			return idset.Set{}, ch, parseErr(key, fmt.Sprintf("unknown key %q", k), nil)
		}
	}
	rawRank, ok := e["rank"]
	if !ok {
		return idset.Set{}, ch, parseErr(key+".rank", "missing", nil)
	}
	ranks, err := idsetValue(rawRank, key+".rank")
	if err != nil {
		return idset.Set{}, ch, err
	}
	if ranks.Empty() {
		return idset.Set{}, ch, parseErr(key+".rank", "empty idset", nil)
	}
	rawChildren, ok := e["children"]
	if !ok {
		return idset.Set{}, ch, parseErr(key+".children", "missing", nil)
	}
	kids, err := object(rawChildren, key+".children")
	if err != nil {
		return idset.Set{}, ch, err
	}
	for _, k := range slices.Sorted(maps.Keys(kids)) {
		v := kids[k]
		ckey := key + ".children." + k
		switch k {
		case "core":
			ch.cores, err = idsetValue(v, ckey)
		case "gpu":
			ch.gpus, err = idsetValue(v, ckey)
		default:
			err = parseErr(key+".children", fmt.Sprintf("unknown resource type %q", k), nil)
		}
		if err != nil {
			return idset.Set{}, ch, err
		}
	}
	if ch.empty() {
		return idset.Set{}, ch, parseErr(key+".children", "no cores or gpus", nil)
	}
	return ranks, ch, nil
}

func (r *R) parseNodelist(raw json.RawMessage) error {
	const key = "execution.nodelist"
	if !startsWith(raw, '[') {
		return parseErr(key, "not an array", nil)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return parseErr(key, "invalid JSON", err)
	}
	var all *hostlist.Hostlist
	for i, item := range items {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		s, err := str(item, ikey)
		if err != nil {
			return err
		}
		hl, err := hostlist.Parse(s)
		if err != nil {
			return parseErr(ikey, fmt.Sprintf("invalid hostlist %q", s), err)
		}
		if all == nil {
			all = hl
		} else {
			all.AppendList(hl)
		}
	}
	n := 0
	if all != nil {
		n = all.Len()
	}
	if n != r.nranks {
		return parseErr(key, fmt.Sprintf("%d hosts for %d ranks", n, r.nranks), nil)
	}
	if n > 0 {
		r.names = &names{hl: all, complete: true}
	}
	return nil
}

func (r *R) parseProperties(raw json.RawMessage) error {
	const key = "execution.properties"
	props, err := object(raw, key)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		v := props[name]
		pkey := key + "." + name
		if err := CheckPropertyName(name); err != nil {
			return parseErr(pkey, "invalid property name", err)
		}
		ranks, err := idsetValue(v, pkey)
		if err != nil {
			return err
		}
		if ranks.Empty() {
			return parseErr(pkey, "empty idset", nil)
		}
		if missing := ranks.Difference(r.ranks); !missing.Empty() {
			return parseErr(pkey, fmt.Sprintf("ranks %s not found", missing), nil)
		}
		if r.props == nil {
			r.props = make(map[string]idset.Set, len(props))
		}
		r.props[name] = ranks
	}
	return nil
}

// object decodes a JSON object into its raw members.
func object(raw []byte, key string) (map[string]json.RawMessage, error) {
	if !startsWith(raw, '{') {
		if key == "" {
			if !json.Valid(raw) {
				return nil, parseErr("", "invalid JSON", nil)
			}
			return nil, parseErr("", "not a JSON object", nil)
		}
		return nil, parseErr(key, "not an object", nil)
	}
	m := make(map[string]json.RawMessage)
	err := jsonwire.Object(raw, func(k, v []byte) error {
		key := string(k)
		if !utf8.ValidString(key) {
			key = string([]rune(key)) // U+FFFD per bad byte, as encoding/json
		}
		m[key] = v // a later duplicate wins, as with encoding/json
		return nil
	})
	if err != nil {
		return nil, parseErr(key, "invalid JSON", err)
	}
	return m, nil
}

func str(raw json.RawMessage, key string) (string, error) {
	if !startsWith(raw, '"') {
		return "", parseErr(key, "not a string", nil)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", parseErr(key, "invalid JSON", err)
	}
	return s, nil
}

func number(raw json.RawMessage, key string) (float64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, parseErr(key, "not a number", nil)
	}
	var f float64
	if err := json.Unmarshal(t, &f); err != nil {
		return 0, parseErr(key, fmt.Sprintf("invalid number %s", t), err)
	}
	return f, nil
}

func idsetValue(raw json.RawMessage, key string) (idset.Set, error) {
	s, err := str(raw, key)
	if err != nil {
		return idset.Set{}, err
	}
	ids, msg, err := parseIDs(s)
	if msg != "" {
		return idset.Set{}, parseErr(key, msg, err)
	}
	return ids, nil
}

// MaxID is the largest rank, core or GPU id an R may hold; like Flux,
// ids are 32-bit and the largest 32-bit value is reserved.
const MaxID = math.MaxUint32 - 1

// parseIDs parses an idset of an R. On failure msg says what is wrong
// and err is the idset error, if any.
func parseIDs(s string) (ids idset.Set, msg string, err error) {
	if ids, err = idset.Parse(s); err != nil {
		return idset.Set{}, fmt.Sprintf("invalid idset %q", s), err
	}
	if last, ok := ids.Last(); ok && last > MaxID {
		return idset.Set{}, fmt.Sprintf("id %d is larger than %d", last, uint(MaxID)), nil
	}
	return ids, "", nil
}

func startsWith(raw []byte, c byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == c
}

func compactJSON(raw []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
