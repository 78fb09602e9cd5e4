package schedsimple

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Preemption (seed 003's "standby" queue): a job is preemptible when its
// queue is configured so (queues.NAME.preemptible = true) or it asks to
// be (attributes.system.preemptible, e.g. flux submit
// --setattr=preemptible). When a pass leaves the first pending job that
// is not preemptible itself unable to start, and ending some running
// preemptible jobs would let it start now, the scheduler ends them (a
// fatal "preempt" exception, raised through the job manager), newest
// first so the least work is lost, and stops there. It waits for those
// jobs to release their resources before preempting again for that job.
// Preemptible jobs never preempt others.
//
// What becomes of a preempted job is preempt-mode's ([sched-simple]
// preempt-mode = "cancel" | "requeue", or a job's own
// attributes.system.preempt-mode, e.g. flux submit
// --setattr=preempt-mode=requeue): canceled, a fatal "preempt"
// exception, or requeued: it goes back to the queue with its id and
// submit time, at most max-requeue times (default DefaultMaxRequeue),
// then canceled with a note naming the limit. The job manager carries
// it out (job-manager.preempt, wire.PreemptRequest); for the scheduler
// a requeued job frees its resources and asks for them again, as any
// job does.

// DefaultMaxRequeue is max-requeue when none is configured (Slurm has
// no such bound by default; a job preempted over and over makes no
// progress, so fluxgo stops requeueing it after five times).
const DefaultMaxRequeue = 5

// setPreemptKey applies preempt-mode or max-requeue.
func (c *Config) setPreemptKey(k, v string) error {
	switch k {
	case "preempt-mode":
		if err := wire.CheckPreemptMode(v); err != nil {
			return err
		}
		c.PreemptMode = v
	case "max-requeue":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("max-requeue=%q: must be an integer from 0 (never requeue) to %d", v, wire.MaxRequeueLimit)
		}
		if err := wire.CheckMaxRequeue(n); err != nil {
			return err
		}
		c.MaxRequeue = n
	}
	return nil
}

// preemptibleAttr reads attributes.system.preemptible: true or a
// number (1 = yes, 0 = no).
func preemptibleAttr(js *jobspec.Jobspec) (bool, error) {
	v, ok := js.Attribute("system.preemptible")
	if !ok {
		return false, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case float64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case int:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case int64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	case json.Number:
		if x == "0" || x == "1" {
			return x == "1", nil
		}
	}
	return false, fmt.Errorf("attributes.system.preemptible=%v: want true, false, 1 or 0", v)
}

// preempt runs after a pass that started nothing.
func (s *scheduler) preempt() {
	var head *sched.Job
	n := 0
	for j := range s.queue.All() {
		if n >= s.cfg.QueueDepth {
			break
		}
		n++
		if !j.Preemptible {
			head = j
			break
		}
	}
	if head == nil {
		return
	}
	for _, for_ := range s.victims {
		if for_ == head.ID {
			return // already making room for it: wait for the frees
		}
	}
	type cand struct {
		id uint64
		a  *sched.Alloc
	}
	var cands []cand
	for id := range s.preemptible {
		if _, busy := s.victims[id]; !busy && s.running[id] != nil {
			cands = append(cands, cand{id, s.running[id]})
		}
	}
	slices.SortFunc(cands, func(x, y cand) int { // newest first
		switch {
		case x.a.Start > y.a.Start:
			return -1
		case x.a.Start < y.a.Start:
			return 1
		}
		return 0
	})
	var freed []*sched.Alloc
	var chosen []uint64
	fits := false
	for _, c := range cands {
		if s.pool.Free(c.a) != nil {
			continue
		}
		freed = append(freed, c.a)
		chosen = append(chosen, c.id)
		if a, err := s.pool.Allocate(head.Req, s.now()); err == nil {
			s.pool.Free(a)
			fits = true
			break
		}
	}
	for _, a := range freed {
		s.pool.Claim(a)
	}
	if !fits {
		return
	}
	note := "preempted by job " + jobid.ID(head.ID).String()
	for _, id := range chosen {
		s.victims[id] = head.ID
		s.yieldTo[id] = head.ID
		s.log.Info(fmt.Sprintf("job %s %s", jobid.ID(id).String(), note))
		f, err := s.h.RPC("job-manager.preempt", flux.NodeidAny, wire.PreemptRequest{
			ID: jobid.ID(id), Note: note, Mode: s.cfg.PreemptMode, MaxRequeue: s.cfg.MaxRequeue, For: jobid.ID(head.ID)}, 0)
		if err != nil {
			s.log.Error("preempt: raise", "id", jobid.ID(id).String(), "err", err)
			continue
		}
		f.Then(func(m *flux.Message, err error) {
			var resp wire.PreemptResponse
			if err == nil {
				err = m.UnmarshalPayload(&resp)
			}
			if err != nil {
				s.log.Error("preempt", "id", jobid.ID(id).String(), "err", err)
			}
			if !resp.Requeued {
				delete(s.yieldTo, id) // it does not come back
			}
		})
	}
}

