package rset

import "bytes"

// A fast path for R_lite. encoding/json spends most of the time of a
// large R_lite (thousands of entries) building maps and raw messages. The
// scanner below reads only the shape every producer writes, an array of
// {"rank": "...", "children": {"core": "...", "gpu": "..."}} with plain
// ASCII strings, and gives up on anything else; the general parser then
// takes over and reports a precise error. The scanner accepts a document
// only if it is valid JSON that the general parser would accept with the
// same meaning, so the two agree on every input.

// liteEntry is one R_lite entry as written, before its idsets are parsed.
type liteEntry struct {
	rank []byte // a subslice of the document
	kids liteChildren
}

// liteChildren is the "children" object of an entry as written.
type liteChildren struct {
	core, gpu       string
	hasCore, hasGPU bool
}

type scanner struct {
	b      []byte
	i      int
	intern map[string]string // children strings, which repeat
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// lit consumes c after optional white space.
func (s *scanner) lit(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes, control or non-ASCII characters.
// raw reads a plain string and returns its text, a subslice of the
// document.
func (s *scanner) raw() ([]byte, bool) {
	if !s.lit('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// str reads a plain string, interned: children values repeat across
// thousands of entries.
func (s *scanner) str() (string, bool) {
	b, ok := s.raw()
	if !ok {
		return "", false
	}
	if v, ok := s.intern[string(b)]; ok {
		return v, true
	}
	if s.intern == nil {
		s.intern = make(map[string]string)
	}
	v := string(b)
	s.intern[v] = v
	return v, true
}

// member reads `"key":` and returns key.
func (s *scanner) member() ([]byte, bool) {
	k, ok := s.raw()
	if !ok || !s.lit(':') {
		return nil, false
	}
	return k, true
}

// scanLite parses raw as an R_lite array of the common shape; ok is false
// if raw is anything else, valid or not.
func scanLite(raw []byte) (entries []liteEntry, ok bool) {
	s := &scanner{b: raw}
	if !s.lit('[') {
		return nil, false
	}
	if s.lit(']') {
		s.ws()
		return entries, s.i == len(s.b)
	}
	// every entry has a rank: size the slice once (an R of thousands of
	// entries would otherwise be copied a dozen times as it grows)
	entries = make([]liteEntry, 0, bytes.Count(raw, []byte(`"rank"`)))
	for {
		e, ok := s.entry()
		if !ok {
			return nil, false
		}
		entries = append(entries, e)
		if s.lit(',') {
			continue
		}
		if !s.lit(']') {
			return nil, false
		}
		s.ws()
		return entries, s.i == len(s.b)
	}
}

func (s *scanner) entry() (e liteEntry, ok bool) {
	if !s.lit('{') {
		return e, false
	}
	var hasRank, hasChildren bool
	for {
		k, ok := s.member()
		if !ok {
			return e, false
		}
		switch {
		case string(k) == "rank" && !hasRank:
			if e.rank, ok = s.raw(); !ok {
				return e, false
			}
			hasRank = true
		case string(k) == "children" && !hasChildren:
			if !s.children(&e.kids) {
				return e, false
			}
			hasChildren = true
		default:
			return e, false
		}
		if s.lit(',') {
			continue
		}
		if !s.lit('}') {
			return e, false
		}
		return e, hasRank && hasChildren
	}
}

func (s *scanner) children(c *liteChildren) bool {
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return true
	}
	for {
		k, ok := s.member()
		if !ok {
			return false
		}
		switch {
		case string(k) == "core" && !c.hasCore:
			if c.core, ok = s.str(); !ok {
				return false
			}
			c.hasCore = true
		case string(k) == "gpu" && !c.hasGPU:
			if c.gpu, ok = s.str(); !ok {
				return false
			}
			c.hasGPU = true
		default:
			return false
		}
		if s.lit(',') {
			continue
		}
		return s.lit('}')
	}
}
