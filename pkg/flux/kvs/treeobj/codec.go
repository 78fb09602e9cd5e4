package treeobj

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"syscall"
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
	d := newDecoder(b)
	return d.object(b, 0)
}

// DecodeNullable is Decode, except that JSON null yields a nil object (an
// unlink in a kvs.commit operation).
func DecodeNullable(b []byte) (*Object, error) {
	if jsonwire.IsNull(bytes.Trim(b, jsonSpace)) {
		return nil, nil
	}
	return Decode(b)
}

// DecodePrefix decodes the tree object, or JSON null (a nil object), at
// the start of b (after optional white space) and returns it with the
// number of bytes of b it took. It lets a caller parse a payload that
// embeds tree objects without scanning them twice.
func DecodePrefix(b []byte) (*Object, int, error) {
	if len(b) > 0 && b[0] != '{' { // an object, usually, without space
		if t := bytes.TrimLeft(b, jsonSpace); bytes.HasPrefix(t, null) {
			return nil, len(b) - len(t) + len(null), nil
		}
	}
	d := newDecoder(b)
	if o, n, err, ok := d.canonicalPrefix(); ok {
		if err != nil {
			return nil, 0, err
		}
		return o, n, nil
	}
	o, n, err := d.members(b, 0, true)
	if err != nil {
		return nil, 0, err
	}
	return o, n, nil
}

// jsonSpace is the white space JSON allows between tokens.
const jsonSpace = " \t\n\r"

var null = []byte("null")

// A decoder decodes one object, nested dirs included. All tokenizing is
// jsonwire's. The raw values jsonwire reports are subslices of root,
// which places errors.
//
// jsonwire.Object checks the whole of a value before it reports it, so
// decoding an object member by member and then its data scans the data
// twice, and every level of dirs adds a scan of all below it. An object
// in the canonical form (Encode's and flux-core's) is therefore taken
// apart without a scan of its own: it is
//
//	{"data":D,"type":"T","ver":1}
//
// for a type name T, and when D is one JSON value (which decoding it by
// its type checks) it is the object's data. Anything else (another
// order, white space, "size", or a D that is not one value) is decoded
// member by member.
//
// Still, a value nested n dirs deep is scanned at least n times, so the
// decoder has a budget of bytes to scan, a multiple of the input's size:
// a hostile input nested deep around a large value cannot cost more.
type decoder struct {
	root   []byte
	budget int
}

// Scanning budget: scanBudgetFactor times the input, plus scanBudgetBase
// bytes. A canonical tree nested 14 deep with all its bytes at the
// bottom fits, as does any tree of less than 16 MiB/maxDepth = 64 KiB
// (objects in the content store and in RPCs nest dirs a level or two).
const (
	scanBudgetFactor = 16
	scanBudgetBase   = 16 << 20
)

// errBudget is the kind of the error of a decoder out of budget.
var errBudget = errors.New("directories nested too deep for their size")

func newDecoder(b []byte) decoder {
	return decoder{root: b, budget: scanBudgetFactor*len(b) + scanBudgetBase}
}

// scan charges the budget for a scan of p.
func (d *decoder) scan(p []byte) error {
	if d.budget -= len(p); d.budget < 0 {
		return fmt.Errorf("%w: offset %d: %w (decoding would scan the input more than %d times): %w",
			ErrFormat, cap(d.root)-cap(p), errBudget, scanBudgetFactor, syscall.EINVAL)
	}
	return nil
}

// errAt returns a format error about the raw value at val (a subslice
// of d.root).
func (d *decoder) errAt(val []byte, format string, args ...any) error {
	off := cap(d.root) - cap(val)
	if off < 0 || off > len(d.root) {
		return formatErr(format, args...)
	}
	return formatErr("offset %d: %s", off, fmt.Sprintf(format, args...))
}

// wrap returns err, an error of jsonwire's or one of the decoder's, as a
// format error.
func wrap(err error) error {
	if errors.Is(err, ErrFormat) {
		return err
	}
	return fmt.Errorf("%w: %w: %w", ErrFormat, err, syscall.EINVAL)
}

