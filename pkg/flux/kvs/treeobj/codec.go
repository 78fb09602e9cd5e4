package treeobj

import (
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// maxDepth bounds dir nesting in a decoded object, so a hostile payload
// cannot exhaust the stack.
const maxDepth = 256

// Encode returns the canonical encoding of o: compact JSON with object
// keys sorted, as flux-core writes tree objects. The blobref of a stored
// object is the hash of exactly these bytes.
func (o *Object) Encode() []byte { return o.AppendEncode(make([]byte, 0, o.encodedSize())) }

// encodedSize estimates the length of o's encoding (exact unless names
// or strings need escapes), so Encode allocates once.
func (o *Object) encodedSize() int {
	const frame = len(`{"data":,"type":"symlink","ver":1}`)
	n := frame
	switch o.Type {
	case Val:
		n += len(o.Data) + 2
	case Valref, Dirref:
		n += 2
		for _, r := range o.Refs {
			n += len(r) + 3
		}
	case Dir:
		n += 2
		for _, e := range o.ents {
			n += len(e.Name) + 4 + e.Obj.encodedSize()
		}
	case Symlink:
		n += len(o.Namespace) + len(o.Target) + 32
	}
	return n
}

// AppendEncode appends the canonical encoding of o to dst.
func (o *Object) AppendEncode(dst []byte) []byte {
	dst = append(dst, `{"data":`...)
	switch o.Type {
	case Val:
		dst = append(dst, '"')
		dst = append(dst, o.Data...) // base64 needs no escaping
		dst = append(dst, '"')
	case Valref, Dirref:
		dst = append(dst, '[')
		for i, r := range o.Refs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"') // blobrefs need no escaping
			dst = append(dst, r...)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	case Dir:
		dst = append(dst, '{')
		for i, e := range o.ents {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonwire.AppendPlainString(dst, e.Name)
			dst = append(dst, ':')
			dst = e.Obj.AppendEncode(dst)
		}
		dst = append(dst, '}')
	case Symlink:
		dst = append(dst, '{')
		if o.Namespace != "" {
			dst = append(dst, `"namespace":`...)
			dst = jsonwire.AppendPlainString(dst, o.Namespace)
			dst = append(dst, ',')
		}
		dst = append(dst, `"target":`...)
		dst = jsonwire.AppendPlainString(dst, o.Target)
		dst = append(dst, '}')
	default:
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"type":"`...)
	dst = append(dst, o.Type.String()...)
	return append(dst, `","ver":1}`...)
}

// MarshalJSON encodes o canonically ("null" for a nil object).
func (o *Object) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	return o.Encode(), nil
}

// UnmarshalJSON decodes an RFC 11 object strictly.
func (o *Object) UnmarshalJSON(b []byte) error {
	d, err := Decode(b)
	if err != nil {
		return err
	}
	*o = *d
	return nil
}

// Decode parses one RFC 11 tree object. It is strict: "ver" must be 1,
// "type" one of val, valref, dir, dirref, symlink, "data" of the shape the
// type requires, blobrefs well formed, val data valid base64; the only
// other member allowed is the optional "size".
func Decode(b []byte) (*Object, error) {
	d := decoder{b: b}
	d.ws()
	o, err := d.object(0)
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, d.errf("trailing data after the object")
	}
	return o, nil
}

// DecodeNullable is Decode, except that JSON null yields a nil object (an
// unlink in a kvs.commit operation).
func DecodeNullable(b []byte) (*Object, error) {
	d := decoder{b: b}
	d.ws()
	if d.lit("null") {
		d.ws()
		if d.i != len(d.b) {
			return nil, d.errf("trailing data after null")
		}
		return nil, nil
	}
	return Decode(b)
}

// DecodePrefix decodes the tree object, or JSON null (a nil object), at
// the start of b (after optional white space) and returns it with the
// number of bytes of b it took. It lets a caller parse a payload that
// embeds tree objects without scanning them twice.
func DecodePrefix(b []byte) (*Object, int, error) {
	d := decoder{b: b}
	d.ws()
	if d.lit("null") {
		return nil, d.i, nil
	}
	o, err := d.object(0)
	if err != nil {
		return nil, 0, err
	}
	return o, d.i, nil
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) errf(format string, args ...any) error {
	return formatErr("offset %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

func (d *decoder) expect(c byte) error {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return nil
	}
	if d.i >= len(d.b) {
		return d.errf("unexpected end of input, want %q", c)
	}
	return d.errf("unexpected %q, want %q", d.b[d.i], c)
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// str parses a JSON string.
func (d *decoder) str() (string, error) {
	if err := d.expect('"'); err != nil {
		return "", err
	}
	start := d.i
	escaped, high := false, false
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw := d.b[start:d.i]
			d.i++
			if escaped {
				var s string
				if err := json.Unmarshal(d.b[start-1:d.i], &s); err != nil {
					return "", d.errf("bad string: %v", err)
				}
				return s, nil
			}
			if high && !utf8.Valid(raw) {
				return "", d.errf("string is not valid UTF-8")
			}
			return string(raw), nil
		case c == '\\':
			escaped = true
			d.i += 2
			continue
		case c < 0x20:
			return "", d.errf("control character in string")
		case c >= 0x80:
			high = true
		}
		d.i++
	}
	return "", d.errf("unterminated string")
}

// data is a parsed "data" member before the type is known (keys are
// sorted, so "data" usually comes first).
type data struct {
	kind    byte // 's' string, 'a' array, 'o' object
	s       string
	arr     []string
	objs    []DirEntry
	strs    map[string]string
	present bool
}

