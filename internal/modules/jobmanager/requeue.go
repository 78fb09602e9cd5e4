package jobmanager

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Requeue on preemption (Slurm's PreemptMode=REQUEUE). A scheduler that
// preempts a running job sends job-manager.preempt (wire.PreemptRequest);
// the job is then either ended (a fatal "preempt" exception, as a cancel
// ends it) or requeued: it keeps its id and its submit time, and its
// eventlog says what happened:
//
//	exception {type:"preempt", severity:1, note:"... requeue N of
//	          max-requeue=M", userid, requeue:true}   RUN -> CLEANUP
//	finish, release          (the executor killed its shells: SIGTERM,
//	                          then SIGKILL after its kill timeout)
//	free                     (the scheduler has its resources back)
//	requeue {count:N}        CLEANUP -> PRIORITY, then priority -> SCHED
//
// The requeue event is RFC 21's one backward edge besides flux-restart
// (SCHED -> PRIORITY): CLEANUP -> PRIORITY. It resets everything of the
// run (R, start, finish, release, free) so the next alloc, start and
// finish are applied as a first run's: the eventlog replayed at a
// restart (restore) reaches the same state. The exception is not fatal
// (severity 1), so a requeued job that then completes is COMPLETED; a
// fatal exception during the requeue (flux cancel) ends it instead.
//
// What the run left in the job's KVS directory is kept: with the requeue
// event, in one commit, guest (the exec eventlog, the output, the usage)
// moves to requeue.N.guest and a copy of R goes to requeue.N.R, so the
// next run writes a fresh guest directory (flux job attach shows it).
// A job is requeued at most max-requeue times; preempted once more it is
// canceled with a note naming the limit.
//
// A requeued job keeps its submit time, so it may sort ahead of the job
// it was preempted for; started again first, it would be preempted again
// for the same job. The exception's context names that job (preemptor),
// and while it is pending the requeued job's sched.alloc request carries
// it (yield_to) and is sent after the preemptor's: the scheduler holds
// the requeued job back until the preemptor has started or left. Being
// in the eventlog, this survives a restart of the instance.

// handlePreempt answers job-manager.preempt (the scheduler only).
func (m *manager) handlePreempt(r *flux.Request) {
	var req wire.PreemptRequest
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-manager.preempt is only for the instance owner")
		return
	}
	if err := wire.CheckPreemptMode(req.Mode); err != nil {
		r.Errorf(syscall.EINVAL, "job-manager.preempt: %v", err)
		return
	}
	if err := wire.CheckMaxRequeue(req.MaxRequeue); err != nil {
		r.Errorf(syscall.EINVAL, "job-manager.preempt: %v", err)
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil {
		return
	}
	if j.State != jobtap.StateRun {
		r.Errorf(syscall.EINVAL, "job %s is not running (%s): it cannot be preempted", j.ID.String(), j.State)
		return
	}
	requeue := m.preemptMode(j, req.Mode) == wire.PreemptRequeue
	note := req.Note
	if requeue && j.requeues >= req.MaxRequeue {
		note += fmt.Sprintf("; not requeued: requeued %d times already (max-requeue=%d)", j.requeues, req.MaxRequeue)
		requeue = false
	}
	if requeue {
		note += fmt.Sprintf("; requeue %d of max-requeue=%d", j.requeues+1, req.MaxRequeue)
		ctx := map[string]any{"type": "preempt", "severity": 1, "note": note,
			"userid": r.Userid(), "requeue": true}
		if req.For != 0 {
			ctx["preemptor"] = req.For.String() // F58: exact where a float64 would not be
		}
		m.post(j, "exception", ctx)
		m.cleanup(j, j.State)
	} else {
		m.raise(j, "preempt", 0, note, r.Userid())
	}
	m.respondDurable(r, wire.PreemptResponse{Requeued: requeue})
}

// preemptMode is the job's own preempt-mode (its jobspec's
// attributes.system.preempt-mode, checked at submission by the
// scheduler's feasibility check), else its queue's ([queues.NAME]
// preempt-mode, Slurm's PreemptMode per partition), else def (the
// scheduler's).
func (m *manager) preemptMode(j *job, def string) string {
	own, err := wire.PreemptModeOf(j.Jobspec)
	if err != nil {
		m.log.Error(fmt.Sprintf("job %s: %v: using preempt-mode=%s", j.ID.String(), err, def))
		return def
	}
	if own != "" {
		return own
	}
	if m.queues != nil && m.queues.pol != nil && j.Jobspec != nil {
		if q := m.queues.pol.PreemptMode(j.Jobspec.Queue()); q != "" {
			return q
		}
	}
	return def
}

// requeueException reports whether an exception's context is a requeue
// (posted by handlePreempt): only a non-fatal one marked requeue:true.
func requeueException(sev int, ctx map[string]any) bool {
	v, _ := ctx["requeue"].(bool)
	return v && sev > 0
}

// applyRequeueException applies a requeue exception (requeueException):
// the run ends, the job goes back to the queue once it is over, and it
// yields to its preemptor (the context's preemptor, replayed at a
// restart like the rest: yieldTarget).
func (j *job) applyRequeueException(ctx map[string]any) {
	j.requeuing = true
	j.State = jobtap.StateCleanup
	j.yieldTo = 0
	if v, ok := ctx["preemptor"].(string); ok {
		if id, err := jobid.Parse(v); err == nil {
			j.yieldTo = id
		}
	}
}

// yieldTarget is the job j was last preempted for while that job is
// still pending (its sched.alloc request says so: wire.AllocRequest.
// YieldTo), or nil.
func (m *manager) yieldTarget(j *job) *job {
	if j.yieldTo == 0 {
		return nil
	}
	p := m.jobs[j.yieldTo]
	if p == nil || p.State == jobtap.StateNew || p.State >= jobtap.StateRun {
		return nil
	}
	return p
}

// requeue ends a requeued job's run once its resources are free: the
// run's guest directory moves aside (see above) and the requeue event
// sends the job back to PRIORITY.
func (m *manager) requeue(j *job) {
	if j.requeueMoving {
		return
	}
	j.requeueMoving = true
	n := j.requeues + 1
	guest := j.kvsDir + ".guest"
	f, err := kvs.LookupAsync(m.h, "", kvs.FlagTreeObj, guest)
	if err != nil {
		m.requeueDone(j, n, nil, err)
		return
	}
	f.Then(func(msg *flux.Message, err error) {
		var resp struct {
			Val *treeobj.Object `json:"val"`
		}
		if err == nil {
			err = msg.UnmarshalPayload(&resp)
		}
		m.requeueDone(j, n, resp.Val, err)
	})
}

// requeueDone posts the requeue event, with the run's guest directory
// obj (nil: the run wrote none) moved to requeue.N.guest.
func (m *manager) requeueDone(j *job, n int, obj *treeobj.Object, err error) {
	j.requeueMoving = false
	if j.State != jobtap.StateCleanup || !j.requeuing || j.cleanPosted {
		// canceled meanwhile: cleanup goes on to clean
		m.cleanup(j, j.State)
		return
	}
	prefix := j.kvsDir + ".requeue." + strconv.Itoa(n)
	switch {
	case err == nil && obj != nil:
		m.batch.PutTreeobj(prefix+".guest", obj)
		m.batch.Unlink(j.kvsDir + ".guest")
	case err != nil && flux.ErrnoOf(err) != syscall.ENOENT:
		m.log.Error(fmt.Sprintf("job %s: requeue: the first run's guest directory stays where it is: %v", j.ID.String(), err))
	}
	if len(j.R) > 0 {
		m.batch.PutShared(prefix+".R", j.R)
	}
	if f := m.exec.futures[j.ID]; f != nil {
		f.Close()
		m.exec.futures = forgetFuture(m.exec.futures, j.ID)
	}
	m.post(j, "requeue", map[string]any{"count": n})
}

// applyRequeue applies a requeue event: the job forgets its run and goes
// back to PRIORITY (its submit time, urgency, dependencies met and
// exceptions raised stay).
func (j *job) applyRequeue(ctx map[string]any) {
	if j.State != jobtap.StateCleanup {
		return
	}
	if n := int(ctxInt64(ctx, "count")); n > j.requeues {
		j.requeues = n
	} else {
		j.requeues++
	}
	j.requeuing = false
	j.R = nil
	j.annot = nil
	j.allocPending, j.cancelSent, j.hasAlloc, j.bypass = false, false, false, false
	// (a realloc request of the run is answered by the scheduler when
	// the job's resources are freed: its callback clears j.realloc)
	j.rankOrder, j.subGrants = nil, nil
	j.reattach, j.schedKnows, j.allocRestored, j.resuming = false, false, false, false
	j.startSent, j.killSent, j.started, j.releasedAll, j.freeSent = false, false, false, false, false
	j.perilog = 0
	j.finished, j.finishStatus, j.fatalBeforeFinish = false, 0, false
	j.cleanPosted = false
	j.expiration = 0
	j.Started = false
	j.WaitStatus = -1
	j.State = jobtap.StatePriority
}

// sendPreemptorFirst sends the alloc request of the job j yields to
// before j's own, when it is due one (both wait for the scheduler, and
// j sorts first by its older submit time, as after a restart): the
// scheduler then knows the preemptor when j's request names it. It
// reports whether that used the last request the scheduler allows now.
func (s *schedClient) sendPreemptorFirst(j *job) bool {
	p := s.m.yieldTarget(j)
	if p == nil || p.State != jobtap.StateSched || p.allocPending || p.hasAlloc || p.Priority == 0 || !s.m.queues.started(p) {
		return false
	}
	s.sendAlloc(p) // (still in the heap: skipped there, being pending)
	return s.limit != 0 && s.outstanding >= s.limit
}
