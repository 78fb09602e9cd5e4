package schedsimple

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// The job manager sends sched.alloc with the whole jobspec inside
// (environment included), thousands of times a second. encoding/json
// spends most of its time validating and copying that jobspec, which the
// scheduler parses (or finds in its cache) anyway, so the RFC 27 payloads
// are read with jsonwire: one strict pass that finds the members and
// converts only the scalars needed.

// errSyntax is the kind of every payload decoding error.
var errSyntax = jsonwire.ErrSyntax

// freeRequest is a sched.free request.
type freeRequest struct {
	ID    uint64
	R     []byte // nil when absent
	Final bool
}

func decodeFreeRequest(p []byte) (freeRequest, error) {
	req := freeRequest{Final: true}
	hasID := false
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			req.ID, err = jsonwire.Uint(val)
			hasID = true
		case "R":
			if !jsonwire.IsNull(val) {
				req.R = val
			}
		case "final":
			req.Final, err = jsonwire.Bool(val)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err == nil && !hasID {
		err = fmt.Errorf("%w: sched.free needs id", errSyntax)
	}
	return req, err
}

// decodeFeasibility returns the jobspec of a feasibility.check request.
func decodeFeasibility(p []byte) ([]byte, error) {
	var js []byte
	err := jsonwire.Object(p, func(key, val []byte) error {
		if string(key) == "jobspec" {
			js = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(js) == 0 || js[0] != '{' {
		return nil, fmt.Errorf("%w: feasibility.check needs a jobspec object", errSyntax)
	}
	return js, nil
}
