package schedsimple

import (
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// RFC 51 realloc. sched.realloc {job_id, spec_add?, spec_sub?, R?} (at
// least one of spec_add and spec_sub) is answered with {alloc_id, type}
// and, for SUCCESS (0), R_delta_add and/or R_delta_sub:
//
//   - What the job gives back (spec_sub: its last nodes, as many as
//     spec_sub asks for; R: exactly those resources) is chosen from what
//     it holds; it stays the job's until the job manager frees it
//     (sched.free, final false) once the job has stopped using it.
//   - What it asks for (spec_add) waits in the queue as a job of its
//     own would: the job's priority, the request's arrival as its submit
//     time, the job's user, a duration of what is left of the job's
//     time, so the queue policy (FCFS, EASY ...), advance reservations
//     and the queue depth treat it as they treat pending jobs. With the
//     extension key nowait true, a request that does not start in the
//     next pass is answered DENY (1) instead.
//   - A request that could never be met (more than the instance has) is
//     denied at once; one whose job ends while it waits, and one the job
//     manager cancels (sched.realloc_cancel {matchtag}, RFC 6: no
//     response to the cancel itself), is answered CANCEL (2).
//
// Extension keys the job manager adds: priority (the job's), userid,
// nowait, and generation (the job manager's, from sched-hello: a request
// from anyone else is refused, since the job manager keeps the job's R). Unknown keys are ignored; a key of the wrong type is an error
// (EPROTO) naming it.

// reallocBit marks the queue ids of waiting realloc requests, which
// share the queue with pending jobs (job ids are below 2^63).
const reallocBit = 1 << 63

// pendingRealloc is a realloc request waiting for resources to add.
type pendingRealloc struct {
	r       *flux.Request
	allocID uint64
	jobID   uint64
	sub     *sched.Alloc // what the job gives back as well (nil: none)
	nowait  bool
}

func isRealloc(id uint64) bool { return id&reallocBit != 0 }

// reallocRequest is sched.realloc's payload.
type reallocRequest struct {
	JobID      uint64
	SpecAdd    json.RawMessage
	SpecSub    json.RawMessage
	R          json.RawMessage
	Priority   int64
	Userid     uint32
	NoWait     bool
	Generation int64
}

// decodeReallocRequest checks each key's type, naming the one that is
// wrong.
func decodeReallocRequest(p []byte) (*reallocRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p, &raw); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object: %v", err)
	}
	req := &reallocRequest{Priority: 16}
	isObject := func(v json.RawMessage) bool { return len(v) > 0 && v[0] == '{' }
	for key, v := range raw {
		var err error
		switch key {
		case "job_id":
			err = json.Unmarshal(v, &req.JobID)
		case "spec_add", "spec_sub", "R":
			if !isObject(v) {
				return nil, fmt.Errorf("%s must be a JSON object", key)
			}
			switch key {
			case "spec_add":
				req.SpecAdd = v
			case "spec_sub":
				req.SpecSub = v
			default:
				req.R = v
			}
		case "priority":
			err = json.Unmarshal(v, &req.Priority)
		case "userid":
			err = json.Unmarshal(v, &req.Userid)
		case "nowait":
			err = json.Unmarshal(v, &req.NoWait)
		case "generation":
			err = json.Unmarshal(v, &req.Generation)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
	}
	switch {
	case raw["job_id"] == nil:
		return nil, fmt.Errorf("job_id is required")
	case req.SpecAdd == nil && req.SpecSub == nil:
		return nil, fmt.Errorf("at least one of spec_add and spec_sub is required (RFC 51)")
	}
	return req, nil
}

func (s *scheduler) realloc(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.realloc is only for the instance owner")
		return
	}
	req, err := decodeReallocRequest(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "sched.realloc: %v", err)
		return
	}
	if req.Generation != s.generation || s.generation == 0 {
		// the job manager keeps the job's R: a change it did not ask
		// for would leave the two disagreeing until the job ends
		r.Errorf(syscall.EPERM, "sched.realloc is the job manager's (it names its generation); ask job-manager.realloc (flux job realloc)")
		return
	}
	s.reallocSeq++
	id := s.reallocSeq
	deny := func(format string, args ...any) {
		r.Respond(fluxjob.ReallocResponse{AllocID: id, Type: fluxjob.ReallocDeny, Note: fmt.Sprintf(format, args...)})
	}
	held := s.running[req.JobID]
	switch {
	case held == nil:
		deny("the job holds no resources here")
		return
	case s.reallocByJob[req.JobID] != 0:
		deny("the job has a realloc request waiting already")
		return
	}
	// what goes away is chosen first, from what the job holds now
	var sub *sched.Alloc
	if req.SpecSub != nil {
		js, err := jobspec.Parse(req.SpecSub)
		if err != nil {
			r.Errorf(syscall.EPROTO, "sched.realloc: spec_sub: %v", err)
			return
		}
		if req.R != nil {
			R, err := rset.Parse(req.R)
			if err != nil {
				r.Errorf(syscall.EPROTO, "sched.realloc: R: %v", err)
				return
			}
			if sub, err = s.pool.AllocWithin(R, held); err != nil || !held.Contains(sub) {
				deny("R names resources the job does not hold")
				return
			}
		} else {
			n := js.NNodes()
			switch {
			case n < 1:
				deny("spec_sub must ask for a number of nodes (or name them in R)")
				return
			case n >= len(held.Nodes):
				deny("the job holds %d nodes: it cannot give back %d", len(held.Nodes), n)
				return
			}
			sub = held.Tail(n)
		}
		if sub.Empty() || sub.NCores() == held.NCores() {
			deny("a job cannot give back all its resources (it ends instead)")
			return
		}
		sub.Start, sub.Expiration = held.Start, held.Expiration
	}
	if req.SpecAdd == nil {
		s.respondRealloc(r, id, fluxjob.ReallocSuccess, nil, sub, "")
		return
	}
	js, err := jobspec.ParseV1(req.SpecAdd)
	var want *sched.Request
	if err == nil {
		want, err = sched.FromJobspec(js)
	}
	if err != nil {
		r.Errorf(syscall.EPROTO, "sched.realloc: spec_add: %v", err)
		return
	}
	if err := s.pool.Feasible(want); err != nil {
		deny("spec_add can never be met here: %v", err)
		return
	}
	now := s.now()
	if held.Expiration > 0 {
		// the growth ends with the job: it needs only what is left
		want.Duration = max(held.Expiration-now, 1)
	}
	key := reallocBit | id
	p := &pendingRealloc{r: r, allocID: id, jobID: req.JobID, sub: sub, nowait: req.NoWait}
	job := &sched.Job{ID: key, Priority: req.Priority, TSubmit: now, Userid: req.Userid, Req: want, Data: r}
	if err := s.queue.Add(job); err != nil {
		deny("%v", err)
		return
	}
	s.reallocs[key] = p
	s.reallocByJob[req.JobID] = key
	if name := s.runResv[req.JobID]; name != "" {
		s.jobResv[key] = name
	}
	s.schedule()
}

