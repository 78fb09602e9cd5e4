package wire

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// ExecStart is a job-exec.start request (RFC 32) from the job manager:
// {"R","flags","id","jobspec","userid"}, with "reattach":true when a
// restarted job manager takes over a job that runs already. For an
// executor in the same broker the jobspec is attached instead
// (AttachedJobspec), and the executor takes it from there.
type ExecStart struct {
	ID       jobid.ID
	Userid   uint32
	Flags    int
	Jobspec  json.RawMessage // nil: left out (attached)
	R        json.RawMessage
	Reattach bool
}

// AppendExecStart appends the request's payload to b.
func AppendExecStart(b []byte, s ExecStart) []byte {
	b = append(b, `{"R":`...)
	b = appendRawOrNull(b, s.R)
	b = append(b, `,"flags":`...)
	b = jsonwire.AppendInt(b, int64(s.Flags))
	b = append(b, `,"id":`...)
	b = jsonwire.AppendUint(b, uint64(s.ID))
	if s.Jobspec != nil {
		b = append(b, `,"jobspec":`...)
		b = appendRawOrNull(b, s.Jobspec)
	}
	if s.Reattach {
		b = append(b, `,"reattach":true`...)
	}
	b = append(b, `,"userid":`...)
	b = jsonwire.AppendUint(b, uint64(s.Userid))
	return append(b, '}')
}

// DecodeExecStart reads a job-exec.start request; R and jobspec alias p
// (nil when absent or null).
func DecodeExecStart(p []byte) (ExecStart, error) {
	var req ExecStart
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			var u uint64
			u, err = jsonwire.Uint(val)
			req.ID = jobid.ID(u)
		case "userid":
			req.Userid, err = decodeUserid(val)
		case "flags":
			var n int64
			n, err = jsonwire.Int(val)
			req.Flags = int(n)
		case "jobspec":
			if !jsonwire.IsNull(val) {
				req.Jobspec = val
			}
		case "R":
			if !jsonwire.IsNull(val) {
				req.R = val
			}
		case "reattach":
			req.Reattach, err = jsonwire.Bool(val)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	return req, err
}

// appendRawOrNull appends an embedded JSON document, null when empty.
func appendRawOrNull(b, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// ExecGrow is the job manager's <executor>.grow request (RFC 51): a
// running job was given RDeltaAdd, and R is its allocation now. The
// executor starts the job's shells on the nodes added.
type ExecGrow struct {
	ID        jobid.ID        `json:"id"`
	RDeltaAdd json.RawMessage `json:"R_delta_add"`
	R         json.RawMessage `json:"R"`
}

// PlanChange is one change of a running job's shells (RFC 51), as
// job-exec tells the shells it starts later and the leader shell: Add,
// the R of nodes added (their shells follow the job's), or Sub, the
// ranks (an idset) of the job's last shells, given back.
type PlanChange struct {
	Add json.RawMessage `json:"add,omitempty"`
	Sub string          `json:"sub,omitempty"`
}

// ResourceNUMA is the resource.numa request: the NUMA domains of broker
// rank Rank in the instance's inventory (R's scheduling key), for a job
// shell placing tasks near their GPUs. Any user may ask (a guest's
// shell cannot read resource.R in the KVS).
type ResourceNUMA struct {
	Rank uint `json:"rank"`
}

// ResourceNUMAResponse answers it; Domains is empty when the rank has
// none recorded.
type ResourceNUMAResponse struct {
	Domains []rset.NUMADomain `json:"domains"`
}
