package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// SubmitAttachment is what job-ingest attaches to a job-manager.submit
// request made inside the broker (message.Attached): the jobspecs it
// parsed and their JSON text, in the order of the payload's "jobs". With
// it the payload leaves out each job's "jobspec": copying every jobspec
// of a batch into one large payload cost more than the rest of building
// it (fresh pages fault in at ~28 µs each on a small VM), and each job
// then kept the whole batch's buffer alive. A request from outside the
// broker carries the jobspecs in the payload, as flux-core's does.
//
// The jobs' records (SubmitJob.Record) are in the payload, in and out
// of the broker alike.
type SubmitAttachment struct {
	Specs []*jobspec.Jobspec
	Raw   [][]byte
}

// SubmitRecord names the blobs of a job's J and jobspec, already in the
// content store: a job with a record ("record": {"J": REF, "jobspec":
// REF}, a fluxgo member) is not in the KVS yet, and the job manager
// writes its J, jobspec and eventlog in the same commit as its first
// events and answers once that commit is done, with its "rootseq". A
// job's directory is then written once at submission, not twice, and a
// rejected job is never written. A request without records (flux-core's)
// names jobs job-ingest has already committed; one request has records
// for every job or for none.
type SubmitRecord struct{ J, Jobspec string }

// Payload returns the request's payload with each job's jobspec back in
// its "jobspec" member, flux-core's job-manager.submit (a
// message.Attachment).
func (a *SubmitAttachment) Payload(partial []byte) ([]byte, error) {
	b := []byte{'{'}
	n := 0
	err := jsonwire.Object(bytes.TrimSuffix(partial, []byte{0}), func(key, val []byte) error {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsonwire.AppendString(b, string(key))
		b = append(b, ':')
		if string(key) != "jobs" {
			b = append(b, val...)
			return nil
		}
		b = append(b, '[')
		defer func() { b = append(b, ']') }()
		return jsonwire.Array(val, func(job []byte) error {
			if n >= len(a.Raw) {
				return fmt.Errorf("more jobs than the %d jobspecs attached", len(a.Raw))
			}
			if n > 0 {
				b = append(b, ',')
			}
			if _, has, err := jsonwire.Member(job, "jobspec"); err != nil {
				return err
			} else if !has {
				var err error
				if job, err = jsonwire.WithMember(job, "jobspec", a.Raw[n]); err != nil {
					return err
				}
			}
			b = append(b, job...)
			n++
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("job-manager.submit: %w", err)
	}
	if n != len(a.Raw) {
		return nil, fmt.Errorf("job-manager.submit: %d jobs for the %d jobspecs attached", n, len(a.Raw))
	}
	return append(b, '}', 0), nil
}

// SubmitJob is one job of a job-manager.submit request, flux-core's
// {id, userid, urgency, t_submit, flags, jobspec}.
type SubmitJob struct {
	ID      jobid.ID
	Userid  uint32
	Urgency int
	TSubmit float64
	Flags   int
	// Jobspec is the job's jobspec text; nil leaves the member out (the
	// jobspecs are attached, SubmitAttachment).
	Jobspec json.RawMessage
	// Record, when set, asks the job manager to record the job (see
	// SubmitRecord).
	Record *SubmitRecord
}

// AppendSubmitRequest appends the job-manager.submit payload {"jobs":
// [...]} for jobs to b.
func AppendSubmitRequest(b []byte, jobs []SubmitJob) []byte {
	b = append(b, `{"jobs":[`...)
	for i := range jobs {
		j := &jobs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jsonwire.AppendUint(b, uint64(j.ID))
		b = append(b, `,"userid":`...)
		b = jsonwire.AppendUint(b, uint64(j.Userid))
		b = append(b, `,"urgency":`...)
		b = jsonwire.AppendInt(b, int64(j.Urgency))
		b = append(b, `,"t_submit":`...)
		b = jsonwire.AppendFloat(b, j.TSubmit)
		b = append(b, `,"flags":`...)
		b = jsonwire.AppendInt(b, int64(j.Flags))
		if j.Jobspec != nil {
			b = append(b, `,"jobspec":`...)
			b = append(b, j.Jobspec...)
		}
		if j.Record != nil {
			b = append(b, `,"record":{"J":`...)
			b = jsonwire.AppendString(b, j.Record.J)
			b = append(b, `,"jobspec":`...)
			b = jsonwire.AppendString(b, j.Record.Jobspec)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// DecodeSubmitRequest reads a job-manager.submit payload. Each job needs
// an id, and a jobspec unless jobspecsAttached; the jobspecs alias p.
func DecodeSubmitRequest(p []byte, jobspecsAttached bool) ([]SubmitJob, error) {
	var jobs []SubmitJob
	err := jsonwire.Object(p, func(key, val []byte) error {
		if string(key) != "jobs" {
			return nil
		}
		return jsonwire.Array(val, func(v []byte) error {
			var sj SubmitJob
			var seen int
			err := jsonwire.Object(v, func(k, val []byte) error {
				var err error
				var n int64
				switch string(k) {
				case "id":
					var u uint64
					u, err = jsonwire.Uint(val)
					sj.ID = jobid.ID(u)
					seen |= 1
				case "userid":
					sj.Userid, err = decodeUserid(val)
				case "urgency":
					n, err = jsonwire.Int(val)
					sj.Urgency = int(n)
				case "t_submit":
					sj.TSubmit, err = jsonwire.Float(val)
				case "flags":
					n, err = jsonwire.Int(val)
					sj.Flags = int(n)
				case "jobspec":
					sj.Jobspec = val
					seen |= 2
				case "record":
					sj.Record, err = decodeSubmitRecord(val)
				}
				if err != nil {
					return fmt.Errorf("jobs: %s: %w", k, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if seen&1 == 0 || (seen&2 == 0 && !jobspecsAttached) {
				return fmt.Errorf("%w: jobs: each job needs an id and a jobspec", jsonwire.ErrSyntax)
			}
			jobs = append(jobs, sj)
			return nil
		})
	})
	return jobs, err
}

// decodeSubmitRecord reads {"J": REF, "jobspec": REF}; both must be
// blobrefs.
func decodeSubmitRecord(val []byte) (*SubmitRecord, error) {
	var rec SubmitRecord
	err := jsonwire.Object(val, func(k, v []byte) error {
		var s string
		var err error
		switch string(k) {
		case "J":
			s, err = jsonwire.String(v)
			rec.J = s
		case "jobspec":
			s, err = jsonwire.String(v)
			rec.Jobspec = s
		default:
			return nil
		}
		if err != nil {
			return err
		}
		if err := content.Validate(s); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	if err == nil && (rec.J == "" || rec.Jobspec == "") {
		err = fmt.Errorf("%w: a record needs J and jobspec", jsonwire.ErrSyntax)
	}
	return &rec, err
}

// SubmitResponse builds the job-manager.submit response {"errors":[[id,
// "message"], ...], "rootseq": N}: the jobs refused, and (when the job
// manager recorded the jobs) the KVS root that holds the others.
type SubmitResponse struct {
	b []byte
	n int
}

// Reject adds a refused job and why.
func (s *SubmitResponse) Reject(id jobid.ID, msg string) {
	if s.b == nil {
		s.b = append(make([]byte, 0, 64), `{"errors":[`...)
	}
	if s.n > 0 {
		s.b = append(s.b, ',')
	}
	s.n++
	s.b = append(s.b, '[')
	s.b = jsonwire.AppendUint(s.b, uint64(id))
	s.b = append(s.b, ',')
	s.b = jsonwire.AppendString(s.b, msg)
	s.b = append(s.b, ']')
}

// Payload returns the response; rootseq < 0 leaves the member out
// (flux-core's job-ingest recorded the jobs itself).
func (s *SubmitResponse) Payload(rootseq int64) []byte {
	if s.b == nil {
		s.b = append(make([]byte, 0, 32), `{"errors":[`...)
	}
	b := append(s.b, ']')
	if rootseq >= 0 {
		b = append(b, `,"rootseq":`...)
		b = jsonwire.AppendInt(b, rootseq)
	}
	return append(b, '}')
}

// DecodeSubmitResponse reads a job-manager.submit response: the refused
// jobs with why, and rootseq (-1 when the response has none).
func DecodeSubmitResponse(p []byte) (rejected map[jobid.ID]string, rootseq int64, err error) {
	rejected = map[jobid.ID]string{}
	rootseq = -1
	err = jsonwire.Object(p, func(key, val []byte) error {
		if string(key) == "rootseq" {
			var err error
			rootseq, err = jsonwire.Int(val)
			if err == nil && rootseq < 0 {
				err = fmt.Errorf("%w: rootseq %d", jsonwire.ErrSyntax, rootseq)
			}
			return err
		}
		if string(key) != "errors" {
			return nil
		}
		return jsonwire.Array(val, func(pair []byte) error {
			var id jobid.ID
			var msg string
			n := 0
			err := jsonwire.Array(pair, func(v []byte) error {
				var err error
				switch n {
				case 0:
					var u uint64
					u, err = jsonwire.Uint(v)
					id = jobid.ID(u)
				case 1:
					msg, err = jsonwire.String(v)
				}
				n++
				return err
			})
			if err == nil && n != 2 {
				err = fmt.Errorf("%w: want [id, message]", jsonwire.ErrSyntax)
			}
			if err != nil {
				return err
			}
			rejected[id] = msg
			return nil
		})
	})
	return rejected, rootseq, err
}
