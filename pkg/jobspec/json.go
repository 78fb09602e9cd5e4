package jobspec

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonParser decodes one JSON document (RFC 8259) straight into generic
// values. Unlike encoding/json it keeps integers and floating point
// numbers apart, rejects duplicate keys and invalid UTF-8, and does not go
// through reflection, which makes parsing a typical jobspec several times
// faster.
type jsonParser struct {
	data []byte
	// src is data as one string: plain strings of the document are
	// substrings of it rather than copies of their own.
	src   string
	pos   int
	depth int
	// stack is the key path of the value being parsed, for errors.
	stack []pathElem
	// members holds the members of the objects being parsed.
	members []member
}

type pathElem struct {
	key     string
	index   int
	isIndex bool
}

// decodeJSON decodes a single JSON value.
func decodeJSON(data []byte) (any, error) {
	p := &jsonParser{data: data, src: string(data), stack: make([]pathElem, 0, 8), members: make([]member, 0, 64)}
	p.space()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.data) {
		return nil, p.syntax("unexpected data after the document")
	}
	return v, nil
}

func (p *jsonParser) syntax(format string, args ...any) *Error {
	line, col := lineCol(p.data, int64(p.pos))
	return syntaxErr("json: line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

// invalid reports a well-formed value that cannot be accepted, at the
// current key path.
func (p *jsonParser) invalid(format string, args ...any) *Error {
	var q *path
	for _, e := range p.stack {
		if e.isIndex {
			q = q.at(e.index)
		} else {
			q = q.child(e.key)
		}
	}
	return q.errf(format, args...)
}

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.syntax("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.syntax("invalid character %q looking for a value", c)
	}
}

func (p *jsonParser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.syntax("invalid literal (want %s)", word)
	}
	p.pos += len(word)
	return nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.syntax("nested too deeply (more than %d levels)", maxDepth)
	}
	return nil
}

func (p *jsonParser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return make(map[string]any), nil
	}
	// Members collect on p.members (a stack shared with nested objects)
	// so the map is made at its final size, never grown.
	base := len(p.members)
	for {
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.syntax("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, pathElem{key: k})
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.syntax("expected ':' after key")
		}
		p.pos++
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.members = append(p.members, member{k, v})
		p.stack = p.stack[:len(p.stack)-1]
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.syntax("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			return p.makeMap(base)
		default:
			return nil, p.syntax("expected ',' or '}' in object")
		}
	}
}

// member is a parsed object member waiting for its map.
type member struct {
	key string
	val any
}

// makeMap turns the members collected since base into a map (popping
// them), rejecting duplicate keys.
func (p *jsonParser) makeMap(base int) (any, error) {
	ms := p.members[base:]
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		m[e.key] = e.val
	}
	if len(m) != len(ms) {
		seen := make(map[string]bool, len(ms))
		for _, e := range ms {
			if seen[e.key] {
				p.stack = append(p.stack, pathElem{key: e.key})
				return nil, p.invalid("duplicate key")
			}
			seen[e.key] = true
		}
	}
	clear(ms)
	p.members = p.members[:base]
	return m, nil
}

func (p *jsonParser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	l := make([]any, 0, 4)
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return l, nil
	}
	for {
		p.space()
		p.stack = append(p.stack, pathElem{index: len(l), isIndex: true})
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.stack = p.stack[:len(p.stack)-1]
		l = append(l, v)
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.syntax("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return l, nil
		default:
			return nil, p.syntax("expected ',' or ']' in array")
		}
	}
}

// str reads a string starting at the opening quote.
func (p *jsonParser) str() (string, error) {
	p.pos++ // '"'
	start := p.pos
	// Fast path: no escapes, all ASCII.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.src[start:p.pos]
			p.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.pos++
	}
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.syntax("control character %q in string", c)
		case c == '\\':
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.syntax("invalid UTF-8 in string")
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.syntax("unterminated string")
}

func (p *jsonParser) escape(buf []byte) ([]byte, error) {
	if p.pos+1 >= len(p.data) {
		return nil, p.syntax("unterminated string")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return nil, err
		}
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
				save := p.pos
				p.pos += 2
				lo, err := p.hex4()
				if err != nil {
					return nil, err
				}
				if r2 = utf16.DecodeRune(r, lo); r2 == utf8.RuneError {
					p.pos = save // not a pair: decode the second escape alone
				}
			}
			r = r2
		}
		return utf8.AppendRune(buf, r), nil
	}
	p.pos -= 2
	return nil, p.syntax("invalid escape \\%c in string", c)
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.syntax("invalid \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.syntax("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

func (p *jsonParser) digits() int {
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if p.digits() == 0 {
		return nil, p.syntax("invalid number")
	}
	isFloat := false
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.syntax("invalid number: digits expected after '.'")
		}
		isFloat = true
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.syntax("invalid number: digits expected in exponent")
		}
		isFloat = true
	}
	b := p.data[start:p.pos]
	if isFloat {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, p.invalid("number %s out of range", b)
		}
		return f, nil
	}
	// Accumulate negatively so that math.MinInt64 fits.
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int64
	for _, c := range b {
		d := int64(c - '0')
		if n < (math.MinInt64+d)/10 {
			return nil, p.invalid("integer %s out of range", p.data[start:p.pos])
		}
		n = n*10 - d
	}
	if !neg {
		if n == math.MinInt64 {
			return nil, p.invalid("integer %s out of range", p.data[start:p.pos])
		}
		n = -n
	}
	return n, nil
}