// object decodes the tree object p.
func (d *decoder) object(p []byte, depth int) (*Object, error) {
	if depth > maxDepth {
		return nil, d.errAt(p, "directories nested deeper than %d", maxDepth)
	}
	if o, err, ok := d.canonical(p, depth); ok {
		return o, err
	}
	o, _, err := d.members(p, depth, false)
	return o, err
}

// canonicalHead and canonicalTails frame the data of a canonical object.
const canonicalHead = `{"data":`

var canonicalTails = [...]struct {
	typ  Type
	tail string
}{
	{Val, `,"type":"val","ver":1}`},
	{Dir, `,"type":"dir","ver":1}`},
	{Dirref, `,"type":"dirref","ver":1}`},
	{Valref, `,"type":"valref","ver":1}`},
	{Symlink, `,"type":"symlink","ver":1}`},
}

// canonical decodes p if it is in the canonical form; ok is false if it
// is not, or if it may not be (and nothing below p has been decoded).
func (d *decoder) canonical(p []byte, depth int) (o *Object, err error, ok bool) {
	if len(p) < len(canonicalHead) || string(p[:len(canonicalHead)]) != canonicalHead {
		return nil, nil, false
	}
	var data []byte // at least 2 bytes
	typ := Type(0)
	for _, c := range canonicalTails {
		if n := len(p) - len(c.tail); n >= len(canonicalHead)+2 && string(p[n:]) == c.tail {
			typ, data = c.typ, p[len(canonicalHead):n]
			break
		}
	}
	switch typ {
	case Val:
		// one string from its first byte to its last
		if data[0] != '"' || data[len(data)-1] != '"' {
			return nil, nil, false
		}
		if err := d.scan(data); err != nil {
			return nil, err, true
		}
		if !jsonwire.Valid(data) {
			return nil, nil, false
		}
		o, err = d.val(data)
	case Valref, Dirref:
		if data[0] != '[' {
			return nil, nil, false
		}
		if o, _, err = d.refs(typ, data, false); err == nil {
			err = o.Validate()
		}
	case Symlink:
		if data[0] != '{' {
			return nil, nil, false
		}
		o, err = d.symlink(data)
	case Dir:
		if data[0] != '{' {
			return nil, nil, false
		}
		// the entries are decoded only once the scan has shown data to
		// be one object: were they decoded first and the object then
		// decoded member by member, each level of a deep tree could
		// double the work
		ents, _, eerr := d.dirEntries(data, false)
		if errors.Is(eerr, errBudget) {
			return nil, eerr, true
		}
		if eerr != nil {
			return nil, nil, false
		}
		o, err = d.dir(data, ents, depth)
		return o, err, true
	default:
		return nil, nil, false
	}
	if errors.Is(err, errBudget) {
		return nil, err, true
	}
	if err != nil {
		// a flat value: have the member by member decoding tell why
		return nil, nil, false
	}
	return o, nil, true
}

// canonicalTail returns the type whose canonical tail t starts with,
// and the tail's length (0 if none does).
func canonicalTail(t []byte) (Type, int) {
	for _, c := range canonicalTails {
		if len(t) >= len(c.tail) && string(t[:len(c.tail)]) == c.tail {
			return c.typ, len(c.tail)
		}
	}
	return 0, 0
}

// canonicalPrefix decodes the dir, valref or dirref in the canonical
// form at the start of d.root (the input of DecodePrefix) and returns it
// with its length. Its data is scanned up to its closing bracket, then
// the tail is matched; ok is false if it is not such an object (or may
// not be), and nothing below it has been decoded then.
func (d *decoder) canonicalPrefix() (o *Object, n int, err error, ok bool) {
	b := d.root
	if len(b) < len(canonicalHead)+2 || string(b[:len(canonicalHead)]) != canonicalHead {
		return nil, 0, nil, false
	}
	data := b[len(canonicalHead):]
	var (
		ents *[]pending
		end  int // offset in b past data
	)
	switch data[0] {
	case '{':
		ents, end, err = d.dirEntries(data, true)
	case '[':
		o, end, err = d.refs(Valref, data, true)
	default:
		return nil, 0, nil, false
	}
	if errors.Is(err, errBudget) {
		return nil, 0, err, true
	}
	if err != nil {
		return nil, 0, nil, false
	}
	typ, tail := canonicalTail(b[end:])
	switch {
	case ents != nil && typ == Dir:
		o, err = d.dir(b[len(canonicalHead):end], ents, 0)
		return o, end + tail, err, true
	case ents != nil:
		putPending(ents)
	case typ == Valref || typ == Dirref:
		o.Type = typ
		if o.Validate() == nil {
			return o, end + tail, nil, true
		}
	}
	return nil, 0, nil, false // have the member by member decoding tell why
}

