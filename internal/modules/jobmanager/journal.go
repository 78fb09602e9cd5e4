package jobmanager

import (
	"encoding/json"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// journal streams every posted event to subscribers of
// job-manager.events-journal once the event is committed to the KVS.
type journal struct {
	m       *manager
	subs    map[string]*flux.Request // by requestor route
	pending []journalEntry
}

type journalEntry struct {
	ID      jobid.ID        `json:"id"`
	Events  []event         `json:"events"`
	Jobspec json.RawMessage `json:"jobspec,omitempty"`
	R       json.RawMessage `json:"R,omitempty"`
}

func newJournal(m *manager) *journal {
	return &journal{m: m, subs: make(map[string]*flux.Request)}
}

func (jl *journal) add(j *job, ev event) {
	if len(jl.subs) == 0 {
		return
	}
	n := len(jl.pending)
	if n > 0 && jl.pending[n-1].ID == j.ID && ev.Name != "submit" && ev.Name != "alloc" {
		jl.pending[n-1].Events = append(jl.pending[n-1].Events, ev)
		return
	}
	e := journalEntry{ID: j.ID, Events: []event{ev}}
	switch ev.Name {
	case "submit":
		e.Jobspec = j.Raw
	case "alloc":
		e.R = j.R
	}
	jl.pending = append(jl.pending, e)
}

// annotate sends a journal-only "annotations" event (not written to the
// eventlog) so listings can show scheduler annotations of pending jobs.
func (jl *journal) annotate(j *job) {
	if len(jl.subs) == 0 {
		return
	}
	ctx, _ := json.Marshal(map[string]any{"annotations": j.annot})
	jl.pending = append(jl.pending, journalEntry{ID: j.ID, Events: []event{{Timestamp: jl.m.now(), Name: "annotations", Context: ctx}}})
	jl.m.batch.kick()
}

// take returns the entries queued so far (they are sent once committed).
func (jl *journal) take() []journalEntry {
	p := jl.pending
	jl.pending = nil
	return p
}

func (jl *journal) send(entries []journalEntry) {
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		for _, r := range jl.subs {
			r.Respond(json.RawMessage(b))
		}
	}
}

// subscribe handles job-manager.events-journal: with full=true, the
// history of jobs in memory comes first, then a sentinel {id:-1}.
func (jl *journal) subscribe(r *flux.Request) {
	var req struct {
		Full bool `json:"full"`
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
			e := journalEntry{ID: j.ID, Jobspec: j.Raw, R: j.R}
			for _, line := range splitLines(j.eventlog) {
				var ev event
				if json.Unmarshal(line, &ev) == nil {
					e.Events = append(e.Events, ev)
				}
			}
			r.Respond(e)
		}
		r.Respond(map[string]any{"id": -1, "events": []any{}})
	}
	jl.subs[r.Msg.RouteString()] = r
}

func (jl *journal) cancel(route string) {
	if r, ok := jl.subs[route]; ok {
		delete(jl.subs, route)
		r.EndStream()
	}
}

func (jl *journal) disconnect(route string) {
	delete(jl.subs, route)
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
