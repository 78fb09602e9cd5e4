package jobspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error kinds. Every error this package returns wraps one of them, so
// callers tell a malformed document from a rule violation with errors.Is.
var (
	// ErrSyntax: the input is not well-formed YAML or JSON.
	ErrSyntax = errors.New("jobspec syntax error")
	// ErrInvalid: the document breaks a rule of RFC 14 (or of the
	// extension RFCs it refers to: 26 dependencies, 31 constraints).
	ErrInvalid = errors.New("invalid jobspec")
	// ErrNotV1: the document is a valid canonical jobspec but breaks a
	// restriction of RFC 25 (jobspec version 1). It wraps ErrInvalid.
	ErrNotV1 = fmt.Errorf("%w: not a version 1 jobspec", ErrInvalid)
)

// Error reports what was wrong with a jobspec and where: Path is the key
// path of the offending value in the document ("resources[0].count",
// "tasks[0].command", "attributes.system.duration"; empty for the document
// as a whole) and Rule the rule it broke ("must be >= 1").
type Error struct {
	Path string
	Rule string
	Kind error // ErrSyntax, ErrInvalid or ErrNotV1
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Rule
	}
	return e.Path + ": " + e.Rule
}

// Unwrap returns the error kind.
func (e *Error) Unwrap() error { return e.Kind }

// path is a key path built on the stack while walking a document; it is
// turned into a string only when an error is reported. The nil *path is
// the document itself.
type path struct {
	parent  *path
	key     string // a mapping key, unless isIndex
	index   int    // an array index, if isIndex
	isIndex bool
}

// child returns the path of mapping key k under p.
func (p *path) child(k string) *path { return &path{parent: p, key: k} }

// at returns the path of array element i under p.
func (p *path) at(i int) *path { return &path{parent: p, index: i, isIndex: true} }

// errf returns an ErrInvalid *Error for p.
func (p *path) errf(format string, args ...any) *Error {
	return &Error{Path: p.String(), Rule: fmt.Sprintf(format, args...), Kind: ErrInvalid}
}

// notV1 returns an ErrNotV1 *Error for p.
func (p *path) notV1(format string, args ...any) *Error {
	return &Error{Path: p.String(), Rule: fmt.Sprintf(format, args...), Kind: ErrNotV1}
}

func (p *path) String() string {
	var b strings.Builder
	p.write(&b)
	return b.String()
}

// write appends p to b. It recurses rather than collecting the path
// elements so that paths do not escape to the heap.
func (p *path) write(b *strings.Builder) {
	if p == nil {
		return
	}
	p.parent.write(b)
	if p.isIndex {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(p.index))
		b.WriteByte(']')
		return
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(p.key)
}