// grantRealloc answers a waiting request the pass has found room for.
func (s *scheduler) grantRealloc(key uint64, add *sched.Alloc) {
	p := s.dropRealloc(key)
	held := s.running[p.jobID]
	if held == nil {
		s.pool.Free(add)
		s.respondRealloc(p.r, p.allocID, fluxjob.ReallocCancel, nil, nil, "the job ended while its request waited")
		return
	}
	add.Start, add.Expiration = held.Start, held.Expiration
	s.ended(held)
	held.Merge(add)
	s.started(held)
	s.respondRealloc(p.r, p.allocID, fluxjob.ReallocSuccess, add, p.sub, "")
}

// endRealloc answers a waiting request with typ (DENY or CANCEL) and
// takes it off the queue.
func (s *scheduler) endRealloc(key uint64, typ int, note string) {
	if p := s.dropRealloc(key); p != nil {
		s.respondRealloc(p.r, p.allocID, typ, nil, nil, note)
	}
}

// dropRealloc forgets a waiting request.
func (s *scheduler) dropRealloc(key uint64) *pendingRealloc {
	p := s.reallocs[key]
	if p == nil {
		return nil
	}
	s.queue.Remove(key)
	delete(s.reallocs, key)
	delete(s.reallocByJob, p.jobID)
	delete(s.jobResv, key)
	delete(s.baseReq, key)
	delete(s.held, key)
	delete(s.debugAhead, key)
	delete(s.estimates, key)
	return p
}

// denyNoWait answers the nowait requests a pass did not start.
func (s *scheduler) denyNoWait() {
	for key, p := range s.reallocs {
		if p.nowait {
			want := s.queue.Get(key).Req
			s.endRealloc(key, fluxjob.ReallocDeny, fmt.Sprintf("no free resources for %s now", want))
		}
	}
}

// cancelJobReallocs answers CANCEL to the request of a job that ended.
func (s *scheduler) cancelJobReallocs(jobID uint64) {
	if key := s.reallocByJob[jobID]; key != 0 {
		s.endRealloc(key, fluxjob.ReallocCancel, "the job ended while its request waited")
	}
}

func (s *scheduler) respondRealloc(r *flux.Request, id uint64, typ int, add, sub *sched.Alloc, note string) {
	resp := fluxjob.ReallocResponse{AllocID: id, Type: typ, Note: note}
	if add != nil {
		resp.RDeltaAdd = s.pool.AppendR(nil, add)
	}
	if sub != nil {
		resp.RDeltaSub = s.pool.AppendR(nil, sub)
	}
	if err := r.Respond(resp); err != nil {
		s.log.Error("sched.realloc respond", "alloc_id", id, "err", err)
	}
}

// reallocCancel: sched.realloc_cancel {matchtag} ends the waiting
// request of that matchtag from the same sender with CANCEL. The cancel
// itself is not answered (RFC 6).
func (s *scheduler) reallocCancel(r *flux.Request) {
	if !r.IsOwner() {
		return
	}
	var req struct {
		Matchtag *uint32 `json:"matchtag"`
	}
	if json.Unmarshal(r.Msg.JSON(), &req) != nil || req.Matchtag == nil {
		s.log.Error("sched.realloc_cancel: a matchtag (integer) is required")
		return
	}
	route := r.Msg.RouteString()
	for key, p := range s.reallocs {
		if p.r.Msg.Matchtag == *req.Matchtag && p.r.Msg.RouteString() == route {
			s.endRealloc(key, fluxjob.ReallocCancel, "canceled")
			s.schedule()
			return
		}
	}
}

// forgetReallocs drops every waiting request without an answer (the job
// manager that sent them is gone) or with err (the module unloads).
func (s *scheduler) forgetReallocs(err error) {
	for key := range s.reallocs {
		p := s.dropRealloc(key)
		if err != nil {
			p.r.RespondError(err)
		}
	}
}
