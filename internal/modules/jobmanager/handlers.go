package jobmanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/jobtap/builtin"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

func (m *manager) register() {
	h := m.h
	h.HandleFunc("job-manager.submit", m.handleSubmit)
	h.HandleFunc("job-manager.raise", m.handleRaise)
	h.HandleFunc("job-manager.preempt", m.handlePreempt)              // requeue.go
	h.HandleFunc("job-manager.realloc", m.handleRealloc)              // realloc.go
	h.HandleFunc("job-manager.realloc-cancel", m.handleReallocCancel) // realloc.go
	h.HandleFunc("job-manager.memo", m.handleMemo)
	h.HandleFunc("job-manager.raiseall", m.handleRaiseAll)
	h.HandleFunc("job-manager.killall", m.handleKillAll)
	h.HandleFunc("job-manager.getattr", m.handleGetattr)
	h.HandleFunc("job-manager.kill", m.handleKill)
	h.HandleFunc("job-manager.urgency", m.handleUrgency)
	h.HandleFunc("job-manager.update", m.handleUpdate)
	h.HandleFunc("job-manager.purge", m.handlePurge)
	h.HandleFunc("job-manager.config-reload", m.configReload)
	h.HandleFunc("job-manager.wait", m.handleWait)
	h.HandleFunc("job-manager.jobtap", m.handleJobtap)
	h.HandleFunc("job-manager.jobtap-query", m.handleJobtapQuery)
	h.HandleFunc("job-manager.events-journal", m.journal.subscribe)
	h.HandleFunc("job-manager.sched-hello", m.sched.hello)
	h.HandleFunc("job-manager.sched-ready", m.sched.readyRequest)
	h.HandleFunc("job-manager.alloc-query", m.sched.allocQuery)
	h.HandleFunc("job-manager.exec-hello", m.exec.hello)
	h.HandleFunc("job-manager.stats-get", m.handleStats)
	h.HandleFunc("job-manager.list", m.handleList) // list.go
	h.HandleFunc("job-manager.getinfo", func(r *flux.Request) {
		r.Respond(map[string]any{"max_jobid": m.maxID})
	})
	h.HandleFunc("job-manager.disconnect", m.handleDisconnect)
	m.queues.register()
	h.HandleFunc("job-manager.*", m.handlePluginMethod)
}

// handleSubmit accepts jobs from job-ingest, runs jobtap validation, and
// starts them on their way. fluxgo's job-ingest sends the jobs' records
// (wire.SubmitRecord), written here with the first events; flux-core's
// has recorded them in the KVS already.
func (m *manager) handleSubmit(r *flux.Request) {
	// job-ingest hands over the jobspecs it parsed and their text
	// (in-process only)
	att, _ := r.Msg.Attached.(*wire.SubmitAttachment)
	jobs, err := wire.DecodeSubmitRequest(r.Msg.JSON(), att != nil)
	if err == nil && att != nil && (len(att.Specs) != len(jobs) || len(att.Raw) != len(jobs)) {
		err = fmt.Errorf("%d jobs but %d jobspecs attached", len(jobs), len(att.Raw))
	}
	record := len(jobs) > 0 && jobs[0].Record != nil
	for i := range jobs {
		if err == nil && (jobs[i].Record != nil) != record {
			err = fmt.Errorf("jobs: either every job has a record or none does")
		}
	}
	if err != nil {
		r.Errorf(syscall.EPROTO, "job-manager.submit: %v", err)
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-manager.submit is for job-ingest only")
		return
	}
	var resp wire.SubmitResponse
	reject := resp.Reject
	var parsed []*jobspec.Jobspec
	if att != nil {
		parsed = att.Specs
		for i := range jobs {
			if jobs[i].Jobspec == nil {
				jobs[i].Jobspec = att.Raw[i]
			}
		}
	}
	var added []*job
	for i, sj := range jobs {
		m.ensure(sj.ID)
		if j, ok := m.jobs[sj.ID]; !record && ok && j.restored && j.Userid == sj.Userid {
			// The job manager (re)started between job-ingest's KVS
			// commit and this request, and restored the job from its
			// eventlog: it is in, not a duplicate.
			j.restored = false
			continue
		}
		if m.known(sj.ID) {
			reject(sj.ID, "duplicate job id")
			continue
		}
		var spec *jobspec.Jobspec
		if parsed != nil && parsed[i] != nil {
			spec = parsed[i]
		} else if spec, err = jobspec.Parse(sj.Jobspec); err != nil {
			reject(sj.ID, err.Error())
			continue
		}
		j := newJob(sj.ID, sj.Userid, sj.Urgency, sj.Flags, sj.TSubmit)
		j.Raw = sj.Jobspec
		j.Jobspec = m.leanSpec(spec)
		m.setExempt(j)
		err := waitCheck(j, sj.Userid == m.owner) // wait.go
		if err == nil {
			err = m.queues.submitCheck(j)
		}
		if err == nil {
			err = m.plugins.validate(j, sj.Userid == m.owner)
		}
		if err != nil {
			reject(sj.ID, err.Error())
			continue
		}
		m.add(j)
		m.waitNew(j)
		ctx := appendSubmitContext(make([]byte, 0, 64), sj.Userid, sj.Urgency, sj.Flags)
		line := newEventLine(sj.TSubmit, "submit", ctx)
		j.eventlog = append(j.eventlog, line...)
		if record {
			rec := sj.Record
			m.batch.PutTreeobj(j.kvsDir+".J", treeobj.NewValref(rec.J))
			m.batch.PutTreeobj(j.kvsDir+".jobspec", treeobj.NewValref(rec.Jobspec))
			m.batch.PutShared(j.eventlogKey(), line)
			added = append(added, j)
		}
		m.journal.add(j, sj.TSubmit, "submit", ctx, line[:len(line)-1])
		m.plugins.newJob(j)
		m.post(j, "validate", nil)
	}
	if !record {
		r.Respond(flux.JSONBuffer(resp.Payload(-1)))
		return
	}
	m.batch.AfterCommit(func(err error) {
		if err != nil {
			// The commit that would have recorded them failed: they end
			// here, and their submitters get the error.
			for _, j := range added {
				if j.State != jobtap.StateInactive {
					m.raise(j, "ingest", 0, "recording the job in the KVS failed: "+err.Error(), m.owner)
				}
			}
			r.Errorf(syscall.EIO, "recording jobs in the KVS: %v", err)
			return
		}
		r.Respond(flux.JSONBuffer(resp.Payload(m.batch.Rootseq)))
	})
}

