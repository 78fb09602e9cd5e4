package jobmanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// journal streams every posted event to subscribers of
// job-manager.events-journal once the event is committed to the KVS.
// The events of one job committed together go out in one response.
type journal struct {
	m    *manager
	subs map[journalKey]*journalSub
	// nPayload and nAttached count the subscribers that want a JSON
	// payload and those in this broker that take the entry attached
	// (wire.JournalEntry): each form is built only if someone wants it.
	nPayload, nAttached int
	// want caches, for payload (0) and attached (1) subscribers, which
	// event names any of them takes: an event none takes is not built
	// (a tool following only clean events costs one entry per job).
	// Reset when a subscription starts or ends.
	want    [2]wantSet
	pending []journalEntry
	index   map[jobid.ID]int // each job's entry in pending
	lastLen int              // entries the last take returned
}

// maxPendingRoom bounds the room pending entries start with.
const maxPendingRoom = 8192

// journalKey names a subscription: its requestor's route and matchtag
// (a client may hold several streams).
type journalKey struct {
	route    string
	matchtag uint32
}

type journalSub struct {
	r        *flux.Request
	attached bool
	filter   *eventFilter // nil: every event
}

// eventFilter is a subscriber's allow and deny lists of event names
// (flux-core's {"allow":{"name":1,...}, "deny":{...}}): an event passes
// if allow is absent or names it, and deny does not.
type eventFilter struct {
	allow, deny map[string]bool
}

func (f *eventFilter) pass(name string) bool {
	if f == nil {
		return true
	}
	if f.allow != nil && !f.allow[name] {
		return false
	}
	return !f.deny[name]
}

// parseFilter reads an "allow" or "deny" member: an object whose keys
// are event names.
func parseFilter(key string, raw json.RawMessage) (map[string]bool, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("events-journal: %s must be an object of event names", key)
	}
	set := make(map[string]bool, len(m))
	for name := range m {
		set[name] = true
	}
	return set, nil
}

// journalEntry is one response: a job's events (encoded eventlog
// entries for payloads, decoded for attached subscribers), with the
// jobspec when they include submit and R when they include alloc.
type journalEntry struct {
	id      jobid.ID
	events  [][]byte
	names   []string // of events, for filtered subscribers
	evs     []wire.JournalEvent
	jobspec json.RawMessage
	R       json.RawMessage
}

func newJournal(m *manager) *journal {
	return &journal{m: m, subs: make(map[journalKey]*journalSub), index: make(map[jobid.ID]int)}
}

// add queues an event: its time, name and context, and its eventlog
// entry without the newline.
func (jl *journal) add(j *job, ts float64, name string, ctx []byte, ev []byte) {
	payload := jl.nPayload > 0 && jl.wants(false, name)
	attached := jl.nAttached > 0 && jl.wants(true, name)
	if !payload && !attached {
		return
	}
	e := jl.entry(j.ID)
	if payload {
		e.addPayload(ev, name)
	}
	if attached {
		e.addAttached(wire.JournalEvent{Timestamp: ts, Name: name, Context: ctx})
	}
	switch name {
	case "submit":
		e.jobspec = j.Raw
	case "alloc":
		e.R = j.R
	case "resource-update":
		if bytes.Contains(ctx, []byte(`"R_delta_`)) {
			e.R = j.R // RFC 51: the job's resources changed
		}
	}
}

// entryRoom is the room a job's event lists start with: its events in
// one commit are few (submit, validate, depend and priority at most,
// often).
const entryRoom = 4

func (e *journalEntry) addPayload(ev []byte, name string) {
	if e.events == nil {
		e.events, e.names = make([][]byte, 0, entryRoom), make([]string, 0, entryRoom)
	}
	e.events = append(e.events, ev)
	e.names = append(e.names, name)
}

func (e *journalEntry) addAttached(ev wire.JournalEvent) {
	if e.evs == nil {
		e.evs = make([]wire.JournalEvent, 0, entryRoom)
	}
	e.evs = append(e.evs, ev)
}

