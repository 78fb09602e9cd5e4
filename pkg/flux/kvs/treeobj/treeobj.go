// Package treeobj implements the RFC 11 key value store tree object format
// (version 1): the val, valref, dir, dirref and symlink objects the KVS
// stores in the content store and carries in its RPCs, with a strict
// decoder and an encoder whose output is byte-for-byte what flux-core
// writes (compact JSON, keys sorted), so blobrefs computed here match
// flux-core's for the same content.
//
// A val keeps its data in the base64 form it has on the wire; a dir keeps
// its entries sorted by name (so encoding needs no sort and copying one is
// a slice copy). Objects reachable from a KVS root are immutable: code
// that changes a directory works on a copy (see [Object.CopyDir]).
// The hdir type of RFC 11 is not implemented (nor is it by flux-core).
//
// The package also holds the KVS key path rules (normalization, the "."
// root, splitting into components) shared by the module and the client.
package treeobj

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

// Type is a tree object type.
type Type uint8

// Tree object types (RFC 11). hdir is not supported.
const (
	Val Type = iota + 1
	Valref
	Dir
	Dirref
	Symlink
)

var typeNames = [...]string{Val: "val", Valref: "valref", Dir: "dir", Dirref: "dirref", Symlink: "symlink"}

// String returns the RFC 11 type name.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ErrFormat is the kind of every decoding and validation error. Errors of
// this kind also match syscall.EINVAL, so services answer them as EINVAL.
var ErrFormat = errors.New("invalid RFC 11 tree object")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", ErrFormat, fmt.Sprintf(format, args...), syscall.EINVAL)
}

// Object is one RFC 11 tree object. Which fields are used depends on Type:
//
//	Val:     Data (base64 text, standard alphabet with padding)
//	Valref:  Refs (one or more blobrefs)
//	Dir:     entries, through Entry, Set, Entries, Names and Len
//	Dirref:  Refs (exactly one blobref)
//	Symlink: Target, and Namespace (empty: the link's own namespace)
type Object struct {
	Type      Type
	Data      string
	Refs      []string
	Target    string
	Namespace string

	ents []DirEntry // dir entries sorted by name, names unique

	// tail tracks how far the backing array of Refs has been extended by
	// AppendRef, so two objects sharing an array never write the same
	// slot (appends stay amortized O(1) without copying the array).
	tail *refTail
}

type refTail struct{ n int }

// DirEntry is one entry of a dir.
type DirEntry struct {
	Name string
	Obj  *Object
}

// NewVal returns a val object holding data.
func NewVal(data []byte) *Object {
	return &Object{Type: Val, Data: base64.StdEncoding.EncodeToString(data)}
}

// NewValBase64 returns a val object from base64 text, which is checked.
func NewValBase64(b64 string) (*Object, error) {
	if err := checkBase64(b64); err != nil {
		return nil, err
	}
	return &Object{Type: Val, Data: b64}, nil
}

// AppendVal returns a val holding v's data followed by w's (both vals),
// working on their base64 text: when v's text ends in a whole group the
// texts are joined; otherwise w's data is decoded and appended with
// AppendRaw. Appending to a long value costs what is appended.
func AppendVal(v, w *Object) (*Object, error) {
	a, b := v.Data, w.Data
	if len(a)%4 != 0 || len(b)%4 != 0 {
		return nil, formatErr("val data is not base64 (length %d or %d is not a multiple of 4)", len(a), len(b))
	}
	if a == "" || a[len(a)-1] != '=' {
		return &Object{Type: Val, Data: a + b}, nil
	}
	more, err := base64.StdEncoding.DecodeString(b)
	if err != nil {
		return nil, formatErr("val data %q is not base64: %v", abbrev(b), err)
	}
	return AppendRaw(v, more)
}

