package wire

import "github.com/fluxgo/fluxgo/pkg/jobspec"

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
