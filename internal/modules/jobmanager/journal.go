package jobmanager

import (
	"encoding/json"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobjournal"
	"github.com/fluxgo/fluxgo/internal/jsonwire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// journal streams every posted event to subscribers of
// job-manager.events-journal once the event is committed to the KVS.
// The events of one job committed together go out in one response.
type journal struct {
	m    *manager
	subs map[journalKey]*journalSub
	// nPayload and nAttached count the subscribers that want a JSON
	// payload and those in this broker that take the entry attached
	// (jobjournal.Entry): each form is built only if someone wants it.
	nPayload, nAttached int
	pending             []journalEntry
	index               map[jobid.ID]int // each job's entry in pending
}

// journalKey names a subscription: its requestor's route and matchtag
// (a client may hold several streams).
type journalKey struct {
	route    string
	matchtag uint32
}

type journalSub struct {
	r        *flux.Request
	attached bool
}

// journalEntry is one response: a job's events (encoded eventlog
// entries for payloads, decoded for attached subscribers), with the
// jobspec when they include submit and R when they include alloc.
type journalEntry struct {
	id      jobid.ID
	events  [][]byte
	evs     []jobjournal.Event
	jobspec json.RawMessage
	R       json.RawMessage
}

func newJournal(m *manager) *journal {
	return &journal{m: m, subs: make(map[journalKey]*journalSub), index: make(map[jobid.ID]int)}
}

// add queues an event: its time, name and context, and its eventlog
// entry without the newline.
func (jl *journal) add(j *job, ts float64, name string, ctx []byte, ev []byte) {
	if len(jl.subs) == 0 {
		return
	}
	e := jl.entry(j.ID)
	if jl.nPayload > 0 {
		e.events = append(e.events, ev)
	}
	if jl.nAttached > 0 {
		e.evs = append(e.evs, jobjournal.Event{Timestamp: ts, Name: name, Context: ctx})
	}
	switch name {
	case "submit":
		e.jobspec = j.Raw
	case "alloc":
		e.R = j.R
	}
}

func (jl *journal) entry(id jobid.ID) *journalEntry {
	i, ok := jl.index[id]
	if !ok {
		i = len(jl.pending)
		jl.pending = append(jl.pending, journalEntry{id: id})
		jl.index[id] = i
	}
	return &jl.pending[i]
}

// annotate sends a journal-only "annotations" event (not written to the
// eventlog) so listings can show scheduler annotations of pending jobs.
func (jl *journal) annotate(j *job) {
	if len(jl.subs) == 0 {
		return
	}
	ctx, err := appendValue([]byte(`{"annotations":`), j.annot)
	if err != nil {
		return
	}
	ctx = append(ctx, '}')
	now := jl.m.now()
	e := jl.entry(j.ID)
	if jl.nPayload > 0 {
		e.events = append(e.events, appendEvent(nil, now, "annotations", ctx))
	}
	if jl.nAttached > 0 {
		e.evs = append(e.evs, jobjournal.Event{Timestamp: now, Name: "annotations", Context: ctx})
	}
	jl.m.batch.Kick()
}

// take returns the entries queued so far (they are sent once committed).
func (jl *journal) take() []journalEntry {
	p := jl.pending
	jl.pending = nil
	clear(jl.index)
	return p
}

// appendEntry encodes a response: {"id":N,"events":[...],"jobspec":J,
// "R":R}, jobspec and R left out when empty.
func appendEntry(b []byte, e *journalEntry) []byte {
	b = append(b, `{"id":`...)
	b = jsonwire.AppendUint(b, uint64(e.id))
	b = append(b, `,"events":[`...)
	for i, ev := range e.events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, ev...)
	}
	b = append(b, ']')
	if len(e.jobspec) > 0 {
		b = append(b, `,"jobspec":`...)
		b = append(b, e.jobspec...)
	}
	if len(e.R) > 0 {
		b = append(b, `,"R":`...)
		b = append(b, e.R...)
	}
	return append(b, '}')
}

func (jl *journal) send(entries []journalEntry) {
	if len(jl.subs) == 0 {
		return
	}
	for i := range entries {
		e := &entries[i]
		// one payload (NUL-terminated as JSON payloads are) and one
		// attachment, each shared by every subscriber that takes it:
		// messages are not modified once sent
		var buf []byte
		if len(e.events) > 0 {
			size := 64 + len(e.jobspec) + len(e.R)
			for _, ev := range e.events {
				size += len(ev) + 1
			}
			buf = append(appendEntry(make([]byte, 0, size), e), 0)
		}
		var att *jobjournal.Entry
		if len(e.evs) > 0 {
			att = &jobjournal.Entry{ID: e.id, Events: e.evs, Jobspec: e.jobspec, R: e.R}
		}
		for _, sub := range jl.subs {
			switch {
			case sub.attached && att != nil:
				sub.r.RespondAttached(nil, att)
			case !sub.attached && buf != nil:
				sub.r.RespondRaw(buf)
			}
		}
	}
}

// subscribe handles job-manager.events-journal: with full=true, the
// history of jobs in memory comes first, then a sentinel {id:-1}.
func (jl *journal) subscribe(r *flux.Request) {
	var req struct {
		Full bool `json:"full"`
		// fluxgo: a module of this broker takes the entries attached
		// (jobjournal.Entry), the backlog aside
		Attached bool `json:"attached"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EINVAL, "events-journal requires a streaming request")
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "events-journal is only for the instance owner")
		return
	}
	if req.Full {
		for _, j := range jl.m.jobs {
			if j.eventlog == nil {
				continue
			}
			e := journalEntry{id: j.ID, jobspec: j.Raw, R: j.R}
			for _, line := range splitLines(j.eventlog) {
				if jsonwire.Valid(line) {
					e.events = append(e.events, line)
				}
			}
			// the scheduler's annotations of a pending job are sent as
			// they change, never written: a late subscriber gets them here
			if len(j.annot) > 0 && len(e.events) > 0 {
				if ctx, err := appendValue([]byte(`{"annotations":`), j.annot); err == nil {
					e.events = append(e.events, appendEvent(nil, jl.m.now(), "annotations", append(ctx, '}')))
				}
			}
			r.Respond(json.RawMessage(appendEntry(nil, &e)))
		}
		r.Respond(json.RawMessage(`{"events":[],"id":-1}`))
	}
	key := journalKey{r.Msg.RouteString(), r.Msg.Matchtag}
	jl.drop(key)
	jl.subs[key] = &journalSub{r: r, attached: req.Attached}
	if req.Attached {
		jl.nAttached++
	} else {
		jl.nPayload++
	}
}

// disconnect ends the subscriptions of a requestor that went away.
func (jl *journal) disconnect(route string) {
	for key := range jl.subs {
		if key.route == route {
			jl.drop(key)
		}
	}
}

func (jl *journal) drop(key journalKey) {
	sub, ok := jl.subs[key]
	if !ok {
		return
	}
	delete(jl.subs, key)
	if sub.attached {
		jl.nAttached--
	} else {
		jl.nPayload--
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}
