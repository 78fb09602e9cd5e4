package wire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// sched.alloc (RFC 27) between the job manager and a scheduler. The job
// manager sends one per job, thousands a second, and a SUCCESS response
// carries R: both are written and read with jsonwire, here, once for
// both sides.

// sched.alloc response types (RFC 27).
const (
	AllocSuccess  = 0
	AllocAnnotate = 1
	AllocDeny     = 2
	AllocCancel   = 3
)

// AllocRequest is a sched.alloc request {id, priority, userid,
// t_submit, jobspec}, and yield_to for a job requeued on preemption
// while the job it was preempted for is still pending: the scheduler
// should not start it before that one (RFC 27 has no such key; a
// scheduler that does not know it ignores it).
type AllocRequest struct {
	ID       jobid.ID
	Priority int64
	Userid   uint32
	TSubmit  float64
	// Jobspec is the job's jobspec text; nil leaves it out of the
	// payload (attached instead: AttachedJobspec).
	Jobspec []byte
	// YieldTo is the pending job this one was preempted for (0: none).
	YieldTo jobid.ID
}

// AppendAllocRequest appends the request's payload to b.
func AppendAllocRequest(b []byte, r AllocRequest) []byte {
	b = append(b, `{"id":`...)
	b = jsonwire.AppendUint(b, uint64(r.ID))
	if r.Jobspec != nil {
		b = append(b, `,"jobspec":`...)
		b = append(b, r.Jobspec...)
	}
	b = append(b, `,"priority":`...)
	b = jsonwire.AppendInt(b, r.Priority)
	b = append(b, `,"t_submit":`...)
	b = jsonwire.AppendFloat(b, r.TSubmit)
	b = append(b, `,"userid":`...)
	b = jsonwire.AppendUint(b, uint64(r.Userid))
	if r.YieldTo != 0 {
		b = append(b, `,"yield_to":`...)
		b = jsonwire.AppendUint(b, uint64(r.YieldTo))
	}
	return append(b, '}')
}

// DecodeAllocRequest reads a sched.alloc request; a request made inside
// the broker may carry its jobspec attached instead of in p.
func DecodeAllocRequest(p []byte, attached AttachedJobspec) (AllocRequest, error) {
	var req AllocRequest
	var seen int
	if attached != nil {
		req.Jobspec = attached
		seen |= 16
	}
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			var u uint64
			u, err = jsonwire.Uint(val)
			req.ID = jobid.ID(u)
			seen |= 1
		case "priority":
			req.Priority, err = jsonwire.Int(val)
			seen |= 2
		case "userid":
			req.Userid, err = decodeUserid(val)
			seen |= 4
		case "t_submit":
			req.TSubmit, err = jsonwire.Float(val)
			seen |= 8
		case "jobspec":
			if val[0] != '{' {
				return fmt.Errorf("%w: jobspec must be an object", jsonwire.ErrSyntax)
			}
			req.Jobspec = val
			seen |= 16
		case "yield_to":
			var u uint64
			u, err = jsonwire.Uint(val)
			req.YieldTo = jobid.ID(u)
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
		return req, fmt.Errorf("%w: sched.alloc needs id, priority, userid, t_submit and jobspec", jsonwire.ErrSyntax)
	}
	return req, nil
}

// AppendAllocSuccess appends a SUCCESS response: R written by appendR
// (the scheduler writes it straight from its allocation), and the
// resource summary annotation (made of "rank", "core", "gpu", digits and
// "[]-,/ ", so written unescaped).
func AppendAllocSuccess(b []byte, id jobid.ID, appendR func([]byte) []byte, summary string) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, uint64(id), 10)
	b = append(b, `,"type":0,"R":`...)
	b = appendR(b)
	b = append(b, `,"annotations":{"sched":{"resource_summary":`...)
	b = jsonwire.AppendString(b, summary)
	return append(b, `}}}`...)
}

// AppendAllocEnd appends a final DENY or CANCEL response, with a note
// ("" for none).
func AppendAllocEnd(b []byte, id jobid.ID, typ int, note string) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, uint64(id), 10)
	if note != "" {
		b = append(b, `,"note":`...)
		b = jsonwire.AppendString(b, note)
	}
	b = append(b, `,"type":`...)
	b = strconv.AppendInt(b, int64(typ), 10)
	return append(b, '}')
}

// AllocResponse is a sched.alloc response.
type AllocResponse struct {
	ID          jobid.ID
	Type        int
	R           json.RawMessage // nil when absent or null
	Note        string
	Annotations map[string]any
}

// DecodeAllocResponse reads a sched.alloc response.
func DecodeAllocResponse(p []byte) (AllocResponse, error) {
	var resp AllocResponse
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			var u uint64
			u, err = jsonwire.Uint(val)
			resp.ID = jobid.ID(u)
		case "type":
			var n int64
			n, err = jsonwire.Int(val)
			resp.Type = int(n)
		case "R":
			if !jsonwire.IsNull(val) {
				resp.R = val
			}
		case "note":
			if !jsonwire.IsNull(val) {
				resp.Note, err = jsonwire.String(val)
			}
		case "annotations":
			if !jsonwire.IsNull(val) {
				err = json.Unmarshal(val, &resp.Annotations)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	return resp, err
}
