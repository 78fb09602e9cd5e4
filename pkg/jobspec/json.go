package jobspec

import (
	"math"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// jsonDecoder decodes one JSON document (RFC 8259) straight into generic
// values. The document is read by a jsonwire.Reader, which checks the
// grammar, refuses invalid UTF-8 and bounds the nesting at maxDepth;
// what is decided here is what the values become. Unlike encoding/json
// it keeps integers and floating point numbers apart, rejects duplicate
// keys and out-of-range numbers, and does not go through reflection,
// which makes parsing a typical jobspec several times faster.
type jsonDecoder struct {
	r    jsonwire.Reader
	data []byte
	// stack is the key path of the value being decoded, for errors.
	stack []pathElem
	// members holds the members of the objects being decoded.
	members []member
	// bad is the first well-formed value that cannot be accepted. It is
	// reported once the whole document has been read, and only if that
	// is well-formed: a syntax error anywhere takes precedence, so that
	// an ErrInvalid error means well-formed JSON (decodeDocument then
	// does not try the document as YAML).
	bad *Error
}

type pathElem struct {
	key     string
	index   int
	isIndex bool
}

// decodeJSON decodes a single JSON value.
func decodeJSON(data []byte) (any, error) {
	// The reader works on a string copy of data: the strings of the
	// document are then substrings of it rather than copies of their own.
	d := &jsonDecoder{r: *jsonwire.NewStringReader(string(data)), data: data,
		stack: make([]pathElem, 0, 8), members: make([]member, 0, 64)}
	d.r.SetMaxDepth(maxDepth)
	d.r.SetStrictUTF8(true)
	v, err := d.value()
	if err == nil {
		err = d.r.End()
	}
	if err != nil {
		return nil, d.fail(err)
	}
	if d.bad != nil {
		return nil, d.bad
	}
	return v, nil
}

// fail turns a jsonwire syntax error into a jobspec one giving the line
// and column; the jobspec's own errors pass through.
func (d *jsonDecoder) fail(err error) error {
	if se, ok := err.(*jsonwire.SyntaxError); ok {
		line, col := lineCol(d.data, int64(se.Offset))
		return syntaxErr("json: line %d, column %d: %s", line, col, se.Msg)
	}
	return err
}

// invalid records a well-formed value that cannot be accepted, at the
// current key path, unless one was recorded already.
func (d *jsonDecoder) invalid(format string, args ...any) {
	if d.bad != nil {
		return
	}
	var q *path
	for _, e := range d.stack {
		if e.isIndex {
			q = q.at(e.index)
		} else {
			q = q.child(e.key)
		}
	}
	d.bad = q.errf(format, args...)
}

func (d *jsonDecoder) value() (any, error) {
	k, err := d.r.Peek()
	switch k {
	case jsonwire.KindObject:
		return d.object()
	case jsonwire.KindArray:
		return d.array()
	case jsonwire.KindString:
		return d.r.Text()
	case jsonwire.KindNumber:
		return d.number()
	case jsonwire.KindBool:
		return d.r.Bool()
	case jsonwire.KindNull:
		return nil, d.r.Null()
	}
	return nil, err
}

func (d *jsonDecoder) object() (any, error) {
	more, err := d.r.BeginObject()
	if err != nil {
		return nil, err
	}
	if !more {
		return make(map[string]any), nil
	}
	// Members collect on d.members (a stack shared with nested objects)
	// so the map is made at its final size, never grown.
	base := len(d.members)
	for more {
		k, err := d.r.Key()
		if err != nil {
			return nil, err
		}
		d.stack = append(d.stack, pathElem{key: k})
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		d.members = append(d.members, member{k, v})
		d.stack = d.stack[:len(d.stack)-1]
		if more, err = d.r.NextMember(); err != nil {
			return nil, err
		}
	}
	return d.makeMap(base)
}

// member is a decoded object member waiting for its map.
type member struct {
	key string
	val any
}

// makeMap turns the members collected since base into a map (popping
// them), rejecting duplicate keys.
func (d *jsonDecoder) makeMap(base int) (any, error) {
	ms := d.members[base:]
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		m[e.key] = e.val
	}
	if len(m) != len(ms) {
		seen := make(map[string]bool, len(ms))
		for _, e := range ms {
			if seen[e.key] {
				d.stack = append(d.stack, pathElem{key: e.key})
				d.invalid("duplicate key")
				d.stack = d.stack[:len(d.stack)-1]
				break
			}
			seen[e.key] = true
		}
	}
	clear(ms)
	d.members = d.members[:base]
	return m, nil
}

func (d *jsonDecoder) array() (any, error) {
	more, err := d.r.BeginArray()
	if err != nil {
		return nil, err
	}
	l := make([]any, 0, 4)
	for more {
		d.stack = append(d.stack, pathElem{index: len(l), isIndex: true})
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		d.stack = d.stack[:len(d.stack)-1]
		l = append(l, v)
		if more, err = d.r.NextElement(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// number decodes a number: an int64 unless it has a fraction or an
// exponent, else a float64.
func (d *jsonDecoder) number() (any, error) {
	raw, isFloat, err := d.r.Number()
	if err != nil {
		return nil, err
	}
	if isFloat {
		f, err := jsonwire.Float(raw)
		if err != nil || math.IsInf(f, 0) {
			d.invalid("number %s out of range", raw)
			return nil, nil
		}
		return f, nil
	}
	n, err := jsonwire.Int(raw)
	if err != nil {
		d.invalid("integer %s out of range", raw)
		return nil, nil
	}
	return n, nil
}
