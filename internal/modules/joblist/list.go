package joblist

import (
	"encoding/json"
	"slices"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// listRequest is a job-list.list request, with the legacy fields older
// clients send instead of a constraint.
type listRequest struct {
	MaxEntries *int            `json:"max_entries"`
	Attrs      json.RawMessage `json:"attrs"`
	Since      float64         `json:"since"`
	Constraint json.RawMessage `json:"constraint"`

	Userid  *uint32 `json:"userid"`
	States  int     `json:"states"`
	Results int     `json:"results"`
	Name    string  `json:"name"`
	Queue   string  `json:"queue"`
}

// legacyConstraint builds a constraint from the legacy request fields.
func (q *listRequest) legacyConstraint() json.RawMessage {
	var and []any
	if q.Userid != nil && *q.Userid != ^uint32(0) {
		and = append(and, map[string]any{"userid": []uint32{*q.Userid}})
	}
	if q.Name != "" {
		and = append(and, map[string]any{"name": []string{q.Name}})
	}
	if q.Queue != "" {
		and = append(and, map[string]any{"queue": []string{q.Queue}})
	}
	if q.States != 0 {
		and = append(and, map[string]any{"states": []int{q.States}})
	}
	if q.Results != 0 {
		and = append(and, map[string]any{"results": []int{q.Results}})
	}
	if and == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"and": and})
	return b
}

// attrNames reads a request's attrs: an array (EPROTO otherwise) of
// strings (EINVAL otherwise), flux-core's errors.
func attrNames(r *flux.Request, raw json.RawMessage) ([]string, bool) {
	var list []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		protoErr(r, "attrs must be an array")
		return nil, false
	}
	names := make([]string, len(list))
	for i, v := range list {
		if json.Unmarshal(v, &names[i]) != nil {
			r.Errorf(syscall.EINVAL, "attr has no string value")
			return nil, false
		}
	}
	return names, true
}

func protoErr(r *flux.Request, msg string) {
	r.Errorf(syscall.EPROTO, "invalid payload: %s", msg)
}

// handleList answers job-list.list: matching jobs, pending first (by
// priority), then running (most recently started first), then inactive
// (most recently finished first). A streaming request gets the jobs in
// chunks, "version":1 in the first, then ENODATA.
func (s *service) handleList(r *flux.Request) {
	if s.deferUntilReady(r) {
		return
	}
	var q listRequest
	if r.Decode(&q) != nil {
		return
	}
	if q.MaxEntries == nil {
		protoErr(r, "max_entries is required")
		return
	}
	if *q.MaxEntries < 0 {
		protoErr(r, "max_entries < 0 not allowed")
		return
	}
	names, ok := attrNames(r, q.Attrs)
	if !ok {
		return
	}
	if q.Since < 0 {
		protoErr(r, "since < 0.0 not allowed")
		return
	}
	attrs, err := parseAttrs(names)
	if err != nil {
		r.RespondError(err)
		return
	}
	raw := q.Constraint
	if len(raw) == 0 {
		raw = q.legacyConstraint()
	}
	c, err := compileConstraint(raw)
	if err != nil {
		r.RespondError(err)
		return
	}
	match := c.match
	if s.cfg.Private && !r.IsOperator() {
		uid := r.Userid()
		match = func(rec *record) bool { return rec.userid == uid && c.match(rec) }
	}
	s.sendJobs(r, attrs, c.states, match, *q.MaxEntries, q.Since)
}

func (s *service) sendJobs(r *flux.Request, attrs attrList, states job.State, match matcher, max int, since float64) {
	streaming := r.Msg.IsStreaming()
	chunk := s.cfg.ChunkJobs
	if !streaming {
		chunk = 0
	}
	buf := make([]byte, 0, 64*1024)
	buf = append(buf, `{"jobs":[`...)
	n, inChunk, first := 0, 0, true
	flush := func() {
		buf = append(buf, ']')
		if first && streaming {
			buf = append(buf, `,"version":1`...)
		}
		buf = append(buf, '}')
		size := len(buf) + len(buf)/8 + 1
		r.Respond(flux.JSONBuffer(buf)) // handed over: the next chunk gets a new buffer
		first = false
		buf = append(make([]byte, 0, size), `{"jobs":[`...)
		inChunk = 0
	}
	lists := []struct {
		l     *orderedList
		state job.State
	}{
		{&s.idx.pending, job.StatePending},
		{&s.idx.running, job.StateRunning},
		{&s.idx.inactive, job.StateInactive},
	}
loop:
	for _, ls := range lists {
		if states&ls.state == 0 {
			continue
		}
		recs := ls.l.ordered()
		for i := len(recs) - 1; i >= 0; i-- {
			rec := recs[i]
			if ls.state == job.StateInactive && rec.TInactive <= since {
				break
			}
			if !match(rec) {
				continue
			}
			if inChunk > 0 {
				buf = append(buf, ',')
			}
			buf = appendJob(buf, rec, attrs)
			n++
			inChunk++
			if max > 0 && n >= max {
				break loop
			}
			if chunk > 0 && inChunk >= chunk {
				flush()
			}
		}
	}
	if inChunk > 0 || (first && !streaming) {
		// a stream with no jobs is just its end (flux-core)
		flush()
	}
	if streaming {
		r.EndStream()
	}
}