// errEnd stops the scan of an object, or of an array, that DecodePrefix
// decodes at its closing bracket, before the data that follows it.
var errEnd = errors.New("end of the value")

// closes returns the offset in d.root past the closing bracket c if it
// follows val, a value in an object or array, after optional space: if
// it does, the object or array is complete and, as jsonwire has scanned
// it up to val, well formed. Else it returns -1.
func (d *decoder) closes(val []byte, c byte) int {
	t := d.root[cap(d.root)-cap(val)+len(val):]
	if len(t) > 0 && t[0] != c && t[0] != ',' {
		t = bytes.TrimLeft(t, jsonSpace)
	}
	if len(t) > 0 && t[0] == c {
		return len(d.root) - len(t) + 1
	}
	return -1
}

// fields holds the raw values of an object's members.
type fields struct {
	ver, typ, data []byte
	end            int // offset in root past the object (prefix decoding)
}

// members decodes the tree object p member by member. With prefix, p is
// d.root and may go on past the object; the offset just past it is
// returned.
func (d *decoder) members(p []byte, depth int, prefix bool) (*Object, int, error) {
	if err := d.scan(p); err != nil {
		return nil, 0, err
	}
	var m fields
	err := jsonwire.Object(p, func(key, val []byte) error {
		if err := d.member(&m, key, val); err != nil {
			return err
		}
		if !prefix {
			return nil
		}
		// the object ends here if a '}' follows, and the scan is
		// stopped before what follows it
		if m.end = d.closes(val, '}'); m.end >= 0 {
			return errEnd
		}
		if string(key) == "data" && m.typ == nil && m.ver == nil {
			// data followed by the canonical tail: the object ends
			// with it
			end := cap(d.root) - cap(val) + len(val)
			if _, n := canonicalTail(d.root[end:]); n > 0 {
				const ver = `,"ver":1}`
				m.typ = d.root[end+len(`,"type":`) : end+n-len(ver)]
				m.ver = d.root[end+n-2 : end+n-1]
				m.end = end + n
				return errEnd
			}
		}
		return nil
	})
	switch {
	case err == errEnd:
	case err != nil:
		return nil, 0, wrap(err)
	case prefix:
		m.end = len(p) // an empty object: nothing stopped the scan
	}
	if m.ver == nil {
		return nil, 0, d.errAt(p, "missing \"ver\"")
	}
	if m.typ == nil {
		return nil, 0, d.errAt(p, "missing \"type\"")
	}
	if m.data == nil {
		return nil, 0, d.errAt(p, "missing \"data\"")
	}
	o, err := d.build(&m, depth)
	if err != nil {
		return nil, 0, err
	}
	return o, m.end, nil
}

// member takes one member of a tree object.
func (d *decoder) member(m *fields, key, val []byte) error {
	switch string(key) {
	case "ver":
		if m.ver != nil {
			return d.errAt(val, "duplicate \"ver\"")
		}
		if string(val) != "1" {
			return d.errAt(val, "\"ver\" must be 1")
		}
		m.ver = val
	case "type":
		if m.typ != nil {
			return d.errAt(val, "duplicate \"type\"")
		}
		if val[0] != '"' {
			return d.errAt(val, "\"type\" must be a string")
		}
		m.typ = val
	case "data":
		if m.data != nil {
			return d.errAt(val, "duplicate \"data\"")
		}
		m.data = val
	case "size":
		if _, err := jsonwire.Uint(val); err != nil {
			return d.errAt(val, "\"size\" must be a non-negative integer")
		}
	default:
		return d.errAt(val, "unknown member %q", key)
	}
	return nil
}

