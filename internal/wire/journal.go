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
	lines := make([][]byte, len(e.Events))
	for i, ev := range e.Events {
		line, err := eventlog.Append(nil, eventlog.Event{Timestamp: ev.Timestamp, Name: ev.Name, Context: ev.Context})
		if err != nil {
			return nil, fmt.Errorf("events-journal: job %s: %w", e.ID, err)
		}
		lines[i] = line[:len(line)-1] // the eventlog line's newline
	}
	b := AppendJournalEntry(make([]byte, 0, 64+len(e.Jobspec)+len(e.R)+len(e.Events)*96), e.ID, lines, e.Jobspec, e.R)
	return append(b, 0), nil
}

// JournalEnd is the response that ends the backlog of an
// events-journal stream (flux-core's sentinel).
const JournalEnd = `{"events":[],"id":-1}`

// AppendJournalEntry appends an events-journal response {"id":ID,
// "events":[...]} with "jobspec" and "R" when given; events are RFC 18
// event objects, already encoded.
func AppendJournalEntry(b []byte, id jobid.ID, events [][]byte, jobspec, R []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonwire.AppendUint(b, uint64(id))
	b = append(b, `,"events":[`...)
	for i, ev := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, ev...)
	}
	b = append(b, ']')
	if len(jobspec) > 0 {
		b = append(b, `,"jobspec":`...)
		b = append(b, jobspec...)
	}
	if len(R) > 0 {
		b = append(b, `,"R":`...)
		b = append(b, R...)
	}
	return append(b, '}')
}

// DecodeJournalEntry reads an events-journal response; end reports the
// sentinel that ends the backlog (id -1). Contexts, jobspec and R alias
// p.
func DecodeJournalEntry(p []byte) (e JournalEntry, end bool, err error) {
	err = jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "id":
			var n int64
			if n, err = jsonwire.Int(val); err == nil {
				switch {
				case n == -1:
					end = true
				case n < 0:
					err = fmt.Errorf("%w: id %d", jsonwire.ErrSyntax, n)
				default:
					e.ID = jobid.ID(n)
				}
			}
		case "events":
			err = jsonwire.Array(val, func(v []byte) error {
				var ev JournalEvent
				err := jsonwire.Object(v, func(k, val []byte) error {
					var err error
					switch string(k) {
					case "timestamp":
						ev.Timestamp, err = jsonwire.Float(val)
					case "name":
						ev.Name, err = jsonwire.String(val)
					case "context":
						if !jsonwire.IsNull(val) {
							ev.Context = val
						}
					}
					return err
				})
				e.Events = append(e.Events, ev)
				return err
			})
		case "jobspec":
			if !jsonwire.IsNull(val) {
				e.Jobspec = val
			}
		case "R":
			if !jsonwire.IsNull(val) {
				e.R = val
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	return e, end, err
}
