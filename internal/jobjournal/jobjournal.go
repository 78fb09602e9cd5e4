// Package jobjournal holds what the job manager hands, in-process, to a
// subscriber of job-manager.events-journal that runs in its broker and
// asked for it ("attached": true in the request): each response's
// content already decoded, as a message.Attached companion, instead of
// a JSON payload the subscriber would parse again. Subscribers outside
// the broker (flux-core's Python bindings, flux jobs --watch) get the
// payload RFC-style, as always.
package jobjournal

import "github.com/fluxgo/fluxgo/pkg/jobid"

// Entry is one journal response: some events of one job, committed
// together, with the jobspec when they include submit and R when they
// include alloc. It is shared by every attached subscriber: read-only.
type Entry struct {
	ID      jobid.ID
	Events  []Event
	Jobspec []byte // JSON text, or nil
	R       []byte // JSON text, or nil
}

// Event is one eventlog entry (RFC 18).
type Event struct {
	Timestamp float64
	Name      string
	Context   []byte // JSON object, or nil
}