// build makes the object of the type and data of m.
func (d *decoder) build(m *fields, depth int) (*Object, error) {
	name, err := jsonwire.StringBytes(m.typ)
	if err != nil {
		return nil, wrap(err)
	}
	data := m.data
	switch string(name) {
	case "val":
		if data[0] != '"' {
			return nil, d.errAt(data, "val data must be a base64 string")
		}
		return d.val(data)
	case "valref", "dirref":
		typ := Valref
		if string(name) == "dirref" {
			typ = Dirref
		}
		o, _, err := d.refs(typ, data, false)
		if err != nil {
			return nil, err
		}
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return o, nil
	case "dir":
		if data[0] != '{' {
			return nil, d.errAt(data, "dir data must map names to tree objects")
		}
		ents, _, err := d.dirEntries(data, false)
		if err != nil {
			return nil, err
		}
		return d.dir(data, ents, depth)
	case "symlink":
		return d.symlink(data)
	case "hdir":
		return nil, d.errAt(m.typ, "hdir objects are not supported")
	}
	return nil, d.errAt(m.typ, "unknown type %q", name)
}

// val decodes the data of a val, a JSON string (already scanned).
func (d *decoder) val(data []byte) (*Object, error) {
	b, err := jsonwire.StringBytes(data)
	if err != nil {
		return nil, wrap(err)
	}
	if err := checkBase64Bytes(b); err != nil {
		return nil, err
	}
	return &Object{Type: Val, Data: string(b)}, nil
}

var quote = []byte{'"'}

// refs decodes the data of a valref or dirref, an array of blobrefs,
// into an object of type typ, which the caller validates. With prefix,
// data may go on past the array; the offset in d.root past it is
// returned.
func (d *decoder) refs(typ Type, data []byte, prefix bool) (*Object, int, error) {
	if data[0] != '[' {
		return nil, 0, d.errAt(data, "%s data must be an array of blobrefs", typ)
	}
	if err := d.scan(data); err != nil {
		return nil, 0, err
	}
	// a blobref is a string of two quotes (needing no escapes): the
	// quotes bound the number of elements
	n := 1
	if !prefix {
		n = bytes.Count(data, quote) / 2
	}
	o := &Object{Type: typ, Refs: make([]string, 0, n)}
	end := -1
	err := jsonwire.Array(data, func(val []byte) error {
		if val[0] != '"' {
			return d.errAt(val, "%s data must be an array of blobrefs", typ)
		}
		s, err := jsonwire.String(val)
		if err != nil {
			return err
		}
		o.Refs = append(o.Refs, s)
		if prefix {
			if end = d.closes(val, ']'); end >= 0 {
				return errEnd
			}
		}
		return nil
	})
	if err != nil && err != errEnd {
		return nil, 0, wrap(err)
	}
	if prefix && end < 0 {
		return nil, 0, d.errAt(data, "%s data must be an array of blobrefs", typ)
	}
	return o, end, nil
}

// pending is a dir entry whose object is not decoded yet.
type pending struct {
	name string
	raw  []byte
}

// pendingPool holds the scratch slices of dirEntries.
var pendingPool = sync.Pool{New: func() any { return new([]pending) }}

// dirEntries scans the data of a dir, an object, and returns its entries
// undecoded, in a slice from pendingPool (see dir). With prefix, data
// may go on past the object; the offset in d.root past it is returned.
func (d *decoder) dirEntries(data []byte, prefix bool) (*[]pending, int, error) {
	if err := d.scan(data); err != nil {
		return nil, 0, err
	}
	sp := pendingPool.Get().(*[]pending)
	ents := (*sp)[:0]
	end := -1
	if prefix && len(data) >= 2 && data[1] == '}' {
		end = cap(d.root) - cap(data) + 2 // {}
	}
	var err error
	if end < 0 {
		err = jsonwire.Object(data, func(key, val []byte) error {
			if val[0] != '{' {
				return d.errAt(val, "dir data must map names to tree objects")
			}
			ents = append(ents, pending{name: string(key), raw: val})
			if prefix {
				if end = d.closes(val, '}'); end >= 0 {
					return errEnd
				}
			}
			return nil
		})
	}
	*sp = ents
	switch {
	case err == errEnd:
		err = nil
	case err != nil:
		err = wrap(err)
	case prefix && end < 0:
		err = d.errAt(data, "dir data must map names to tree objects")
	}
	if err != nil {
		putPending(sp)
		return nil, 0, err
	}
	return sp, end, nil
}

