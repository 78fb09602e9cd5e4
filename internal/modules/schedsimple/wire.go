package schedsimple

import (
	"fmt"

	"github.com/fluxgo/fluxgo/internal/wire"
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

// allocRequest is a sched.alloc request (RFC 27, with the jobspec).
type allocRequest struct {
	ID       uint64
	Priority int64
	Userid   uint32
	TSubmit  float64
	Jobspec  []byte
}

// A request made inside the broker may carry its jobspec attached
// instead (wire.AttachedJobspec).
func decodeAllocRequest(p []byte, attached wire.AttachedJobspec) (allocRequest, error) {
	var req allocRequest
	var seen int
	if attached != nil {
		req.Jobspec = attached
		seen |= 16
	}
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			req.ID, err = jsonwire.Uint(val)
			seen |= 1
		case "priority":
			req.Priority, err = jsonwire.Int(val)
			seen |= 2
		case "userid":
			var u uint64
			u, err = jsonwire.Uint(val)
			if err == nil && u > 1<<32-1 {
				err = fmt.Errorf("%w: userid %d is out of range", errSyntax, u)
			}
			req.Userid = uint32(u)
			seen |= 4
		case "t_submit":
			req.TSubmit, err = jsonwire.Float(val)
			seen |= 8
		case "jobspec":
			if val[0] != '{' {
				return fmt.Errorf("%w: jobspec must be an object", errSyntax)
			}
			req.Jobspec = val
			seen |= 16
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return req, err
	}
	if seen != 31 {
		return req, fmt.Errorf("%w: sched.alloc needs id, priority, userid, t_submit and jobspec", errSyntax)
	}
	return req, nil
}

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