// raise posts an exception event.
func (m *manager) raise(j *job, typ string, severity int, note string, userid uint32) {
	m.post(j, "exception", map[string]any{"type": typ, "severity": severity, "note": note, "userid": userid})
	if severity == 0 {
		m.cleanup(j, j.State)
	}
}

func (m *manager) handleRaise(r *flux.Request) {
	var req fluxjob.RaiseRequest
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorizeOperator(r, j) {
		return
	}
	if !checkException(r, req.Type, req.Severity) {
		return
	}
	if j.State == jobtap.StateInactive {
		r.Errorf(syscall.EINVAL, "job %s is inactive", j.ID.String())
		return
	}
	m.raise(j, req.Type, req.Severity, req.Note, r.Userid())
	m.respondDurable(r, nil)
}

// respondDurable answers r with payload once the events posted so far
// are in a KVS checkpoint: what a requestor was told was done survives a
// crash of the broker (a cancel answered then lost would let the job
// run). A failed checkpoint is the requestor's error.
func (m *manager) respondDurable(r *flux.Request, payload any) {
	m.batch.AfterDurable(func(err error) {
		if err != nil {
			r.RespondError(fmt.Errorf("recording the change: %w", err))
			return
		}
		r.Respond(payload)
	})
}

// checkException answers r with EINVAL and reports false for an
// exception type or severity RFC 21 does not allow.
func checkException(r *flux.Request, typ string, severity int) bool {
	if severity < 0 || severity > 7 {
		r.Errorf(syscall.EINVAL, "invalid exception severity") // flux-core's words
		return false
	}
	if typ == "" || strings.ContainsAny(typ, " \t\n=") {
		r.Errorf(syscall.EINVAL, "invalid exception type")
		return false
	}
	return true
}

func (m *manager) handleKill(r *flux.Request) {
	var req fluxjob.KillRequest
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil {
		return
	}
	if !r.IsOperator() && r.Userid() != j.Userid {
		r.Errorf(syscall.EPERM, "guests may only send signals to their own jobs")
		return
	}
	if req.Signum <= 0 || req.Signum >= 65 {
		r.Errorf(syscall.EINVAL, "Invalid signal number")
		return
	}
	if j.State == jobtap.StateInactive {
		r.Errorf(syscall.EINVAL, "job is inactive")
		return
	}
	if j.State != jobtap.StateRun && j.State != jobtap.StateCleanup || !j.startSent {
		r.Errorf(syscall.EINVAL, "job is not running")
		return
	}
	m.exec.kill(j, req.Signum)
	r.Respond(nil)
}