func putPending(sp *[]pending) {
	if cap(*sp) > 1<<16 {
		return // a huge dir's: let it go
	}
	clear(*sp) // keep no input alive
	*sp = (*sp)[:0]
	pendingPool.Put(sp)
}

// dir decodes the entries of a dir (from dirEntries, which it puts back)
// and makes the dir.
func (d *decoder) dir(data []byte, sp *[]pending, depth int) (*Object, error) {
	defer putPending(sp)
	pend := *sp
	ents := make([]DirEntry, len(pend))
	sorted := true
	for i, e := range pend {
		if err := d.checkName(e.name, e.raw); err != nil {
			return nil, err
		}
		o, err := d.object(e.raw, depth+1)
		if err != nil {
			return nil, err
		}
		ents[i] = DirEntry{Name: e.name, Obj: o}
		if i > 0 && ents[i-1].Name >= e.name {
			sorted = false
		}
	}
	if !sorted { // flux-core writes them sorted; others may not
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for i := 1; i < len(ents); i++ {
			if ents[i-1].Name == ents[i].Name {
				return nil, d.errAt(data, "duplicate key %q", ents[i].Name)
			}
		}
	}
	return &Object{Type: Dir, ents: ents}, nil
}

// checkName checks the name of a decoded dir entry (of object raw):
// checkName's rules, and UTF-8 (jsonwire hands a name without escapes
// over raw; one with escapes is decoded as encoding/json does, invalid
// UTF-8 becoming U+FFFD).
func (d *decoder) checkName(name string, raw []byte) error {
	high := false
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '.' {
			return checkName(name)
		} else if c >= utf8.RuneSelf {
			high = true
		}
	}
	if name == "" {
		return checkName(name)
	}
	if high && !utf8.ValidString(name) {
		return d.errAt(raw, "dir entry name %q is not valid UTF-8", name)
	}
	return nil
}

// symlink decodes the data of a symlink: a target and an optional
// namespace.
func (d *decoder) symlink(data []byte) (*Object, error) {
	if data[0] != '{' {
		return nil, d.errAt(data, "symlink data must be {\"target\":...}")
	}
	if err := d.scan(data); err != nil {
		return nil, err
	}
	o := &Object{Type: Symlink}
	var haveTarget, haveNS bool
	err := jsonwire.Object(data, func(key, val []byte) error {
		if val[0] != '"' {
			return d.errAt(val, "symlink data must be {\"target\":...}")
		}
		var err error
		switch string(key) {
		case "target":
			if haveTarget {
				return d.errAt(val, "duplicate key %q", key)
			}
			o.Target, err = d.strictString(val)
			haveTarget = true
		case "namespace":
			if haveNS {
				return d.errAt(val, "duplicate key %q", key)
			}
			o.Namespace, err = d.strictString(val)
			haveNS = true
			if err == nil && o.Namespace == "" {
				return d.errAt(val, "symlink namespace is empty")
			}
		default:
			return d.errAt(val, "unknown symlink member %q", key)
		}
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	if o.Target == "" {
		return nil, d.errAt(data, "symlink has no target")
	}
	return o, nil
}

// strictString decodes the JSON string val, refusing one that holds
// invalid UTF-8 and no escapes (one with escapes is decoded as
// encoding/json does, invalid UTF-8 becoming U+FFFD).
func (d *decoder) strictString(val []byte) (string, error) {
	if !utf8.Valid(val) && bytes.IndexByte(val, '\\') < 0 {
		return "", d.errAt(val, "string is not valid UTF-8")
	}
	return jsonwire.String(val)
}
