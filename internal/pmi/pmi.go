// Package pmi implements the simple PMI-1 wire protocol (Flux RFC 13)
// on both ends.
//
// The client side (Client, FromEnv) is how a broker launched by mpiexec,
// srun or a parent Flux instance learns its rank and size and exchanges
// overlay endpoints with the other brokers: init, get_maxes,
// get_my_kvsname, put, barrier, get, finalize.
//
// The server side (Server) reads requests from one connection per
// process, answers the ones it can answer from Info (init, maxes, rank,
// size, appnum, kvsname), and hands the process group's shared state to
// a KVS: puts are buffered per connection and delivered to KVS.Fence
// when the process enters the barrier, and gets go to KVS.Get. The job
// shell serves PMI to MPI tasks this way; MemKVS is a complete in-memory
// KVS for a group whose members are all served by one Server.
//
// Messages are lines of space-separated key=value tuples. Only one
// request is in flight per connection (PMI-1 is lock-step).
package pmi

import (
	"errors"
	"fmt"
)

// Return codes of the PMI-1 API (RFC 13). They travel in the rc= key of
// responses; any nonzero rc is a failure.
const (
	Success            = 0
	Fail               = -1
	ErrInit            = 1
	ErrNoMem           = 2
	ErrInvalidArg      = 3
	ErrInvalidKey      = 4
	ErrInvalidKeyLen   = 5
	ErrInvalidVal      = 6
	ErrInvalidValLen   = 7
	ErrInvalidLength   = 8
	ErrInvalidNumArgs  = 9
	ErrInvalidArgs     = 10
	ErrInvalidNumParse = 11
	ErrInvalidKeyvalp  = 12
	ErrInvalidSize     = 13
)

// Error kinds.
var (
	// ErrProtocol: a malformed or unexpected message. Either side closes
	// the connection when it sees one (RFC 13, Error Handling).
	ErrProtocol = errors.New("pmi protocol error")
	// ErrNoPMI: the environment offers no PMI wire protocol (neither
	// PMI_FD nor PMI_PORT is set).
	ErrNoPMI = errors.New("no PMI in the environment")
	// ErrNotFound: a get for a key nobody put.
	ErrNotFound = errors.New("key not found")
	// ErrAborted: the process group was aborted.
	ErrAborted = errors.New("process group aborted")
)

// Error is a failure the other side reported with a nonzero rc.
type Error struct {
	Cmd string // the request's command
	RC  int
	Msg string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("pmi %s: rc=%d: %s", e.Cmd, e.RC, e.Msg)
	}
	return fmt.Sprintf("pmi %s: rc=%d", e.Cmd, e.RC)
}

// Default limits a Server announces in its maxes response when Info
// leaves them zero. They are well above the minimums MPICH recommends
// (16, 32 and 64).
const (
	DefaultKVSNameMax = 256
	DefaultKeyMax     = 256
	DefaultValueMax   = 2048
)

// Maxes are the length limits a server announces (each counts the C
// string's terminating NUL, so a key may have at most KeyMax-1 bytes).
type Maxes struct {
	KVSNameMax int
	KeyMax     int
	ValueMax   int
}
