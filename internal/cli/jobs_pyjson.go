package cli

import (
	"bytes"
	"strings"

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

// appendPyString writes s as json.dumps does with ensure_ascii (the
// one writer of Python JSON strings, writePyJSONString).
func appendPyString(b []byte, s string) []byte {
	var sb strings.Builder
	writePyJSONString(&sb, s)
	return append(b, sb.String()...)
}
