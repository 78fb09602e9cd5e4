package joblist

import (
	"encoding/json"
	"errors"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// journalEntry is one job-manager.events-journal response.
type journalEntry struct {
	ID      int64           `json:"id"`
	Events  []event         `json:"events"`
	Jobspec json.RawMessage `json:"jobspec"`
	R       json.RawMessage `json:"R"`
}

// subscribe starts (or restarts) the journal stream with its backlog. If
// the job manager is not loaded yet, it retries with a growing delay.
func (s *service) subscribe() {
	if s.ctx.Err() != nil || s.journal != nil {
		return // stopping, or subscribed already (online event and retry)
	}
	// job-list runs in the job manager's broker: it takes the entries
	// decoded (wire.JournalEntry), not as JSON to parse again; the backlog
	// comes as payloads
	f, err := s.h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"full": true, "attached": true}, flux.Streaming)
	if err != nil {
		s.retrySubscribe(err)
		return
	}
	s.journal = f
	inBacklog := true
	s.backlogSeen = map[jobid.ID]struct{}{}
	s.backlogInactive = nil
	f.Then(func(m *flux.Message, err error) {
		if err != nil {
			if s.journal == f {
				s.journal = nil
			}
			s.catchUp()
			s.retrySubscribe(err)
			return
		}
		s.retryDelay = 0
		att, ok := m.Attached.(*wire.JournalEntry)
		end := false
		if !ok {
			var w wire.JournalEntry
			var err error
			if w, end, err = wire.DecodeJournalEntry(m.JSON()); err != nil {
				s.log.Error("malformed events-journal response", "err", err)
				return
			}
			att = &w
		}
		e := fromAttached(att)
		if end {
			inBacklog = false
			s.backlogComplete()
			return
		}
		if inBacklog && e.ID >= 0 {
			s.backlogSeen[jobid.ID(e.ID)] = struct{}{}
			if len(e.Events) == 0 {
				// inactive in the job manager: read from the KVS if
				// this index never heard of it (reconcile)
				s.backlogInactive = append(s.backlogInactive, jobid.ID(e.ID))
			}
		}
		s.applyEntry(&e, inBacklog)
	})
}

// fromAttached reads an entry the job manager handed over (in-process,
// or decoded from a response).
func fromAttached(a *wire.JournalEntry) journalEntry {
	e := journalEntry{ID: int64(a.ID), Events: make([]event, len(a.Events)), Jobspec: a.Jobspec, R: a.R}
	for i, ev := range a.Events {
		e.Events[i] = event{Timestamp: ev.Timestamp, Name: ev.Name, Context: ev.Context}
	}
	return e
}

func (s *service) retrySubscribe(err error) {
	if s.ctx.Err() != nil {
		return
	}
	if errors.Is(err, syscall.ENOSYS) {
		s.log.Debug("job manager not loaded yet: retrying events-journal")
	} else {
		s.log.Warn("events-journal ended: resubscribing", "err", err)
	}
	switch {
	case s.retryDelay == 0:
		s.retryDelay = 0.05
	case s.retryDelay < 2:
		s.retryDelay *= 2
	}
	time.AfterFunc(time.Duration(s.retryDelay*float64(time.Second)), func() {
		s.h.Post(s.subscribe)
	})
}

// backlogComplete runs once the journal backlog has been applied: the
// KVS restore of older inactive jobs starts (first time only).
func (s *service) backlogComplete() {
	if s.backlogDone {
		s.reconcile()
		return
	}
	s.backlogDone = true
	if !s.cfg.NoRestore {
		s.startRestore()
	}
	s.setReady()
}