func (m *manager) handleUrgency(r *flux.Request) {
	var req fluxjob.UrgencyRequest
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorizeOperator(r, j) {
		return
	}
	if req.Urgency < jobtap.UrgencyHold || req.Urgency > jobtap.UrgencyExpedite {
		r.Errorf(syscall.EINVAL, "urgency %d is out of range 0-31", req.Urgency)
		return
	}
	if !r.IsOwner() && req.Urgency > jobtap.UrgencyDefault && !m.mayExpedite(j) {
		r.Errorf(syscall.EPERM, "only the instance owner may set urgency above %d", jobtap.UrgencyDefault)
		return
	}
	if j.State&jobtap.StatePending == 0 {
		r.Errorf(syscall.EINVAL, "urgency can only be changed for pending jobs (job %s is %s)", j.ID.String(), j.State)
		return
	}
	old := j.Urgency
	m.post(j, "urgency", map[string]any{"userid": r.Userid(), "urgency": req.Urgency})
	m.computePriority(j)
	m.respondDurable(r, fluxjob.UrgencyResponse{Old: old})
}

// handleUpdate changes jobspec attributes of a pending job
// (flux update), asking plugins whether each change is allowed.
func (m *manager) handleUpdate(r *flux.Request) {
	var req struct {
		ID      jobid.ID       `json:"id"`
		Updates map[string]any `json:"updates"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil {
		return
	}
	if !r.IsOperator() && r.Userid() != j.Userid {
		r.Errorf(syscall.EPERM, "guests may only update their own jobs")
		return
	}
	if len(req.Updates) == 0 {
		r.Errorf(syscall.EINVAL, "no updates given")
		return
	}
	running := j.State == jobtap.StateRun
	if j.State == jobtap.StateInactive {
		r.Errorf(syscall.EINVAL, "job is inactive")
		return
	}
	if j.State&jobtap.StatePending == 0 && !running {
		r.Errorf(syscall.EINVAL, "job %s is %s: only pending and running jobs can be updated", j.ID.String(), j.State)
		return
	}
	// what the owner changed beyond limits, neither the job's user nor
	// an operator (who updates within them) may change back
	if !r.IsOwner() && j.flagSet["immutable"] {
		r.Errorf(syscall.EPERM, "job is immutable due to previous instance owner update")
		return
	}
	applied := make(map[string]any, len(req.Updates))
	validate := false // unless every hook vouched for its value
	for key, val := range req.Updates {
		if !strings.HasPrefix(key, "attributes.") {
			r.Errorf(syscall.EINVAL, "update key %q: only attributes.* keys can be updated", key)
			return
		}
		var v any
		var err error
		switch {
		case key == nameKey:
			if name, ok := val.(string); !ok || name == "" {
				err = fmt.Errorf("the job name must be a non-empty string: %w", syscall.EINVAL)
			} else {
				v = name
			}
		case running && key == queueKey:
			err = fmt.Errorf("update of queue for running job not supported: %w", syscall.EINVAL)
		case running && key != durationKey:
			err = fmt.Errorf("job %s is running: only its name and duration can be updated: %w", j.ID.String(), syscall.EINVAL)
		case key == queueKey:
			v, err = m.queues.update(j, val, r.IsOwner())
		default:
			v, err = m.plugins.update(j, key, val, r.IsOwner())
		}
		if err != nil {
			r.RespondError(fmt.Errorf("update %s: %w", key, err))
			return
		}
		if vv, ok := v.(jobtap.Validated); ok {
			v = vv.Value
		} else {
			validate = true
		}
		applied[key] = v
	}
	// apply to the stored jobspec
	var doc map[string]any
	if err := json.Unmarshal(j.Raw, &doc); err != nil {
		r.RespondError(err)
		return
	}
	for key, val := range applied {
		setPath(doc, strings.Split(key, "."), val)
	}
	raw, _ := json.Marshal(doc)
	spec, err := jobspec.Parse(raw)
	if err != nil {
		r.Errorf(syscall.EINVAL, "updated jobspec is invalid: %v", err)
		return
	}
	if validate {
		v := *j.view()
		v.Jobspec = m.leanSpec(spec)
		if err := m.plugins.validateView(&v, r.IsOwner()); err != nil {
			r.RespondError(err)
			return
		}
	}
	// the instance owner changing a guest's job: the guest may not
	// change it any more (what the owner allowed may be beyond limits)
	ownerUpdate := r.IsOwner() && r.Userid() != j.Userid
	// done posts the update's events and answers once they are in the
	// job's eventlog, so the requestor reads them there (more events, a
	// running job's resource-update, come first)
	done := func(more ...func()) {
		m.applyUpdate(j, raw, spec, applied)
		if ownerUpdate && !j.flagSet["immutable"] {
			m.post(j, "set-flags", map[string]any{"flags": []any{"immutable"}})
		}
		for _, fn := range more {
			fn()
		}
		m.respondDurable(r, nil)
	}
	if d, ok := applied[durationKey].(float64); ok && running {
		m.updateExpiration(r, j, d, done)
		return
	}
	if _, ok := applied[queueKey]; !ok {
		done()
		return
	}
	// another queue may run on other nodes: the scheduler must be able
	// to run the job there before it moves
	fb := append(append([]byte(`{"jobspec":`), raw...), '}')
	f, err := m.h.RPC("feasibility.check", flux.NodeidAny, flux.JSONBuffer(fb), 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		f.Close()
		if err != nil && !errors.Is(err, syscall.ENOSYS) {
			r.RespondError(fmt.Errorf("update %s: %w", queueKey, err))
			return
		}
		if j.State&jobtap.StatePending == 0 {
			r.Errorf(syscall.EINVAL, "job %s is %s: only pending jobs can change queue", j.ID.String(), j.State)
			return
		}
		done()
		m.queues.moved(j)
	})
}

// Keys of flux update the job manager handles itself (queueKey too).
const (
	nameKey     = "attributes.system.job.name"
	durationKey = "attributes.system.duration"
)

// rStartTime returns R's execution.starttime (0 if none).
func rStartTime(R json.RawMessage) float64 {
	var r struct {
		Execution struct {
			Starttime float64 `json:"starttime"`
		} `json:"execution"`
	}
	if json.Unmarshal(R, &r) != nil {
		return 0
	}
	return r.Execution.Starttime
}

// updateExpiration moves the time limit of running job j to its start
// plus duration (0: none): the scheduler, then job-exec, then done
// records the update and the job's resource-update event.
func (m *manager) updateExpiration(r *flux.Request, j *job, duration float64, done func(...func())) {
	start := rStartTime(j.R)
	if start <= 0 {
		r.Errorf(syscall.EINVAL, "update %s: job %s's resources carry no start time", durationKey, j.ID.String())
		return
	}
	expiration := 0.0
	if duration > 0 {
		expiration = start + duration
		if now := m.now(); expiration <= now {
			r.Errorf(syscall.EINVAL, "update %s: a duration of %s would end job %s %s ago, before the update",
				durationKey, fsd.Format(duration), j.ID.String(), fsd.Format(now-expiration))
			return
		}
	}
	req := map[string]any{"id": j.ID, "expiration": expiration}
	fail := func(who string, err error) {
		r.RespondError(fmt.Errorf("update %s: %s: %w", durationKey, who, err))
	}
	// the scheduler, then job-exec, then the record
	ask := func(topic, who string, next func()) {
		f, err := m.h.RPC(topic, flux.NodeidAny, req, 0)
		if err != nil {
			fail(who, err)
			return
		}
		f.Then(func(_ *flux.Message, err error) {
			f.Close()
			if err != nil {
				fail(who, err)
				return
			}
			next()
		})
	}
	ask("sched.expiration", "scheduler", func() {
		ask("job-exec.expiration", "job-exec", func() {
			if j.State != jobtap.StateRun {
				r.Errorf(syscall.EINVAL, "job %s is %s: it ended during the update", j.ID.String(), j.State)
				return
			}
			done(func() { m.post(j, "resource-update", map[string]any{"expiration": expiration}) })
		})
	})
}

// applyUpdate stores a job's updated jobspec and posts jobspec-update.
func (m *manager) applyUpdate(j *job, raw []byte, spec *jobspec.Jobspec, applied map[string]any) {
	// the KVS keeps the jobspec as submitted (flux job info --base);
	// the eventlog's jobspec-update events make the current one
	j.Raw, j.Jobspec = raw, m.leanSpec(spec)
	m.setExempt(j)
	ctx := make(map[string]any, len(applied))
	for k, v := range applied {
		if f, ok := v.(float64); ok && k == durationKey {
			v = jsonwire.Real(f) // a duration stays a real: 3600.0
		}
		ctx[k] = v
	}
	m.post(j, "jobspec-update", ctx)
}

func setPath(doc map[string]any, path []string, val any) {
	for i, p := range path {
		if i == len(path)-1 {
			doc[p] = val
			return
		}
		next, ok := doc[p].(map[string]any)
		if !ok {
			next = make(map[string]any)
			doc[p] = next
		}
		doc = next
	}
}

func (m *manager) handleJobtap(r *flux.Request) {
	var req struct {
		Load      string          `json:"load"`
		Remove    string          `json:"remove"`
		Conf      json.RawMessage `json:"conf"`
		QueryOnly bool            `json:"query_only"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !req.QueryOnly && !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may load or remove jobtap plugins")
		return
	}
	if req.Remove != "" {
		if err := m.plugins.remove(req.Remove); err != nil {
			r.RespondError(err)
			return
		}
	}
	if req.Load != "" {
		if err := m.plugins.load(req.Load, req.Conf); err != nil {
			r.RespondError(err)
			return
		}
	}
	if req.QueryOnly {
		r.Respond(map[string]any{"plugins": m.plugins.names()})
		return
	}
	r.Respond(nil)
}

func (m *manager) handleJobtapQuery(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil {
		return
	}
	p := m.plugins.find(req.Name)
	if p == nil {
		r.Errorf(syscall.ENOENT, "jobtap plugin %q is not loaded", req.Name)
		return
	}
	out := map[string]any{"name": p.Name(), "path": "builtin:" + p.Name()}
	if q, ok := p.(jobtap.Querier); ok {
		out["data"] = q.Query()
	}
	r.Respond(out)
}

func (m *manager) handlePluginMethod(r *flux.Request) {
	meth, ok := m.plugins.methods[strings.TrimPrefix(r.Topic(), "job-manager.")]
	if !ok {
		r.Errorf(syscall.ENOSYS, "no job-manager method %s", r.Topic())
		return
	}
	resp, err := meth.Handler(r.Msg.JSON(), r.Userid(), r.IsOwner() || (meth.Operators && r.IsOperator()))
	if err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(resp)
}

func (m *manager) handleStats(r *flux.Request) {
	counts := map[string]int{}
	for _, j := range m.jobs {
		counts[strings.ToLower(j.State.String())]++
	}
	if len(m.done) > 0 {
		counts[strings.ToLower(jobtap.StateInactive.String())] += len(m.done)
	}
	r.Respond(map[string]any{
		"jobs":        counts,
		"kvs_commits": m.batch.Commits,
		"purged":      m.purged,
		"kvs_ops":     m.batch.Ops,
		"journal":     len(m.journal.subs),
		"plugins":     m.plugins.names(),
	})
}

func (m *manager) handleDisconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	m.sched.disconnected(route)
	m.exec.disconnected(route)
	m.journal.disconnect(route)
	m.waitDisconnect(route)
	m.queues.disconnect(route)
	m.reallocDisconnect(route)
}