// handleListAttrs answers job-list.list-attrs.
func (s *service) handleListAttrs(r *flux.Request) {
	r.Respond(map[string]any{"attrs": append(job.Attrs(), job.AttrAll)})
}

// idWaiter is a job-list.list-id request waiting for its job to appear
// or to reach a state.
type idWaiter struct {
	r     *flux.Request
	attrs attrList
	state job.State
}

// handleModuleStats answers job-list.stats-get (flux module stats
// job-list): flux-core's idsync counters, the jobs list-id requests are
// waiting for now (waits), and how many jobs job-list holds.
func (s *service) handleModuleStats(r *flux.Request) {
	// waits counts the jobs waited for (several requests for one job
	// are one wait, as in flux-core)
	var pending, running, inactive int
	for _, rec := range s.idx.jobs {
		switch {
		case rec.State&job.StatePending != 0:
			pending++
		case rec.State&job.StateRunning != 0:
			running++
		case rec.State == job.StateInactive:
			inactive++
		}
	}
	r.Respond(map[string]any{
		"idsync": map[string]any{"lookups": s.idLookups, "waits": len(s.waiters)},
		"jobs":   map[string]any{"pending": pending, "running": running, "inactive": inactive},
	})
}

// handleListID answers job-list.list-id, waiting for the job if job-list
// has not seen it yet (it may not have reached the journal), or until it
// reaches the requested state.
func (s *service) handleListID(r *flux.Request) {
	if s.deferUntilReady(r) {
		return
	}
	var q struct {
		ID    *jobid.ID       `json:"id"`
		Attrs json.RawMessage `json:"attrs"`
		State job.State       `json:"state"`
	}
	if r.Decode(&q) != nil {
		return
	}
	if q.ID == nil {
		protoErr(r, "id is required")
		return
	}
	names, ok := attrNames(r, q.Attrs)
	if !ok {
		return
	}
	if q.State&^(job.StateActive|job.StateInactive) != 0 {
		protoErr(r, "invalid state specified")
		return
	}
	attrs, err := parseAttrs(names)
	if err != nil {
		r.RespondError(err)
		return
	}
	s.idLookups++
	w := &idWaiter{r: r, attrs: attrs, state: q.State}
	if s.answerWaiter(*q.ID, w) {
		return
	}
	id := *q.ID
	if _, known := s.idx.jobs[id]; !known {
		// the job may not exist at all: ask the KVS
		s.checkExists(id, w)
		return
	}
	s.waiters[uint64(id)] = append(s.waiters[uint64(id)], w)
}

// checkExists looks for the job's KVS directory: absent means ENOENT,
// present means the journal has not delivered it yet, so wait.
func (s *service) checkExists(id jobid.ID, w *idWaiter) {
	f, err := s.h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{
		"key": job.KVSKey(id, ""), "namespace": "primary", "flags": kvsReadDir}, 0)
	if err != nil {
		w.r.RespondError(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if s.answerWaiter(id, w) {
			return
		}
		if err != nil {
			if flux.ErrnoOf(err) == syscall.ENOENT {
				w.r.Errorf(syscall.ENOENT, "job id %s not found: No such file or directory", id.String())
			} else {
				w.r.RespondError(err)
			}
			return
		}
		s.waiters[uint64(id)] = append(s.waiters[uint64(id)], w)
	})
}

