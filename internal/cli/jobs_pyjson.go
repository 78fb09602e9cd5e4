package cli

import (
	"bytes"
	"fmt"
	"unicode/utf16"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// pyJSONDumps formats JSON as Python's json.dumps does: ", " and ": "
// separators, members in their order, non-ASCII text escaped
// (ensure_ascii). Malformed input is shown as it is.
func pyJSONDumps(raw []byte) string {
	b, err := appendPyJSON(nil, raw)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func appendPyJSON(b, v []byte) ([]byte, error) {
	switch jsonwire.KindOf(v) {
	case jsonwire.KindObject:
		b = append(b, '{')
		n := 0
		err := jsonwire.Object(v, func(key, val []byte) error {
			if n > 0 {
				b = append(b, ", "...)
			}
			n++
			b = appendPyString(b, string(key))
			b = append(b, ": "...)
			var err error
			b, err = appendPyJSON(b, val)
			return err
		})
		return append(b, '}'), err
	case jsonwire.KindArray:
		b = append(b, '[')
		n := 0
		err := jsonwire.Array(v, func(val []byte) error {
			if n > 0 {
				b = append(b, ", "...)
			}
			n++
			var err error
			b, err = appendPyJSON(b, val)
			return err
		})
		return append(b, ']'), err
	case jsonwire.KindString:
		s, err := jsonwire.String(v)
		return appendPyString(b, s), err
	default:
		return append(b, bytes.TrimSpace(v)...), nil
	}
}

// appendPyString writes s as json.dumps does with ensure_ascii: ASCII
// as is, the rest as \uXXXX (surrogate pairs past the BMP).
func appendPyString(b []byte, s string) []byte {
	for _, r := range string(jsonwire.AppendString(nil, s)) {
		switch {
		case r < 0x80:
			b = append(b, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b = fmt.Appendf(b, "\\u%04x\\u%04x", r1, r2)
		default:
			b = fmt.Appendf(b, "\\u%04x", r)
		}
	}
	return b
}
