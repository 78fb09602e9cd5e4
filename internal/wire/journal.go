package wire

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

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

// Payload returns the entry as the JSON payload of an events-journal
// response (a message.Attachment: the response had none beside it),
// {"id":ID,"events":[...]} with "jobspec" and "R" when set, as the job
// manager writes for subscribers outside the broker.
func (e *JournalEntry) Payload(partial []byte) ([]byte, error) {
	if len(partial) != 0 {
		return nil, fmt.Errorf("events-journal: %d bytes of payload beside an attached entry", len(partial))
	}
	b := make([]byte, 0, 64+len(e.Jobspec)+len(e.R)+len(e.Events)*96)
	b = append(b, `{"id":`...)
	b = jsonwire.AppendUint(b, uint64(e.ID))
	b = append(b, `,"events":[`...)
	for i, ev := range e.Events {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		b, err = eventlog.Append(b, eventlog.Event{Timestamp: ev.Timestamp, Name: ev.Name, Context: ev.Context})
		if err != nil {
			return nil, fmt.Errorf("events-journal: job %s: %w", e.ID, err)
		}
		b = b[:len(b)-1] // the eventlog line's newline
	}
	b = append(b, ']')
	if len(e.Jobspec) > 0 {
		b = append(b, `,"jobspec":`...)
		b = append(b, e.Jobspec...)
	}
	if len(e.R) > 0 {
		b = append(b, `,"R":`...)
		b = append(b, e.R...)
	}
	return append(b, '}', 0), nil
}
