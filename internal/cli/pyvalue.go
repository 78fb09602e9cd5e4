package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyValue is a value as a flux Python tool holds it after json.loads of
// a command-line argument (or the argument itself, a string, when it is
// not JSON): objects keep the order of their keys, numbers stay integers
// unless written with a fraction or exponent. Its methods print it as
// json.dumps and str() do, so that output matches flux-core's byte for
// byte.
type pyValue struct {
	kind  pyKind
	b     bool
	i     *big.Int
	f     float64
	s     string
	items []pyValue // list elements, or dict values in key order
	keys  []string  // dict keys
}

type pyKind int

const (
	pyNone pyKind = iota
	pyBool
	pyInt
	pyFloat
	pyStr
	pyList
	pyDict
)

func pyStrValue(s string) pyValue    { return pyValue{kind: pyStr, s: s} }
func pyFloatValue(f float64) pyValue { return pyValue{kind: pyFloat, f: f} }

// parsePyJSON reads s as JSON the way json.loads does. ok is false when
// s is not a JSON document (the caller then keeps it as a string).
func parsePyJSON(s string) (v pyValue, ok bool) {
	if !json.Valid([]byte(s)) {
		return pyValue{}, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := readPyValue(dec)
	if err != nil {
		return pyValue{}, false
	}
	return v, true
}

func readPyValue(dec *json.Decoder) (pyValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return pyValue{}, err
	}
	switch t := tok.(type) {
	case nil:
		return pyValue{kind: pyNone}, nil
	case bool:
		return pyValue{kind: pyBool, b: t}, nil
	case string:
		return pyStrValue(t), nil
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			i, ok := new(big.Int).SetString(string(t), 10)
			if !ok {
				return pyValue{}, fmt.Errorf("bad integer %s", t)
			}
			return pyValue{kind: pyInt, i: i}, nil
		}
		// out of range parses to +-Inf, as in Python
		f, _ := strconv.ParseFloat(string(t), 64)
		return pyFloatValue(f), nil
	case json.Delim:
		switch t {
		case '[':
			v := pyValue{kind: pyList}
			for dec.More() {
				item, err := readPyValue(dec)
				if err != nil {
					return pyValue{}, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token() // ]
			return v, err
		case '{':
			v := pyValue{kind: pyDict}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return pyValue{}, err
				}
				key, _ := kt.(string)
				item, err := readPyValue(dec)
				if err != nil {
					return pyValue{}, err
				}
				v.set(key, item)
			}
			_, err := dec.Token() // }
			return v, err
		}
	}
	return pyValue{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// set stores item under key in dict v: a key given again keeps its first
// place and takes the last value, as a Python dict does.
func (v *pyValue) set(key string, item pyValue) {
	for i, k := range v.keys {
		if k == key {
			v.items[i] = item
			return
		}
	}
	v.keys = append(v.keys, key)
	v.items = append(v.items, item)
}

// JSON returns v as json.dumps writes it: ", " and ": " separators,
// non-ASCII characters escaped.
func (v pyValue) JSON() string {
	var b strings.Builder
	v.writeJSON(&b)
	return b.String()
}

func (v pyValue) writeJSON(b *strings.Builder) {
	switch v.kind {
	case pyNone:
		b.WriteString("null")
	case pyBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case pyInt:
		b.WriteString(v.i.String())
	case pyFloat:
		switch {
		case math.IsInf(v.f, 1):
			b.WriteString("Infinity")
		case math.IsInf(v.f, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(v.f):
			b.WriteString("NaN")
		default:
			b.WriteString(pyFloatStr(v.f))
		}
	case pyStr:
		writePyJSONString(b, v.s)
	case pyList, pyDict:
		v.writeItems(b, writePyJSONString, pyValue.writeJSON)
	}
}

// writeItems writes a list or dict as json.dumps and str() both lay
// them out ("[a, b]", "{k: v, ...}"), each key and item by the printer's
// own functions.
func (v pyValue) writeItems(b *strings.Builder, key func(*strings.Builder, string), item func(pyValue, *strings.Builder)) {
	open, end := byte('['), byte(']')
	if v.kind == pyDict {
		open, end = '{', '}'
	}
	b.WriteByte(open)
	for i, it := range v.items {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.kind == pyDict {
			key(b, v.keys[i])
			b.WriteString(": ")
		}
		item(it, b)
	}
	b.WriteByte(end)
}

// writePyJSONString writes s as a JSON string with only ASCII in it.
// Bytes that are not UTF-8 come out as the lone surrogates Python's
// surrogateescape turns them into.
func writePyJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(b, `\udc%02x`, s[i])
			i++
			continue
		}
		i += size
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r >= 0x7f && r < 0x10000):
				fmt.Fprintf(b, `\u%04x`, r)
			case r >= 0x10000:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// Str returns v as Python's str() does: a string as itself, anything else
// as its repr (True, None, 600.0, ['a', 1], {'k': 'v'}).
func (v pyValue) Str() string {
	if v.kind == pyStr {
		return v.s
	}
	var b strings.Builder
	v.writeRepr(&b)
	return b.String()
}

func (v pyValue) writeRepr(b *strings.Builder) {
	switch v.kind {
	case pyNone:
		b.WriteString("None")
	case pyBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case pyInt:
		b.WriteString(v.i.String())
	case pyFloat:
		b.WriteString(pyFloatStr(v.f))
	case pyStr:
		writePyRepr(b, v.s)
	case pyList, pyDict:
		v.writeItems(b, writePyRepr, pyValue.writeRepr)
	}
}

// writePyRepr writes a string literal as Python's repr() does: single
// quotes unless the string has some and no double quotes.
func writePyRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(b, `\udc%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteByte(quote)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
}
