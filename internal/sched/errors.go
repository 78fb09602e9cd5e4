package sched

import (
	"errors"
	"fmt"
)

// Error kinds. Every error this package returns wraps one of them.
var (
	// ErrBusy: the request fits the instance but not what is free now.
	ErrBusy = errors.New("resources busy")
	// ErrUnsatisfiable: the request can never be satisfied by this
	// instance, whatever is freed.
	ErrUnsatisfiable = errors.New("unsatisfiable request")
	// ErrInvalid: the request or an argument is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: a rank, core or GPU is not in the pool.
	ErrNotFound = errors.New("not found")
	// ErrConflict: resources to claim are already allocated, or
	// resources to free are not allocated.
	ErrConflict = errors.New("allocation conflict")
)

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