// applyEntry applies a journal entry to the job's record.
func (s *service) applyEntry(e *journalEntry, backlog bool) {
	if e.ID < 0 {
		return
	}
	if !backlog && s.holdEntry(e) { // pause.go
		return
	}
	id := jobid.ID(e.ID)
	r := s.idx.jobs[id]
	if r != nil && r.State == job.StateInactive {
		return // nothing changes an inactive job (it may come from the KVS)
	}
	if r != nil && backlog && len(e.Events) > 0 && e.Events[0].Name == "submit" {
		// a resubscribed backlog carries the whole eventlog: rebuild
		// (an entry without it, e.g. annotations only, adds to the
		// record: dropping the record then would lose the job)
		s.idx.remove(r)
		r = nil
	}
	if r == nil {
		if len(e.Events) == 0 || (!backlog && e.Events[0].Name != "submit") {
			return
		}
		r = s.idx.slab.get(id)
		s.idx.jobs[id] = r
	}
	if len(e.Jobspec) > 0 {
		r.applySpec(s.specs.Get(e.Jobspec, summarizeSpec))
	}
	if len(e.R) > 0 {
		r.setR(e.R)
	}
	prio := r.priority
	requeued := false // a backlog of a requeued job: R is its last run's
	for i := range e.Events {
		ev := &e.Events[i]
		if !r.apply(ev) {
			s.idx.remove(r)
			s.failWaiters(id)
			return
		}
		switch ev.Name {
		case "alloc":
			s.allocAnnotations(r, ev.Context)
			if requeued && len(e.R) > 0 {
				r.setR(e.R) // the requeue event forgot the first run's
			}
		case "requeue":
			requeued = true
		}
	}
	if r.State == job.StateNew {
		return // listed once validated
	}
	s.idx.relist(r, r.priority != prio)
	s.checkWaiters(id)
}

// allocAnnotations keeps the annotations an alloc event carries (the
// scheduler's final word, e.g. resource_summary).
func (s *service) allocAnnotations(r *record, ctx json.RawMessage) {
	if len(ctx) == 0 {
		return
	}
	var ann []byte
	err := jsonwire.Object(ctx, func(key, val []byte) error {
		if string(key) == "annotations" {
			ann = val
		}
		return nil
	})
	if err == nil && len(ann) > 0 {
		r.setAnnotations(ann)
	}
}

// reconcile runs after the backlog of a new subscription (the job
// manager was reloaded): a job this index holds as active that the new
// job manager did not list is no longer active (it ended while there
// was no journal, e.g. with a restart exception as the new job manager
// restored it), so its record is read again from the KVS; so is an
// inactive job of the new job manager the index never heard of (it was
// submitted and ended while job-list was not subscribed).
func (s *service) reconcile() {
	var stale []jobid.ID
	inactive := make(map[jobid.ID]bool, len(s.backlogInactive))
	for _, id := range s.backlogInactive {
		inactive[id] = true
	}
	for id, r := range s.idx.jobs {
		_, seen := s.backlogSeen[id]
		if r.State != job.StateInactive && (!seen || inactive[id]) {
			stale = append(stale, id)
		}
	}
	// and the jobs that came and went while there was no journal
	for _, id := range s.backlogInactive {
		if s.idx.jobs[id] == nil {
			stale = append(stale, id)
		}
	}
	s.backlogInactive = nil
	if len(stale) == 0 {
		s.caughtUp()
		return
	}
	ctx := s.ctx
	go func() {
		var recs []*record
		for _, id := range stale {
			dir, _ := id.Encode(jobid.KVS)
			rec, err := readJob(ctx, s.h, dir)
			if err != nil || rec == nil {
				continue // not inactive after all, or gone: left as it is
			}
			recs = append(recs, rec)
		}
		s.h.Post(func() {
			for _, rec := range recs {
				if old := s.idx.jobs[rec.id]; old != nil && old.State != job.StateInactive {
					s.idx.remove(old)
				}
			}
			s.insertRestored(recs)
			if len(recs) > 0 {
				s.log.Info("jobs that ended while the job manager was away read again from the KVS", "jobs", len(recs))
			}
			s.caughtUp()
		})
	}()
}

// catchUpLimit bounds how long requests wait for job-list to catch up
// with a job manager that came back.
const catchUpLimit = 3 * time.Second

// catchUp: the journal was lost (the job manager was reloaded or went
// away). Requests wait until the next subscription's backlog and the
// reconcile are done, so that a listing right after a reload does not
// show jobs as they were before it; at most catchUpLimit, then they are
// served with what is known.
func (s *service) catchUp() {
	if !s.ready {
		return
	}
	s.ready = false
	s.catchUpTimer = time.AfterFunc(catchUpLimit, func() {
		s.h.Post(func() {
			if !s.ready {
				s.log.Warn("the job manager is away: serving what is known (it may be out of date)")
				s.caughtUp()
			}
		})
	})
}

// caughtUp serves the requests that waited for a catch-up.
func (s *service) caughtUp() {
	if s.catchUpTimer != nil {
		s.catchUpTimer.Stop()
		s.catchUpTimer = nil
	}
	s.setReady()
}

// jmOnline: a job manager loaded; subscribe at once rather than at the
// next retry.
func (s *service) jmOnline(*flux.Message) {
	if s.journal == nil {
		s.retryDelay = 0
		s.subscribe()
	}
}