// answerWaiter responds to w if its job is known and in a suitable
// state. Inactive jobs are always returned (a canceled pending job never
// reaches RUN).
func (s *service) answerWaiter(id jobid.ID, w *idWaiter) bool {
	rec, ok := s.idx.jobs[id]
	if !ok || rec.State == job.StateNew {
		return false
	}
	if rec.State != job.StateInactive && w.state != 0 && rec.Entered&w.state == 0 {
		return false
	}
	if s.cfg.Private && !w.r.IsOperator() && w.r.Userid() != rec.userid {
		w.r.Errorf(syscall.EPERM, "job %s belongs to another user", id.String())
		return true
	}
	b := append([]byte(`{"job":`), appendJob(nil, rec, w.attrs)...)
	b = append(b, '}')
	w.r.Respond(json.RawMessage(b))
	return true
}

func (s *service) checkWaiters(id jobid.ID) {
	ws := s.waiters[uint64(id)]
	if len(ws) == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if !s.answerWaiter(id, w) {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(s.waiters, uint64(id))
	} else {
		s.waiters[uint64(id)] = kept
	}
}

func (s *service) checkAllWaiters() {
	for id := range s.waiters {
		s.checkWaiters(jobid.ID(id))
	}
}

// failWaiters answers ENOENT to list-id requests for a job that was
// invalidated.
func (s *service) failWaiters(id jobid.ID) {
	for _, w := range s.waiters[uint64(id)] {
		w.r.Errorf(syscall.ENOENT, "job %s was not accepted", id.String())
	}
	delete(s.waiters, uint64(id))
}

// handleDisconnect drops the waiting requests of a departed client.
func (s *service) handleDisconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	for id, ws := range s.waiters {
		kept := ws[:0]
		for _, w := range ws {
			if w.r.Msg.RouteString() != route {
				kept = append(kept, w)
			}
		}
		if len(kept) == 0 {
			delete(s.waiters, id)
		} else {
			s.waiters[id] = kept
		}
	}
	d := s.deferred[:0]
	for _, q := range s.deferred {
		if q.Msg.RouteString() != route {
			d = append(d, q)
		}
	}
	s.deferred = d
}

// handleStats answers job-list.job-stats with counts per state and
// result (what flux jobs --stats prints), for all jobs and, in
// "queues", for the jobs of each named queue.
func (s *service) handleStats(r *flux.Request) {
	if s.deferUntilReady(r) {
		return
	}
	var all jobStats
	queues := map[string]*jobStats{}
	for _, rec := range s.idx.jobs {
		if rec.State == job.StateNew {
			continue
		}
		all.add(rec)
		if q := rec.lab().queue; q != "" {
			qs := queues[q]
			if qs == nil {
				qs = new(jobStats)
				queues[q] = qs
			}
			qs.add(rec)
		}
	}
	for q := range s.purgedByQueue {
		if queues[q] == nil {
			queues[q] = new(jobStats)
		}
	}
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	slices.Sort(names)
	qlist := make([]any, 0, len(names))
	for _, q := range names {
		m := queues[q].payload()
		m["name"] = q
		m["inactive_purged"] = s.purgedByQueue[q]
		qlist = append(qlist, m)
	}
	resp := all.payload()
	resp["inactive_purged"] = s.purged
	resp["queues"] = qlist
	r.Respond(resp)
}

// jobStats counts jobs by state and, for inactive ones, by result.
type jobStats struct {
	states                                 [6]int // depend, priority, sched, run, cleanup, inactive
	successful, failed, canceled, timedout int
}

var statsStateKeys = [6]string{"depend", "priority", "sched", "run", "cleanup", "inactive"}

func (st *jobStats) add(rec *record) {
	key := stateKey(rec.State)
	st.states[slices.Index(statsStateKeys[:], key)]++
	if rec.State != job.StateInactive {
		return
	}
	switch rec.Result {
	case job.ResultCompleted:
		st.successful++
	case job.ResultCanceled:
		st.canceled++
	case job.ResultTimeout:
		st.timedout++
	default:
		st.failed++
	}
}

// payload is the counts as job-list.job-stats gives them (flux-core's
// keys); the caller adds inactive_purged.
func (st *jobStats) payload() map[string]any {
	states := map[string]int{}
	total := 0
	for i, k := range statsStateKeys {
		states[k] = st.states[i]
		total += st.states[i]
	}
	states["total"] = total
	return map[string]any{
		"job_states": states,
		"successful": st.successful,
		"failed":     st.failed,
		"canceled":   st.canceled,
		"timeout":    st.timedout,
	}
}

func stateKey(st job.State) string {
	switch st {
	case job.StateDepend:
		return "depend"
	case job.StatePriority:
		return "priority"
	case job.StateSched:
		return "sched"
	case job.StateRun:
		return "run"
	case job.StateCleanup:
		return "cleanup"
	}
	return "inactive"
}
