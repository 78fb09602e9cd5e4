// Package wire holds the contracts two modules share: the encoders and
// decoders of the protocols between them (job-manager.submit,
// sched.alloc, job-exec.start, events-journal), written once for both
// sides, and the Go values one module hands another in-process, as a
// message's Attached companion, when both run in one broker. Both sides
// import this package, never each other (a module imports no other
// module). A client over a socket gets the same content as the JSON
// payload its protocol documents (docs/MODULES.md).
package wire

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// decodeUserid reads a userid member: an unsigned integer of 32 bits.
func decodeUserid(val []byte) (uint32, error) {
	u, err := jsonwire.Uint(val)
	if err == nil && u > 1<<32-1 {
		err = fmt.Errorf("%w: userid %d is out of range", jsonwire.ErrSyntax, u)
	}
	return uint32(u), err
}
