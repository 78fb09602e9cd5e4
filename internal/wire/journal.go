package wire

import "github.com/fluxgo/fluxgo/pkg/jobid"

// JournalEntry is what the job manager hands, in-process, to a
// subscriber of job-manager.events-journal that runs in its broker and
// asked for it ("attached": true in the request): one response's content
// already decoded, instead of a JSON payload the subscriber would parse
// again. Subscribers outside the broker (flux-core's Python bindings,
// flux jobs --watch) get the payload RFC-style, as always.
//
// It is some events of one job, committed together, with the jobspec
// when they include submit and R when they include alloc; shared by
// every attached subscriber: read-only.
type JournalEntry struct {
	ID      jobid.ID
	Events  []JournalEvent
	Jobspec []byte // JSON text, or nil
	R       []byte // JSON text, or nil
}

// JournalEvent is one eventlog entry (RFC 18).
type JournalEvent struct {
	Timestamp float64
	Name      string
	Context   []byte // JSON object, or nil
}