// AppendRaw returns a val holding v's data (a val) followed by data,
// encoding only data (and the last bytes of v's when its base64 ends
// short of a whole group), straight into the new value's one allocation.
func AppendRaw(v *Object, data []byte) (*Object, error) {
	a := v.Data
	if len(a)%4 != 0 {
		return nil, formatErr("val data is not base64 (length %d is not a multiple of 4)", len(a))
	}
	enc := base64.StdEncoding
	head, tail := a, []byte(nil)
	if a != "" && a[len(a)-1] == '=' {
		var err error
		if tail, err = enc.DecodeString(a[len(a)-4:]); err != nil {
			return nil, formatErr("val data %q is not base64: %v", abbrev(a), err)
		}
		head = a[:len(a)-4]
	}
	var b strings.Builder
	b.Grow(len(head) + enc.EncodedLen(len(tail)+len(data)))
	b.WriteString(head)
	var chunk [1024]byte // 768 bytes of data at a time
	if len(tail) > 0 {
		// the group the old data ended in, completed with the new
		var g [3]byte
		k := copy(g[:], tail)
		n := copy(g[k:], data)
		enc.Encode(chunk[:], g[:k+n])
		b.Write(chunk[:enc.EncodedLen(k+n)])
		data = data[n:]
	}
	for len(data) > 0 {
		n := min(len(data), 768)
		enc.Encode(chunk[:], data[:n])
		b.Write(chunk[:enc.EncodedLen(n)])
		data = data[n:]
	}
	return &Object{Type: Val, Data: b.String()}, nil
}

// NewValref returns a valref object of the given blobrefs.
func NewValref(refs ...string) *Object {
	return &Object{Type: Valref, Refs: refs}
}

// NewDir returns an empty dir object.
func NewDir() *Object { return &Object{Type: Dir} }

// find returns the index of name in the sorted entries, or where it
// would be inserted.
func (o *Object) find(name string) (int, bool) {
	lo, hi := 0, len(o.ents)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.ents[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(o.ents) && o.ents[lo].Name == name
}

// Entry returns the entry name of a dir (nil if there is none).
func (o *Object) Entry(name string) *Object {
	if i, ok := o.find(name); ok {
		return o.ents[i].Obj
	}
	return nil
}

// Set makes obj the entry name of a dir, replacing any; a nil obj
// removes the entry. Only a dir no root refers to may be changed.
func (o *Object) Set(name string, obj *Object) {
	i, ok := o.find(name)
	switch {
	case ok && obj != nil:
		o.ents[i].Obj = obj
	case ok:
		o.ents = append(o.ents[:i], o.ents[i+1:]...)
	case obj != nil:
		o.ents = append(o.ents, DirEntry{})
		copy(o.ents[i+1:], o.ents[i:])
		o.ents[i] = DirEntry{Name: name, Obj: obj}
	}
}

// Entries returns a dir's entries sorted by name. The slice belongs to
// the object: do not change it (use Set, or SetAt while iterating).
func (o *Object) Entries() []DirEntry { return o.ents }

// SetAt replaces the object of the i'th entry (as Entries orders them).
func (o *Object) SetAt(i int, obj *Object) { o.ents[i].Obj = obj }

// Names returns a dir's entry names, sorted.
func (o *Object) Names() []string {
	names := make([]string, len(o.ents))
	for i, e := range o.ents {
		names[i] = e.Name
	}
	return names
}

// Len returns the number of entries of a dir.
func (o *Object) Len() int { return len(o.ents) }

// NewDirref returns a dirref object naming blobref ref.
func NewDirref(ref string) *Object { return &Object{Type: Dirref, Refs: []string{ref}} }

// NewSymlink returns a symlink to target in namespace ns ("" for the
// link's own namespace).
func NewSymlink(ns, target string) *Object {
	return &Object{Type: Symlink, Namespace: ns, Target: target}
}

// Value returns the data of a val object.
func (o *Object) Value() ([]byte, error) {
	if o.Type != Val {
		return nil, formatErr("%s object has no inline value", o.Type)
	}
	b, err := base64.StdEncoding.DecodeString(o.Data)
	if err != nil {
		return nil, formatErr("val data is not base64: %v", err)
	}
	return b, nil
}

// IsDir reports whether o is a dir or dirref.
func (o *Object) IsDir() bool { return o.Type == Dir || o.Type == Dirref }

// Count returns the number of entries of a dir or blobrefs of a
// valref/dirref (0 for other types).
func (o *Object) Count() int {
	switch o.Type {
	case Dir:
		return len(o.ents)
	case Valref, Dirref:
		return len(o.Refs)
	}
	return 0
}

// CopyDir returns a dir with the same entries that can be changed
// without affecting o. The entry objects themselves are shared.
func (o *Object) CopyDir() *Object {
	ents := make([]DirEntry, len(o.ents), len(o.ents)+1)
	copy(ents, o.ents)
	return &Object{Type: Dir, ents: ents}
}

// AppendRef returns a valref with ref appended to o's blobrefs. o is not
// changed. The result may share o's backing array; appending twice to
// the same object is safe (the second append copies).
func (o *Object) AppendRef(ref string) *Object {
	n := len(o.Refs)
	if o.tail != nil && o.tail.n == n && cap(o.Refs) > n {
		refs := o.Refs[:n+1]
		refs[n] = ref
		o.tail.n++
		return &Object{Type: Valref, Refs: refs, tail: o.tail}
	}
	refs := make([]string, n+1, 2*n+4)
	copy(refs, o.Refs)
	refs[n] = ref
	return &Object{Type: Valref, Refs: refs, tail: &refTail{n: n + 1}}
}

// Validate checks o against RFC 11 (recursively for a dir).
func (o *Object) Validate() error {
	if o == nil {
		return formatErr("null object")
	}
	switch o.Type {
	case Val:
		return checkBase64(o.Data)
	case Valref:
		if len(o.Refs) == 0 {
			return formatErr("valref has no blobrefs")
		}
		return checkRefs(o.Refs)
	case Dirref:
		if len(o.Refs) != 1 {
			return formatErr("dirref has %d blobrefs, want 1", len(o.Refs))
		}
		return checkRefs(o.Refs)
	case Dir:
		for i, e := range o.ents {
			if err := checkName(e.Name); err != nil {
				return err
			}
			if i > 0 && o.ents[i-1].Name >= e.Name {
				return formatErr("dir entries out of order or duplicated at %q", e.Name)
			}
			if err := e.Obj.Validate(); err != nil {
				return fmt.Errorf("dir entry %q: %w", e.Name, err)
			}
		}
		return nil
	case Symlink:
		if o.Target == "" {
			return formatErr("symlink has an empty target")
		}
		return nil
	}
	return formatErr("unknown type %d", o.Type)
}

func checkRefs(refs []string) error {
	for _, r := range refs {
		if err := content.Validate(r); err != nil {
			return formatErr("%v", err)
		}
	}
	return nil
}

func checkName(name string) error {
	if name == "" {
		return formatErr("dir entry with an empty name")
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return formatErr("dir entry name %q contains '.'", name)
		}
	}
	return nil
}