// wantSet is what the subscribers of one kind take (see journal.want).
type wantSet struct {
	valid bool
	all   bool // one of them takes every event
	names map[string]bool
}

// wants reports whether a subscriber of the kind (attached or payload)
// takes events named name.
func (jl *journal) wants(attached bool, name string) bool {
	w := &jl.want[0]
	if attached {
		w = &jl.want[1]
	}
	if !w.valid {
		*w = wantSet{valid: true, names: make(map[string]bool)}
		for _, sub := range jl.subs {
			w.all = w.all || sub.attached == attached && sub.filter == nil
		}
	}
	if w.all {
		return true
	}
	v, ok := w.names[name]
	if !ok {
		for _, sub := range jl.subs {
			v = v || sub.attached == attached && sub.filter.pass(name)
		}
		w.names[name] = v
	}
	return v
}

func (jl *journal) entry(id jobid.ID) *journalEntry {
	i, ok := jl.index[id]
	if !ok {
		if jl.pending == nil {
			// room for as many entries as the last commit had: the
			// entries of a burst are not copied again and again as
			// the slice grows
			jl.pending = make([]journalEntry, 0, max(jl.lastLen, 16))
		}
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
	payload := jl.nPayload > 0 && jl.wants(false, "annotations")
	attached := jl.nAttached > 0 && jl.wants(true, "annotations")
	if !payload && !attached {
		return
	}
	e := jl.entry(j.ID)
	if payload {
		e.addPayload(appendEvent(nil, now, "annotations", ctx), "annotations")
	}
	if attached {
		e.addAttached(wire.JournalEvent{Timestamp: now, Name: "annotations", Context: ctx})
	}
	jl.m.batch.Kick()
}

// take returns the entries queued so far (they are sent once committed).
func (jl *journal) take() []journalEntry {
	p := jl.pending
	jl.pending = nil
	jl.lastLen = min(len(p), maxPendingRoom)
	clear(jl.index)
	return p
}

// appendEntry encodes a response: {"id":N,"events":[...],"jobspec":J,
// "R":R}, jobspec and R left out when empty.
func appendEntry(b []byte, e *journalEntry) []byte {
	return wire.AppendJournalEntry(b, e.id, e.events, e.jobspec, e.R)
}

func (jl *journal) send(entries []journalEntry) {
	if len(jl.subs) == 0 {
		return
	}
	for i := range entries {
		e := &entries[i]
		// one payload (NUL-terminated as JSON payloads are) and one
		// attachment, each shared by every subscriber that takes it
		// unfiltered: messages are not modified once sent
		var buf []byte
		var att *wire.JournalEntry
		for _, sub := range jl.subs {
			switch {
			case sub.filter != nil:
				jl.sendFiltered(sub, e)
			case sub.attached && len(e.evs) > 0:
				if att == nil {
					att = &wire.JournalEntry{ID: e.id, Events: e.evs, Jobspec: e.jobspec, R: e.R}
				}
				sub.r.RespondAttached(nil, att)
			case !sub.attached && len(e.events) > 0:
				if buf == nil {
					buf = payload(e)
				}
				sub.r.RespondRaw(buf)
			}
		}
	}
}

// payload encodes an entry as a response payload.
func payload(e *journalEntry) []byte {
	size := 64 + len(e.jobspec) + len(e.R)
	for _, ev := range e.events {
		size += len(ev) + 1
	}
	return append(appendEntry(make([]byte, 0, size), e), 0)
}

// sendFiltered sends a subscriber the events of e its filter passes (the
// jobspec only with submit, R only with alloc), if any.
func (jl *journal) sendFiltered(sub *journalSub, e *journalEntry) {
	if sub.attached {
		evs, submit, alloc := passing(e.evs, func(k int) string { return e.evs[k].Name }, sub.filter)
		if len(evs) > 0 {
			out := wire.JournalEntry{ID: e.id, Events: evs}
			if submit {
				out.Jobspec = e.jobspec
			}
			if alloc {
				out.R = e.R
			}
			sub.r.RespondAttached(nil, &out)
		}
		return
	}
	if out := e.filtered(sub.filter); len(out.events) > 0 {
		sub.r.RespondRaw(payload(&out))
	}
}

// filtered returns the part of a payload entry that f passes: its events,
// the jobspec if submit is among them and R if alloc is.
func (e *journalEntry) filtered(f *eventFilter) journalEntry {
	out := journalEntry{id: e.id}
	var submit, alloc bool
	out.events, submit, alloc = passing(e.events, func(k int) string { return e.names[k] }, f)
	if submit {
		out.jobspec = e.jobspec
	}
	if alloc {
		out.R = e.R
	}
	return out
}

// passing returns the events of evs (the k-th named name(k)) that f
// passes, and whether submit and alloc are among them. Nothing is
// allocated when none passes, the common case of a narrow filter.
func passing[E any](evs []E, name func(k int) string, f *eventFilter) (kept []E, submit, alloc bool) {
	for k, ev := range evs {
		n := name(k)
		if !f.pass(n) {
			continue
		}
		kept = append(kept, ev)
		submit = submit || n == "submit"
		alloc = alloc || n == "alloc"
	}
	return kept, submit, alloc
}

// eventName reads the "name" of an encoded event ("" if it has none).
func eventName(line []byte) string {
	val, _, _ := jsonwire.Member(line, "name")
	name, _ := jsonwire.String(val)
	return name
}

// subscribe handles job-manager.events-journal: with full=true, the
// history of jobs in memory comes first, then a sentinel {id:-1}.
func (jl *journal) subscribe(r *flux.Request) {
	var req struct {
		Full bool `json:"full"`
		// fluxgo: a module of this broker takes the entries attached
		// (wire.JournalEntry), the backlog aside
		Attached bool            `json:"attached"`
		Allow    json.RawMessage `json:"allow"` // {"name":1, ...}
		Deny     json.RawMessage `json:"deny"`
	}
	if r.Decode(&req) != nil {
		return
	}
	var filter *eventFilter
	if req.Allow != nil || req.Deny != nil {
		allow, err := parseFilter("allow", req.Allow)
		if err == nil {
			var deny map[string]bool
			if deny, err = parseFilter("deny", req.Deny); err == nil {
				filter = &eventFilter{allow: allow, deny: deny}
			}
		}
		if err != nil {
			r.Errorf(syscall.EPROTO, "%v", err)
			return
		}
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
				if req.Attached && j.State == jobtap.StateInactive {
					// job-list (in this broker) learns the inactive jobs it
					// may have missed while it was not subscribed (it reads
					// them from the KVS): an entry without events
					r.Respond(json.RawMessage(`{"events":[],"id":` + strconv.FormatUint(uint64(j.ID), 10) + `}`))
				}
				continue
			}
			e := journalEntry{id: j.ID, jobspec: j.Raw, R: j.R}
			for _, line := range splitLines(j.eventlog) {
				if jsonwire.Valid(line) {
					e.events = append(e.events, line)
					e.names = append(e.names, eventName(line))
				}
			}
			// the scheduler's annotations of a pending job are sent as
			// they change, never written: a late subscriber gets them here
			if len(j.annot) > 0 && len(e.events) > 0 {
				if ctx, err := appendValue([]byte(`{"annotations":`), j.annot); err == nil {
					e.events = append(e.events, appendEvent(nil, jl.m.now(), "annotations", append(ctx, '}')))
					e.names = append(e.names, "annotations")
				}
			}
			if filter != nil {
				// the backlog's jobspec and R come with submit and alloc
				if e = e.filtered(filter); len(e.events) == 0 {
					continue
				}
			}
			r.Respond(json.RawMessage(appendEntry(nil, &e)))
		}
		r.Respond(json.RawMessage(wire.JournalEnd))
	}
	key := journalKey{r.Msg.RouteString(), r.Msg.Matchtag}
	jl.drop(key)
	jl.subs[key] = &journalSub{r: r, attached: req.Attached, filter: filter}
	jl.want = [2]wantSet{}
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
	jl.want = [2]wantSet{}
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