// A requeued job keeps its submit time, so it may sort ahead of the job
// it made room for; started again at once, it would be preempted again
// for the same job, over and over up to max-requeue. So a preempted job
// yields: its next alloc request waits aside (s.yielding) while the job
// it was preempted for is still pending, and joins the queue at the
// first pass after that job started or left. The job manager's alloc
// request names that job (yield_to, from the preempt exception in the
// job's eventlog, so it holds after a restart of the instance or of this
// module), and sends the preemptor's request first; yieldTo also
// remembers, per preempted job, the job it yields to, until its next
// alloc request (or the job manager says it was not requeued), for a
// job manager that does not say.

// yieldToKey finds a yield_to in a request before it is decoded.
var yieldToKey = []byte(`"yield_to"`)

// yield keeps a requeued job's alloc request aside while the job it was
// preempted for is pending; it reports whether it did.
func (s *scheduler) yield(j *sched.Job) bool {
	head, ok := s.yieldTo[j.ID]
	if r, isReq := j.Data.(*flux.Request); isReq && bytes.Contains(r.Msg.JSON(), yieldToKey) {
		attached, _ := r.Msg.Attached.(wire.AttachedJobspec)
		if req, err := wire.DecodeAllocRequest(r.Msg.JSON(), attached); err == nil && req.YieldTo != 0 {
			head, ok = uint64(req.YieldTo), true
			s.yieldTo[j.ID] = head
		}
	}
	if !ok {
		return false
	}
	if s.queue.Get(head) == nil {
		delete(s.yieldTo, j.ID)
		return false
	}
	s.yielding[j.ID] = j
	yieldReason(j, "yields to job "+jobid.ID(head).String()+", which it was preempted for")
	return true
}

// yieldReason says why a yielding job waits (sched.reason_pending), or
// withdraws it ("").
func yieldReason(j *sched.Job, reason string) {
	var v any
	if reason != "" {
		v = reason
	}
	if r, ok := j.Data.(*flux.Request); ok {
		r.Respond(map[string]any{"id": j.ID, "type": allocAnnotate,
			"annotations": map[string]any{"sched": map[string]any{"reason_pending": v}}})
	}
}

// unyield moves the yielding jobs whose preemptor is no longer pending
// into the queue (before a pass).
func (s *scheduler) unyield() {
	for id, j := range s.yielding {
		if s.queue.Get(s.yieldTo[id]) != nil {
			continue
		}
		delete(s.yielding, id)
		delete(s.yieldTo, id)
		yieldReason(j, "")
		if err := s.queue.Add(j); err != nil {
			s.log.Error(fmt.Sprintf("requeued job %s: %v", jobid.ID(id).String(), err))
			respondType(j.Data.(*flux.Request), id, allocDeny, "duplicate sched.alloc request")
		}
	}
}

// cancelYielding answers sched.cancel for a yielding job; it reports
// whether id was one.
func (s *scheduler) cancelYielding(id uint64) bool {
	j, ok := s.yielding[id]
	if !ok {
		return false
	}
	delete(s.yielding, id)
	delete(s.yieldTo, id)
	respondType(j.Data.(*flux.Request), id, allocCancel, "")
	return true
}

// forgetYielding drops the yielding jobs (the job manager was replaced:
// their requests died with it) or, with err, fails their requests (the
// module unloads).
func (s *scheduler) forgetYielding(err error) {
	for id, j := range s.yielding {
		if r, ok := j.Data.(*flux.Request); ok && err != nil {
			r.Errorf(syscall.ENOSYS, "%v", err)
		}
		delete(s.yielding, id)
	}
	clear(s.yieldTo)
}
