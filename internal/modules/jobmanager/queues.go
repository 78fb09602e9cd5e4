package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// queueState is one queue's administrative state (flux queue): whether
// jobs may be submitted to it, and whether its jobs are scheduled.
type queueState struct {
	enabled       bool
	disableReason string
	started       bool
	stopReason    string
	// ckEnabled and ckStarted are the state kept across a restart: a
	// change made with nocheckpoint leaves them as they were
	ckEnabled, ckStarted bool
}

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
	named  bool
	states map[string]*queueState
	parked map[jobid.ID]*job

	// flux queue drain and idle: requests answered once no job is
	// active, or none runs or waits for the scheduler's answer
	drainers, idlers []*flux.Request
}

func newQueues(m *manager, p *policy.Config) *queues {
	q := &queues{m: m, named: p.Named(), states: make(map[string]*queueState), parked: make(map[jobid.ID]*job)}
	if !q.named {
		q.states[""] = &queueState{enabled: true, started: true, ckEnabled: true, ckStarted: true}
	}
	for name := range p.Queues {
		q.states[name] = &queueState{enabled: true, started: true, ckEnabled: true, ckStarted: true}
	}
	return q
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
		if !ok || (e.Name == "") == q.named {
			continue
		}
		s.enabled, s.disableReason, s.ckEnabled = e.Enable, e.DisableReason, e.Enable
		s.started, s.stopReason, s.ckStarted = e.Start, e.StopReason, e.Start
		if s.enabled {
			s.disableReason = ""
		}
		if s.started {
			s.stopReason = ""
		}
	}
	return nil
}

// checkpoint writes the queues' state to the KVS and then calls done.
func (q *queues) checkpoint(done func(error)) {
	ck := queueCheckpoint{Version: 1}
	names := q.names()
	if !q.named {
		names = []string{""}
	}
	for _, n := range names {
		s := q.states[n]
		e := queueCheckEntry{Name: n, Enable: s.ckEnabled, Start: s.ckStarted}
		if !s.ckEnabled {
			e.DisableReason = s.disableReason
		}
		if !s.ckStarted {
			e.StopReason = s.stopReason
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
		q.drainers = append(q.drainers, r)
		q.checkWaiters()
	})
	q.m.h.HandleFunc("job-manager.idle", func(r *flux.Request) {
		q.idlers = append(q.idlers, r)
		q.checkWaiters()
	})
}

// checkWaiters answers the drain and idle requests whose condition
// holds. It scans the jobs only while someone waits.
func (q *queues) checkWaiters() {
	if len(q.drainers) == 0 && len(q.idlers) == 0 {
		return
	}
	active, busy, pending := 0, 0, 0
	for _, j := range q.m.jobs {
		switch j.State {
		case jobtap.StateInactive:
			continue
		case jobtap.StateRun, jobtap.StateCleanup:
			busy++
		case jobtap.StateSched:
			pending++
		}
		active++
	}
	if active == 0 {
		for _, r := range q.drainers {
			r.Respond(nil)
		}
		q.drainers = nil
	}
	if busy == 0 && q.m.sched.outstanding == 0 {
		for _, r := range q.idlers {
			r.Respond(map[string]any{"pending": pending})
		}
		q.idlers = nil
	}
}

// lookup finds a queue by name ("" for the anonymous queue), with
// flux-core's messages.
func (q *queues) lookup(name string) (*queueState, error) {
	switch {
	case name == "" && q.named:
		return nil, fmt.Errorf("a named queue is required")
	case name != "" && !q.named:
		return nil, fmt.Errorf("'%s' is not a valid queue", name)
	}
	s, ok := q.states[name]
	if !ok {
		return nil, fmt.Errorf("'%s' is not a valid queue", name)
	}
	return s, nil
}

// submitCheck refuses jobs for a disabled queue. Unknown queues were
// refused by job-ingest; a job restored from an older configuration is
// let through.
func (q *queues) submitCheck(j *job) error {
	name := j.Jobspec.Queue()
	s, err := q.lookup(name)
	if err != nil || s.enabled {
		return nil
	}
	to := ""
	if name != "" {
		to = " to " + name
	}
	return fmt.Errorf("job submission%s is disabled: %s", to, s.disableReason)
}

