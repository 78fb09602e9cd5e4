package rset

import (
	"errors"
	"fmt"
)

// Error kinds. Every error this package returns wraps one of them, so
// callers can test with errors.Is; the message says what was wrong.
var (
	// ErrInvalid: the input is not a valid R, or an argument is malformed
	// (a bad property name, expiration before start time ...).
	ErrInvalid = errors.New("invalid R")
	// ErrNotFound: a rank or a host named by the caller is not in the set.
	ErrNotFound = errors.New("not found")
	// ErrOverlap: two sets that must be disjoint share resources.
	ErrOverlap = errors.New("resource sets overlap")
	// ErrMismatch: a set fails verification against the expected set.
	ErrMismatch = errors.New("resource mismatch")
)

// ParseError reports what is wrong with an R document and where: Key is
// the path of the offending key, e.g. "execution.R_lite[1].rank". It
// wraps ErrInvalid and, when there is one, the error of the underlying
// parser (idset, hostlist, JSON).
type ParseError struct {
	Key   string // path of the key at fault; empty for the document itself
	Msg   string // what is wrong with it
	Cause error  // underlying error, or nil
}

func (e *ParseError) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Unwrap returns ErrInvalid and the underlying cause, if any.
func (e *ParseError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrInvalid, e.Cause}
	}
	return []error{ErrInvalid}
}

func parseErr(key, msg string, cause error) error {
	return &ParseError{Key: key, Msg: msg, Cause: cause}
}

// kindError is an error of one of the kinds above whose message is only
// the context, so that it reads well when printed on its own.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