func (d *decoder) object(depth int) (*Object, error) {
	if depth > maxDepth {
		return nil, d.errf("directories nested deeper than %d", maxDepth)
	}
	if err := d.expect('{'); err != nil {
		return nil, err
	}
	var (
		typ               string
		haveVer, haveType bool
		dat               data
	)
	if d.peek() == '}' {
		return nil, d.errf("empty object")
	}
	for {
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		if err := d.expect(':'); err != nil {
			return nil, err
		}
		d.ws()
		switch key {
		case "ver":
			if haveVer {
				return nil, d.errf("duplicate \"ver\"")
			}
			if !d.lit("1") || isDigitAt(d.b, d.i) || d.peekNumberTail() {
				return nil, d.errf("\"ver\" must be 1")
			}
			haveVer = true
		case "type":
			if haveType {
				return nil, d.errf("duplicate \"type\"")
			}
			if typ, err = d.str(); err != nil {
				return nil, err
			}
			haveType = true
		case "data":
			if dat.present {
				return nil, d.errf("duplicate \"data\"")
			}
			if err := d.data(&dat, depth); err != nil {
				return nil, err
			}
		case "size":
			if err := d.skipUint(); err != nil {
				return nil, err
			}
		default:
			return nil, d.errf("unknown member %q", key)
		}
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == ',' {
			d.i++
			continue
		}
		if err := d.expect('}'); err != nil {
			return nil, err
		}
		break
	}
	if !haveVer {
		return nil, d.errf("missing \"ver\"")
	}
	if !haveType {
		return nil, d.errf("missing \"type\"")
	}
	if !dat.present {
		return nil, d.errf("missing \"data\"")
	}
	return build(typ, &dat, d)
}

func (d *decoder) peekNumberTail() bool {
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return true
		}
	}
	return false
}

func isDigitAt(b []byte, i int) bool { return i < len(b) && b[i] >= '0' && b[i] <= '9' }

func (d *decoder) skipUint() error {
	start := d.i
	for isDigitAt(d.b, d.i) {
		d.i++
	}
	if d.i == start || d.peekNumberTail() || (d.i-start > 1 && d.b[start] == '0') {
		return d.errf("\"size\" must be a non-negative integer")
	}
	return nil
}

func (d *decoder) data(dat *data, depth int) error {
	dat.present = true
	switch d.peek() {
	case '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		dat.kind, dat.s = 's', s
	case '[':
		d.i++
		dat.kind = 'a'
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			s, err := d.str()
			if err != nil {
				return err
			}
			dat.arr = append(dat.arr, s)
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			return d.expect(']')
		}
	case '{':
		d.i++
		dat.kind = 'o'
		if d.peek() == '}' {
			d.i++
			return nil
		}
		for {
			key, err := d.str()
			if err != nil {
				return err
			}
			if err := d.expect(':'); err != nil {
				return err
			}
			switch d.peek() {
			case '"':
				s, err := d.str()
				if err != nil {
					return err
				}
				if dat.strs == nil {
					dat.strs = map[string]string{}
				}
				if _, dup := dat.strs[key]; dup {
					return d.errf("duplicate key %q", key)
				}
				dat.strs[key] = s
			case '{':
				o, err := d.object(depth + 1)
				if err != nil {
					return err
				}
				dat.objs = append(dat.objs, DirEntry{Name: key, Obj: o})
			default:
				return d.errf("value of %q must be an object or string", key)
			}
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			return d.expect('}')
		}
	default:
		return d.errf("\"data\" must be a string, array or object")
	}
	return nil
}

func build(typ string, dat *data, d *decoder) (*Object, error) {
	switch typ {
	case "val":
		if dat.kind != 's' {
			return nil, d.errf("val data must be a base64 string")
		}
		if err := checkBase64(dat.s); err != nil {
			return nil, err
		}
		return &Object{Type: Val, Data: dat.s}, nil
	case "valref", "dirref":
		if dat.kind != 'a' {
			return nil, d.errf("%s data must be an array of blobrefs", typ)
		}
		o := &Object{Type: Valref, Refs: dat.arr}
		if typ == "dirref" {
			o.Type = Dirref
		}
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return o, nil
	case "dir":
		if dat.kind != 'o' || len(dat.strs) > 0 {
			return nil, d.errf("dir data must map names to tree objects")
		}
		ents := dat.objs
		sorted := true
		for i := range ents {
			if err := checkName(ents[i].Name); err != nil {
				return nil, err
			}
			if i > 0 && ents[i-1].Name >= ents[i].Name {
				sorted = false
			}
		}
		if !sorted { // flux-core writes them sorted; others may not
			sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		}
		for i := 1; i < len(ents); i++ {
			if ents[i-1].Name == ents[i].Name {
				return nil, d.errf("duplicate key %q", ents[i].Name)
			}
		}
		return &Object{Type: Dir, ents: ents}, nil
	case "symlink":
		if dat.kind != 'o' || len(dat.objs) > 0 {
			return nil, d.errf("symlink data must be {\"target\":...}")
		}
		o := &Object{Type: Symlink}
		for k, v := range dat.strs {
			switch k {
			case "target":
				o.Target = v
			case "namespace":
				o.Namespace = v
				if v == "" {
					return nil, d.errf("symlink namespace is empty")
				}
			default:
				return nil, d.errf("unknown symlink member %q", k)
			}
		}
		if o.Target == "" {
			return nil, d.errf("symlink has no target")
		}
		return o, nil
	case "hdir":
		return nil, d.errf("hdir objects are not supported")
	}
	return nil, d.errf("unknown type %q", typ)
}
