package flux

import (
	"errors"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Error is an error response from a Flux service: an errno value and the
// service's message. errors.Is(err, syscall.ENOENT) matches on the errno.
type Error struct {
	Errno syscall.Errno
	Msg   string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return e.Errno.Error()
}

// Is matches the errno, so callers test error kinds with errors.Is.
func (e *Error) Is(target error) bool {
	if t, ok := target.(syscall.Errno); ok {
		return t == e.Errno
	}
	return false
}

// Errorf-free constructors for the common kinds.

// NewError returns an *Error with errno and message.
func NewError(errno syscall.Errno, msg string) *Error { return &Error{Errno: errno, Msg: msg} }

// ErrnoOf maps an error to the errno sent in an error response: the first
// syscall.Errno (or *Error) found in its chain, EPROTO for malformed
// messages, and EINVAL otherwise.
func ErrnoOf(err error) syscall.Errno {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Errno
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if errors.Is(err, message.ErrProto) {
		return syscall.EPROTO
	}
	return syscall.EINVAL
}

// ErrorText returns the text sent in an error response for err.
func ErrorText(err error) string {
	var fe *Error
	if errors.As(err, &fe) && fe == err {
		return fe.Msg
	}
	return err.Error()
}