// checkBase64 checks that s is base64 text (standard alphabet, padded).
// Line breaks, which the base64 decoder skips, are refused: val data is
// written to JSON unescaped (and flux-core refuses them too).
func checkBase64(s string) error {
	if len(s)%4 != 0 {
		return formatErr("val data %q is not base64 (length %d is not a multiple of 4)", abbrev(s), len(s))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return formatErr("val data %q is not base64: %v", abbrev(s), err)
	}
	if len(b) != base64Len(s) {
		return formatErr("val data %q is not base64 (it holds line breaks)", abbrev(s))
	}
	return nil
}

// checkBase64Bytes is checkBase64 for bytes, decoding the text a piece at
// a time into a buffer on the stack. Pieces are whole groups of 4, and
// only the last may be padded or short of data, so this is the check of
// the whole text.
func checkBase64Bytes(b []byte) error {
	if len(b)%4 != 0 {
		return formatErr("val data %q is not base64 (length %d is not a multiple of 4)", abbrev(string(b)), len(b))
	}
	const piece = 256
	var buf [piece / 4 * 3]byte
	for off := 0; off < len(b); off += piece {
		p := b[off:min(off+piece, len(b))]
		n, err := base64.StdEncoding.Decode(buf[:], p)
		if err != nil {
			if c, ok := err.(base64.CorruptInputError); ok {
				err = c + base64.CorruptInputError(off)
			}
			return formatErr("val data %q is not base64: %v", abbrev(string(b)), err)
		}
		if off+len(p) < len(b) && n != len(buf) {
			return formatErr("val data %q is not base64 (padding or line breaks before its end)", abbrev(string(b)))
		}
		if off+len(p) == len(b) && n != base64Len(p) {
			return formatErr("val data %q is not base64 (it holds line breaks)", abbrev(string(b)))
		}
	}
	return nil
}

// base64Len returns the length of the data in s, padded base64 text of a
// length a multiple of 4, if s holds nothing but base64 (the decoder
// skips line breaks: a text that holds some decodes shorter).
func base64Len[T string | []byte](s T) int {
	n := len(s) / 4 * 3
	if len(s) > 0 && s[len(s)-1] == '=' {
		n--
		if s[len(s)-2] == '=' {
			n--
		}
	}
	return n
}

func abbrev(s string) string {
	if len(s) > 32 {
		return s[:29] + "..."
	}
	return s
}