// started reports whether j's queue is started (a job whose queue is not
// configured is scheduled: the scheduler decides about it).
func (q *queues) started(j *job) bool {
	s, err := q.lookup(j.Jobspec.Queue())
	return err != nil || s.started
}

// park keeps a job of a stopped queue until its queue starts.
func (q *queues) park(j *job) { q.parked[j.ID] = j }

// selected returns the queues a request names: one by name, or all of
// them (needing "all" when queues are named).
func (q *queues) selected(name string, all bool) ([]*queueState, []string, error) {
	if name != "" || !q.named {
		s, err := q.lookup(name)
		if err != nil {
			return nil, nil, err
		}
		return []*queueState{s}, []string{name}, nil
	}
	if !all {
		return nil, nil, fmt.Errorf("Use --all to apply this command to all queues")
	}
	names := q.names()
	out := make([]*queueState, len(names))
	for i, n := range names {
		out[i] = q.states[n]
	}
	return out, names, nil
}

func (q *queues) names() []string {
	names := make([]string, 0, len(q.states))
	for n := range q.states {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// job-manager.queue-list {} → {queues: [names]} (empty without named
// queues).
func (q *queues) handleList(r *flux.Request) {
	r.Respond(map[string]any{"queues": q.names()})
}

// job-manager.queue-status {name?} → {enable, start, disable_reason?,
// stop_reason?}. Without a scheduler the queue counts as stopped.
func (q *queues) handleStatus(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil {
		return
	}
	s, err := q.lookup(req.Name)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	started, stopReason := s.started, s.stopReason
	if !q.m.sched.ready {
		started, stopReason = false, "Scheduler is offline"
	}
	resp := map[string]any{"enable": s.enabled, "start": started}
	if !s.enabled {
		resp["disable_reason"] = s.disableReason
	}
	if !started && stopReason != "" {
		resp["stop_reason"] = stopReason
	}
	r.Respond(resp)
}

// job-manager.queue-enable {name?, enable, reason?, all} → {}
// (instance owner only).
func (q *queues) handleEnable(r *flux.Request) {
	var req struct {
		Name   string `json:"name"`
		Enable *bool  `json:"enable"`
		Reason string `json:"reason"`
		All    bool   `json:"all"`
		// NoCheckpoint: the change is not kept across a restart
		NoCheckpoint bool `json:"nocheckpoint"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may enable or disable queues")
		return
	}
	if req.Enable == nil {
		r.Errorf(syscall.EPROTO, "queue-enable: enable is required")
		return
	}
	if !*req.Enable && req.Reason == "" {
		r.Errorf(syscall.EINVAL, "reason is required for disable")
		return
	}
	states, _, err := q.selected(req.Name, req.All)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	for _, s := range states {
		s.enabled = *req.Enable
		s.disableReason = ""
		if !s.enabled {
			s.disableReason = req.Reason
		}
		if !req.NoCheckpoint {
			s.ckEnabled = s.enabled
		}
	}
	q.respondCheckpointed(r)
}

// job-manager.queue-start {name?, start, reason?, all} → {} (instance
// owner only). Stopping takes back the queue's outstanding alloc
// requests; starting hands its waiting jobs to the scheduler again.
func (q *queues) handleStart(r *flux.Request) {
	var req struct {
		Name   string `json:"name"`
		Start  *bool  `json:"start"`
		Reason string `json:"reason"`
		All    bool   `json:"all"`
		// NoCheckpoint: the change is not kept across a restart
		NoCheckpoint bool `json:"nocheckpoint"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may start or stop queues")
		return
	}
	if req.Start == nil {
		r.Errorf(syscall.EPROTO, "queue-start: start is required")
		return
	}
	states, _, err := q.selected(req.Name, req.All)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	for _, s := range states {
		s.started = *req.Start
		s.stopReason = ""
		if !s.started {
			s.stopReason = req.Reason
		}
		if !req.NoCheckpoint {
			s.ckStarted = s.started
		}
	}
	if *req.Start {
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
