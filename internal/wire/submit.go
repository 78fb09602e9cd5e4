package wire

import (
	"bytes"
	"fmt"

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
// With Records (one per job), the jobs are not in the KVS yet: the job
// manager writes each accepted job's J, jobspec and eventlog in the same
// commit as its first events, and answers once that commit is done, with
// its "rootseq". A job's directory is then written once at submission,
// not twice, and a rejected job is never written. A request without
// Records (flux-core's) names jobs job-ingest has already committed.
type SubmitAttachment struct {
	Specs   []*jobspec.Jobspec
	Raw     [][]byte
	Records []SubmitRecord
}

// SubmitRecord names the blobs of a job's J and jobspec, already in the
// content store.
type SubmitRecord struct{ J, Jobspec string }

// Payload returns the request's payload with each job's jobspec back in
// its "jobspec" member, flux-core's job-manager.submit (a
// message.Attachment). A request with Records has no wire form: its jobs
// are not in the KVS, and a job manager elsewhere could not record them.
func (a *SubmitAttachment) Payload(partial []byte) ([]byte, error) {
	if a.Records != nil {
		return nil, fmt.Errorf("job-manager.submit: jobs to record (attached records) cannot leave the broker")
	}
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