// jobBank is the bank a job is charged to ("" for none).
func jobBank(j *job) string {
	if j.Jobspec == nil {
		return ""
	}
	v, _ := j.Jobspec.Attribute("system.bank")
	bank, _ := v.(string)
	return bank
}

// setExempt decides whether j passes every limit (jobtap.Job.Exempt):
// attributes.system.exempt (which only the instance owner may set: the
// .accounting-limits plugin refuses it from others), or its association's
// [accounting] privilege.
func (m *manager) setExempt(j *job) {
	j.Exempt = false
	if j.Jobspec == nil {
		return
	}
	if v, ok := j.Jobspec.Attribute("system.exempt"); ok {
		if yes, _ := builtin.ExemptValue(v); yes {
			j.Exempt = true
			return
		}
	}
	j.Exempt, _ = m.privileges(j)
}

// mayExpedite reports whether j's association may set urgency above 16.
func (m *manager) mayExpedite(j *job) bool {
	_, ok := m.privileges(j)
	return ok
}

// privileges are j's association's: granted by the [accounting]
// configuration or by a plugin (the accounting database's flags).
func (m *manager) privileges(j *job) (exempt, expedite bool) {
	bank := jobBank(j)
	exempt, expedite = m.queues.pol.Privileges(j.Userid, bank)
	if !exempt || !expedite {
		e, x := m.plugins.privileges(j.Userid, bank)
		exempt, expedite = exempt || e, expedite || x
	}
	return exempt, expedite
}
