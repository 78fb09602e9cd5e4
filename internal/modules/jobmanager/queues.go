package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// queueState is one queue's administrative state (flux queue): whether
// jobs may be submitted to it, and whether its jobs are scheduled.
type queueState struct {
	submission, scheduling onOff
}

// onOff is one of a queue's switches, with the reason it is off.
type onOff struct {
	on     bool
	reason string // why off ("" when on)
	// kept is the position saved for a restart: a change made with
	// nocheckpoint leaves it as it was
	kept bool
}

// set turns the switch on or off (with a reason), and records the
// change for a restart unless nocheckpoint.
func (o *onOff) set(on bool, reason string, nocheckpoint bool) {
	o.on, o.reason = on, ""
	if !on {
		o.reason = reason
	}
	if !nocheckpoint {
		o.kept = on
	}
}

var onAtStart = queueState{submission: onOff{on: true, kept: true}, scheduling: onOff{on: true, kept: true}}

// checkpointKey holds the queues' state across restarts, in flux-core's
// format: {"version": 1, "queue": [{name?, enable, start,
// disable_reason?, stop_reason?}]}.
const checkpointKey = "checkpoint.job-manager"

type queueCheckpoint struct {
	Version int               `json:"version"`
	Queue   []queueCheckEntry `json:"queue"`
}

type queueCheckEntry struct {
	Name          string `json:"name,omitempty"`
	Enable        bool   `json:"enable"`
	Start         bool   `json:"start"`
	DisableReason string `json:"disable_reason,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
}

// queues holds the state of the configured queues, or of the one
// anonymous queue (key "") when none are. Jobs of a stopped queue wait in
// parked, out of the scheduler's way, until the queue is started.
//
// Unlike flux-core, whose named queues start out stopped until `flux
// queue start`, every queue starts enabled and started (configuring a
// queue should not stop jobs from running), unless the state saved by an
// earlier run (checkpointKey) says otherwise.
type queues struct {
	m      *manager
	pol    *policy.Config
	states map[string]*queueState // by name, "" for the anonymous queue
	parked map[jobid.ID]*job

	// flux queue drain and idle: requests answered once no job is
	// active, or none runs or waits for the scheduler's answer
	drainers, idlers []*flux.Request
}

func newQueues(m *manager, p *policy.Config) *queues {
	q := &queues{m: m, pol: p, states: make(map[string]*queueState), parked: make(map[jobid.ID]*job)}
	if !p.Named() {
		q.states[""] = new(onAtStart)
	}
	for name := range p.Queues {
		q.states[name] = new(onAtStart)
	}
	return q
}

// reconfigure takes the queues of a new configuration (flux config
// reload). Queues that remain keep their state, new ones start enabled
// and started. Jobs of a queue that is no longer configured are let
// through as restored jobs are (see submitCheck, started): the parked
// ones go to the scheduler.
func (q *queues) reconfigure(p *policy.Config) {
	states := make(map[string]*queueState, len(p.Queues)+1)
	keep := func(name string) {
		if s, ok := q.states[name]; ok {
			states[name] = s
		} else {
			states[name] = new(onAtStart)
		}
	}
	if !p.Named() {
		keep("")
	}
	for name := range p.Queues {
		keep(name)
	}
	q.states, q.pol = states, p
	q.resume()
}

// restore applies the state checkpointed by an earlier run to the queues
// that are still configured.
func (q *queues) restore(ctx context.Context) error {
	data, err := kvs.GetRaw(ctx, q.m.h, kvs.PrimaryNamespace, checkpointKey)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", checkpointKey, err)
	}
	var ck queueCheckpoint
	if err := json.Unmarshal(data, &ck); err != nil || ck.Version != 1 {
		q.m.log.Error(fmt.Sprintf("%s: not a version 1 queue checkpoint; queues start enabled and started", checkpointKey))
		return nil
	}
	for _, e := range ck.Queue {
		s, ok := q.states[e.Name]
		if !ok {
			continue
		}
		s.submission.set(e.Enable, e.DisableReason, false)
		s.scheduling.set(e.Start, e.StopReason, false)
	}
	// [job-manager] stop-queues-on-restart: an instance that restarts
	// holds its jobs until an admin starts the queues
	if stop, _ := stopQueuesOnRestart(q.m.conf); stop {
		for _, s := range q.states {
			s.scheduling.set(false, "Automatically stopped due to restart", false)
		}
	}
	return nil
}

