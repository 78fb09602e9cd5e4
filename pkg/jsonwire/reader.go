package jsonwire

import (
	"unicode/utf8"
	"unsafe"
)

// Kind is the kind of a JSON value, told from its first byte.
type Kind byte

// The kinds of value. KindInvalid and KindEnd say that no value starts
// where one was looked for: a byte that starts none, or the end of the
// input.
const (
	KindInvalid Kind = iota
	KindEnd
	KindObject
	KindArray
	KindString
	KindNumber
	KindBool
	KindNull
)

var kindNames = [...]string{"invalid", "end of input", "object", "array", "string", "number", "bool", "null"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// kinds is the kind of value each byte starts.
var kinds = func() (t [256]Kind) {
	t['{'], t['['], t['"'], t['t'], t['f'], t['n'] = KindObject, KindArray, KindString, KindBool, KindBool, KindNull
	t['-'] = KindNumber
	for c := '0'; c <= '9'; c++ {
		t[c] = KindNumber
	}
	return t
}()

// kindAt returns the kind of the value starting at p[i].
func kindAt(p []byte, i int) Kind {
	if i >= len(p) {
		return KindEnd
	}
	return kinds[p[i]]
}

// KindOf returns the kind of the value val starts with (after any
// space), as told from its first byte: for a raw value that Object or
// Array reported, that is its type; val is not otherwise checked.
func KindOf(val []byte) Kind { return kindAt(val, skipSpace(val, 0)) }

// A Reader reads one JSON document a value at a time, for decoders that
// build a representation of their own from every level of it (a tree of
// generic values, say). Object and Array check a member's whole value
// before they report it, so decoding nested objects with them scans the
// inner levels again for each level above; a Reader reads each byte
// once. It checks the grammar that Object, Array and Valid check, with
// the same errors (*SyntaxError, giving the offset in the document).
//
// A decoder calls Peek to learn the kind of the next value, then the
// method that reads that kind: Text, Number, Bool, Null, or for an
// object BeginObject, then Key, the member's value and NextMember for
// each member, and for an array BeginArray, then each element's value
// and NextElement. Skip and Raw read a value of any kind whole. End
// checks that nothing follows the document.
type Reader struct {
	data []byte
	// src is data as a string when the Reader was made from one: the
	// strings Text and Key return are then substrings of it, not copies.
	src      string
	pos      int
	depth    int
	maxDepth int
	strict   bool
}

// NewReader returns a Reader of data. The strings it returns are copies.
func NewReader(data []byte) *Reader {
	return &Reader{data: data, maxDepth: MaxDepth}
}

// NewStringReader returns a Reader of s. The strings it returns that
// hold no escapes are substrings of s (sharing its memory).
func NewStringReader(s string) *Reader {
	return &Reader{data: unsafe.Slice(unsafe.StringData(s), len(s)), src: s, maxDepth: MaxDepth}
}

// SetMaxDepth lowers the nesting bound: an object or array deeper than n
// levels (the top-level value is at level 1) is an error. n outside
// 1..MaxDepth means MaxDepth.
func (r *Reader) SetMaxDepth(n int) {
	if n < 1 || n > MaxDepth {
		n = MaxDepth
	}
	r.maxDepth = n
}

// SetStrictUTF8 makes invalid UTF-8 in a string (a key or a value) an
// error, "invalid UTF-8 in string", instead of being replaced by U+FFFD
// as encoding/json does.
func (r *Reader) SetStrictUTF8(strict bool) { r.strict = strict }

// Offset returns the offset in the document of the next byte to read.
func (r *Reader) Offset() int { return r.pos }

// Depth returns the number of objects and arrays the reader is inside.
func (r *Reader) Depth() int { return r.depth }

// Peek skips space and returns the kind of the next value without
// reading it. Where no value starts it returns KindEnd or KindInvalid
// and the error reading a value there is.
func (r *Reader) Peek() (Kind, error) {
	r.pos = skipSpace(r.data, r.pos)
	k := kindAt(r.data, r.pos)
	if k < KindObject {
		return k, r.want(k)
	}
	return k, nil
}

// want returns the error for a value of another kind than k at the
// reader's position.
func (r *Reader) want(k Kind) error {
	switch kindAt(r.data, r.pos) {
	case KindEnd:
		return errAt(r.pos, "unexpected end of input")
	case KindInvalid:
		return badChar(r.data, r.pos)
	}
	return errAt(r.pos, "want %s", wantNames[k])
}

var wantNames = [...]string{KindObject: "an object", KindArray: "an array", KindString: "a string",
	KindNumber: "a number", KindBool: "true or false", KindNull: "null"}

// BeginObject reads the '{' that starts an object and reports whether a
// member follows; if not, the empty object has been read whole.
func (r *Reader) BeginObject() (more bool, err error) {
	return r.begin('{', '}', KindObject)
}

// BeginArray reads the '[' that starts an array and reports whether an
// element follows; if not, the empty array has been read whole.
func (r *Reader) BeginArray() (more bool, err error) {
	return r.begin('[', ']', KindArray)
}

func (r *Reader) begin(open, close byte, k Kind) (bool, error) {
	i := skipSpace(r.data, r.pos)
	if i >= len(r.data) || r.data[i] != open {
		r.pos = i
		return false, r.want(k)
	}
	if r.depth >= r.maxDepth {
		return false, deepErr(i, r.maxDepth)
	}
	i = skipSpace(r.data, i+1)
	if i < len(r.data) && r.data[i] == close {
		r.pos = i + 1
		return false, nil
	}
	r.pos = i
	r.depth++
	return true, nil
}

// Key reads a member's name and the ':' after it; the member's value
// comes next.
func (r *Reader) Key() (string, error) {
	i := skipSpace(r.data, r.pos)
	end, holds, val, err := scanKey(r.data, i)
	if err != nil {
		return "", err
	}
	if holds == 0 && r.src != "" {
		r.pos = val
		return r.src[i+1 : end-1], nil
	}
	s, err := r.text(i, end, holds)
	if err != nil {
		return "", err
	}
	r.pos = val
	return s, nil
}

// NextMember reads what follows a member's value and reports whether
// another member follows; if not, the object's closing '}' has been read.
func (r *Reader) NextMember() (more bool, err error) {
	more, next, err := nextMember(r.data, r.pos)
	return r.next(more, next, err)
}

// NextElement reads what follows an array element and reports whether
// another element follows; if not, the array's closing ']' has been read.
func (r *Reader) NextElement() (more bool, err error) {
	more, next, err := nextElement(r.data, r.pos)
	return r.next(more, next, err)
}

func (r *Reader) next(more bool, next int, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	r.pos = next
	if !more {
		r.depth--
	}
	return more, nil
}

// Text reads a string value and returns its text.
func (r *Reader) Text() (string, error) {
	i := skipSpace(r.data, r.pos)
	if i >= len(r.data) || r.data[i] != '"' {
		r.pos = i
		return "", r.want(KindString)
	}
	end, holds, err := scanString(r.data, i)
	if err != nil {
		return "", err
	}
	if holds == 0 && r.src != "" {
		r.pos = end
		return r.src[i+1 : end-1], nil
	}
	s, err := r.text(i, end, holds)
	if err != nil {
		return "", err
	}
	r.pos = end
	return s, nil
}

// text decodes the string data[i:end] (quotes included), which
// scanString found to hold holds.
func (r *Reader) text(i, end, holds int) (string, error) {
	body := r.data[i+1 : end-1]
	if holds&strNonASCII != 0 && !utf8.Valid(body) {
		if r.strict {
			return "", errAt(i+1+invalidUTF8(body), "invalid UTF-8 in string")
		}
	} else if holds&strEscaped == 0 {
		if r.src != "" {
			return r.src[i+1 : end-1], nil
		}
		return string(body), nil
	}
	b, err := appendUnquoted(make([]byte, 0, len(body)), r.data[i:end])
	if err != nil {
		return "", err
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of a UTF-8 sequence (b is known not to be valid UTF-8).
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// Number reads a number value and returns its text (a subslice of the
// document, for Int, Uint or Float) and whether it has a fraction or an
// exponent.
func (r *Reader) Number() (raw []byte, isFloat bool, err error) {
	i := skipSpace(r.data, r.pos)
	if kindAt(r.data, i) != KindNumber {
		r.pos = i
		return nil, false, r.want(KindNumber)
	}
	end, isFloat, err := scanNumber(r.data, i)
	if err != nil {
		return nil, false, err
	}
	r.pos = end
	return r.data[i:end], isFloat, nil
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, error) {
	i := skipSpace(r.data, r.pos)
	lit := "true"
	if i < len(r.data) && r.data[i] == 'f' {
		lit = "false"
	} else if i >= len(r.data) || r.data[i] != 't' {
		r.pos = i
		return false, r.want(KindBool)
	}
	end, err := literal(r.data, i, lit)
	if err != nil {
		return false, err
	}
	r.pos = end
	return lit == "true", nil
}

// Null reads null.
func (r *Reader) Null() error {
	i := skipSpace(r.data, r.pos)
	if i >= len(r.data) || r.data[i] != 'n' {
		r.pos = i
		return r.want(KindNull)
	}
	end, err := literal(r.data, i, "null")
	if err != nil {
		return err
	}
	r.pos = end
	return nil
}

// Skip reads a value of any kind.
func (r *Reader) Skip() error {
	_, err := r.Raw()
	return err
}

// Raw reads a value of any kind and returns its text (a subslice of the
// document), checked as the value methods check it.
func (r *Reader) Raw() ([]byte, error) {
	i := skipSpace(r.data, r.pos)
	// skipValue bounds nesting at MaxDepth: start it deeper by what this
	// reader's bound is lower.
	end, err := skipValue(r.data, i, r.depth+1+MaxDepth-r.maxDepth)
	if err != nil {
		if se, ok := err.(*SyntaxError); ok && r.maxDepth != MaxDepth && se.Msg == deepMsg(MaxDepth) {
			se.Msg = deepMsg(r.maxDepth)
		}
		return nil, err
	}
	raw := r.data[i:end]
	if r.strict && !utf8.Valid(raw) {
		return nil, errAt(i+invalidUTF8(raw), "invalid UTF-8 in string")
	}
	r.pos = end
	return raw, nil
}

// End checks that only space follows the document's value.
func (r *Reader) End() error {
	if err := trailing(r.data, r.pos); err != nil {
		return err
	}
	r.pos = len(r.data)
	return nil
}
