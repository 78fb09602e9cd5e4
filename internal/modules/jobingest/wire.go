package jobingest

import (
	"fmt"
	"unsafe"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Every job passes through here once; its payloads are read and written
// with jsonwire rather than encoding/json (see pkg/jsonwire).

// submitRequest is a job-ingest.submit request (flux-core's payload).
type submitRequest struct {
	J       string // aliases Jraw
	Jraw    []byte // J's bytes (aliasing the request when unescaped)
	Urgency *int
	Flags   int
}

func decodeSubmit(p []byte) (submitRequest, error) {
	var req submitRequest
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "J":
			if val[0] != '"' {
				return fmt.Errorf("%w: J must be a string", jsonwire.ErrSyntax)
			}
			// J is kilobytes: keep the request's bytes (never modified)
			req.Jraw, err = jsonwire.StringBytes(val)
			if err == nil && len(req.Jraw) > 0 {
				req.J = unsafe.String(&req.Jraw[0], len(req.Jraw))
			}
		case "urgency":
			if !jsonwire.IsNull(val) {
				var n int64
				n, err = jsonwire.Int(val)
				u := int(n)
				req.Urgency = &u
			}
		case "flags":
			if !jsonwire.IsNull(val) {
				var n int64
				n, err = jsonwire.Int(val)
				req.Flags = int(n)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	return req, err
}

// idResponse is the answer to a submitter: {"id":N}.
func idResponse(id jobid.ID) []byte {
	b := append(make([]byte, 0, 32), `{"id":`...)
	return append(jsonwire.AppendUint(b, uint64(id)), '}')
}