// stopQueuesOnRestart reads [job-manager] stop-queues-on-restart, a
// boolean (false when absent).
func stopQueuesOnRestart(raw json.RawMessage) (bool, error) {
	var conf struct {
		JM struct {
			Stop json.RawMessage `json:"stop-queues-on-restart"`
		} `json:"job-manager"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &conf) != nil || len(conf.JM.Stop) == 0 {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(conf.JM.Stop, &b); err != nil {
		return false, fmt.Errorf("[job-manager] stop-queues-on-restart: expected true or false, not %s", conf.JM.Stop)
	}
	return b, nil
}

// checkpoint writes the queues' state to the KVS and then calls done.
func (q *queues) checkpoint(done func(error)) {
	ck := queueCheckpoint{Version: 1}
	names := q.pol.Names()
	if !q.pol.Named() {
		names = []string{""}
	}
	for _, n := range names {
		s := q.states[n]
		e := queueCheckEntry{Name: n, Enable: s.submission.kept, Start: s.scheduling.kept}
		if !e.Enable {
			e.DisableReason = s.submission.reason
		}
		if !e.Start {
			e.StopReason = s.scheduling.reason
		}
		ck.Queue = append(ck.Queue, e)
	}
	var txn kvs.Txn
	if err := txn.PutJSON(checkpointKey, ck); err != nil {
		done(err)
		return
	}
	f, err := kvs.CommitAsync(q.m.h, kvs.PrimaryNamespace, 0, &txn)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		f.Close()
		if errors.Is(err, syscall.ENOSYS) {
			err = nil // no KVS: nothing to keep state in
		}
		done(err)
	})
}

// respondCheckpointed answers r once the new state is in the KVS.
func (q *queues) respondCheckpointed(r *flux.Request) {
	q.checkpoint(func(err error) {
		if err != nil {
			r.Errorf(syscall.EIO, "queue state changed but not saved for a restart: %v", err)
			return
		}
		r.Respond(nil)
	})
}

func (q *queues) register() {
	q.m.h.HandleFunc("job-manager.queue-list", q.handleList)
	q.m.h.HandleFunc("job-manager.queue-status", q.handleStatus)
	q.m.h.HandleFunc("job-manager.queue-enable", q.handleEnable)
	q.m.h.HandleFunc("job-manager.queue-start", q.handleStart)
	q.m.h.HandleFunc("job-manager.drain", func(r *flux.Request) {
		if !r.RequireOwner() {
			return
		}
		q.drainers = append(q.drainers, r)
		q.checkWaiters()
	})
	q.m.h.HandleFunc("job-manager.idle", func(r *flux.Request) {
		if !r.RequireOwner() {
			return
		}
		q.idlers = append(q.idlers, r)
		q.checkWaiters()
	})
}

// checkWaiters answers the drain and idle requests whose condition
// holds (from the job manager's per-state counts: it runs after every
// state change).
func (q *queues) checkWaiters() {
	if len(q.drainers) == 0 && len(q.idlers) == 0 {
		return
	}
	n := q.m.inState
	busy := n[jobtap.StateRun] + n[jobtap.StateCleanup]
	active := n[jobtap.StateNew] + n[jobtap.StateDepend] + n[jobtap.StatePriority] + n[jobtap.StateSched] + busy
	if active == 0 {
		for _, r := range q.drainers {
			r.Respond(nil)
		}
		q.drainers = nil
	}
	if busy == 0 && q.m.sched.outstanding == 0 {
		for _, r := range q.idlers {
			r.Respond(map[string]any{"pending": n[jobtap.StateSched]})
		}
		q.idlers = nil
	}
}

// lookup finds a queue by name ("" for the anonymous queue), or says
// why there is none.
func (q *queues) lookup(name string) (*queueState, error) {
	if err := q.pol.CheckQueue(name); err != nil {
		return nil, err
	}
	return q.states[name], nil
}

// submitCheck refuses jobs for a disabled queue. Unknown queues were
// refused by job-ingest; a job restored from an older configuration is
// let through.
func (q *queues) submitCheck(j *job) error {
	name := j.Jobspec.Queue()
	s, err := q.lookup(name)
	if err != nil || s.submission.on {
		return nil
	}
	to := ""
	if name != "" {
		to = " to " + name
	}
	return fmt.Errorf("job submission%s is disabled: %s", to, s.submission.reason)
}

// started reports whether j's queue is started (a job whose queue is not
// configured is scheduled: the scheduler decides about it).
func (q *queues) started(j *job) bool {
	s, err := q.lookup(j.Jobspec.Queue())
	return err != nil || s.scheduling.on
}

// park keeps a job of a stopped queue until its queue starts.
func (q *queues) park(j *job) { q.parked[j.ID] = j }

// selected returns the queues a request names: one by name, or all of
// them (needing "all" when queues are named).
func (q *queues) selected(name string, all bool) ([]*queueState, error) {
	if name != "" || !q.pol.Named() {
		s, err := q.lookup(name)
		if err != nil {
			return nil, err
		}
		return []*queueState{s}, nil
	}
	if !all {
		return nil, fmt.Errorf("Use --all to apply this command to all queues")
	}
	var out []*queueState
	for _, n := range q.pol.Names() {
		out = append(out, q.states[n])
	}
	return out, nil
}

// job-manager.queue-list {} → {queues: [names]} (empty without named
// queues).
func (q *queues) handleList(r *flux.Request) {
	r.Respond(fluxjob.QueueListResponse{Queues: q.pol.Names()})
}

// job-manager.queue-status {name?} → {enable, start, disable_reason?,
// stop_reason?}. Without a scheduler the queue counts as stopped.
func (q *queues) handleStatus(r *flux.Request) {
	var req fluxjob.QueueStatusRequest
	if r.Decode(&req) != nil {
		return
	}
	s, err := q.lookup(req.Name)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	started, stopReason := s.scheduling.on, s.scheduling.reason
	if !q.m.sched.ready {
		started, stopReason = false, "Scheduler is offline"
	}
	resp := fluxjob.QueueStatus{Enable: s.submission.on, Start: started}
	if !s.submission.on {
		resp.DisableReason = s.submission.reason
	}
	if !started {
		resp.StopReason = stopReason
	}
	r.Respond(resp)
}

// change decodes a queue-enable or queue-start request (key names the
// switch), checks it and applies it to the queues it names. It answers
// r itself and returns false when the request is refused.
func (q *queues) change(r *flux.Request, key string, sw func(*queueState) *onOff) (on bool, ok bool) {
	var c fluxjob.QueueChange
	if r.Decode(&c) != nil {
		return false, false
	}
	if !r.RequireOwner() {
		return false, false
	}
	v := c.Enable
	if key == "start" {
		v = c.Start
	}
	if v == nil {
		r.Errorf(syscall.EPROTO, "queue-%s: %s is required", key, key)
		return false, false
	}
	if key == "enable" && !*v && c.Reason == "" {
		r.Errorf(syscall.EINVAL, "reason is required for disable")
		return false, false
	}
	states, err := q.selected(c.Name, c.All)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return false, false
	}
	for _, s := range states {
		sw(s).set(*v, c.Reason, c.NoCheckpoint)
	}
	return *v, true
}

// job-manager.queue-enable → {} (instance owner only).
func (q *queues) handleEnable(r *flux.Request) {
	if _, ok := q.change(r, "enable", func(s *queueState) *onOff { return &s.submission }); ok {
		q.respondCheckpointed(r)
	}
}

// job-manager.queue-start → {} (instance owner only). Stopping takes
// back the queue's outstanding alloc requests; starting hands its waiting
// jobs to the scheduler again.
func (q *queues) handleStart(r *flux.Request) {
	start, ok := q.change(r, "start", func(s *queueState) *onOff { return &s.scheduling })
	if !ok {
		return
	}
	if start {
		q.resume()
	} else {
		q.stopPending()
	}
	q.respondCheckpointed(r)
}

// resume gives the parked jobs of started queues back to the scheduler
// client.
func (q *queues) resume() {
	sc := q.m.sched
	for id, j := range q.parked {
		if !q.started(j) {
			continue
		}
		delete(q.parked, id)
		if j.State == jobtap.StateSched && !j.allocPending && !j.hasAlloc {
			sc.push(j)
		}
	}
	sc.drain()
}

// stopPending cancels the alloc requests of jobs in stopped queues; the
// scheduler's answers bring them back to the queue, where they park.
func (q *queues) stopPending() {
	for _, j := range q.m.jobs {
		if j.allocPending && !j.cancelSent && !q.started(j) {
			q.m.sched.cancel(j)
			j.cancelSent = true
		}
	}
}

// disconnect forgets the drain and idle requests of a client that left.
func (q *queues) disconnect(route string) {
	keep := func(rs []*flux.Request) []*flux.Request {
		out := rs[:0]
		for _, r := range rs {
			if r.Msg.RouteString() != route {
				out = append(out, r)
			}
		}
		return out
	}
	q.drainers = keep(q.drainers)
	q.idlers = keep(q.idlers)
}

// queueKey is the jobspec attribute flux update ID queue=NAME changes.
const queueKey = "attributes.system.queue"

// update vets moving pending job j to another queue (flux-core's
// messages): the queue must exist and take submissions, its
// policy.access must admit the job's user (unless the instance owner
// moves it), and the plugins (the limits of the new queue) must agree.
func (q *queues) update(j *job, value any, owner bool) (any, error) {
	name, ok := value.(string)
	if !ok {
		return nil, flux.NewError(syscall.EINVAL, "queue must be a string")
	}
	if name == j.Jobspec.Queue() {
		return nil, flux.NewError(syscall.EINVAL, "job queue is already set to "+name)
	}
	s, err := q.lookup(name)
	if err != nil {
		return nil, flux.NewError(syscall.EINVAL, err.Error())
	}
	if !s.submission.on {
		return nil, flux.NewError(syscall.EINVAL, "queue "+name+" is currently disabled")
	}
	if !owner { // policy.access: who may submit to the queue may move a job into it
		if err := q.pol.CheckAccess(name, j.Userid); err != nil {
			return nil, err
		}
	}
	if err := q.m.plugins.queueUpdate(j, name, owner); err != nil {
		return nil, flux.NewError(syscall.EPERM, err.Error())
	}
	return name, nil
}

// moved hands a job whose queue changed to the scheduler afresh: an
// alloc request in flight is taken back (it carries the old queue), a
// parked job goes back if its new queue is started.
func (q *queues) moved(j *job) {
	if j.allocPending && !j.cancelSent {
		q.m.sched.cancel(j)
		j.cancelSent = true
	}
	if _, ok := q.parked[j.ID]; ok {
		q.resume()
	}
}
