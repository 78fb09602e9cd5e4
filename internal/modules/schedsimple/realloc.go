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

// RFC 51 realloc: sched.realloc {job_id, spec_add?, spec_sub?, R?} is
// answered at once, first come first served: SUCCESS (0) with
// R_delta_add (resources allocated now from the free ones, first fit,
// expiring with the job) and/or R_delta_sub (what the job gives back:
// R, or the job's last nodes for a spec_sub asking for a node count),
// or DENY (1) with a note when that cannot be done now. The job keeps
// what it gives back until the job manager frees it (sched.free with
// final false). Nothing waits, so sched.realloc_cancel has nothing to
// cancel.

func (s *scheduler) realloc(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.realloc is only for the instance owner")
		return
	}
	var req struct {
		JobID   uint64          `json:"job_id"`
		SpecAdd json.RawMessage `json:"spec_add"`
		SpecSub json.RawMessage `json:"spec_sub"`
		R       json.RawMessage `json:"R"`
	}
	if err := json.Unmarshal(r.Msg.JSON(), &req); err != nil {
		r.Errorf(syscall.EPROTO, "sched.realloc: %v", err)
		return
	}
	s.reallocSeq++
	id := s.reallocSeq
	deny := func(format string, args ...any) {
		r.Respond(fluxjob.ReallocResponse{AllocID: id, Type: fluxjob.ReallocDeny, Note: fmt.Sprintf(format, args...)})
	}
	held := s.running[req.JobID]
	if held == nil {
		deny("the job holds no resources here")
		return
	}
	resp := fluxjob.ReallocResponse{AllocID: id, Type: fluxjob.ReallocSuccess}
	// what goes away is chosen first, from what the job holds now
	var sub *sched.Alloc
	switch {
	case len(req.R) > 0:
		R, err := rset.Parse(req.R)
		if err != nil {
			r.Errorf(syscall.EPROTO, "sched.realloc: R: %v", err)
			return
		}
		if sub, err = s.pool.AllocFromR(R); err != nil || !held.Contains(sub) {
			deny("R names resources the job does not hold")
			return
		}
	case len(req.SpecSub) > 0:
		js, err := jobspec.Parse(req.SpecSub)
		if err != nil {
			r.Errorf(syscall.EPROTO, "sched.realloc: spec_sub: %v", err)
			return
		}
		n := js.NNodes()
		switch {
		case n < 1:
			deny("spec_sub must ask for a number of nodes")
			return
		case n >= len(held.Nodes):
			deny("the job holds %d nodes: it cannot give back %d", len(held.Nodes), n)
			return
		}
		sub = held.Tail(n)
	}
	if sub != nil && (sub.Empty() || sub.NCores() == held.NCores()) {
		deny("a job cannot give back all its resources (it ends instead)")
		return
	}
	if len(req.SpecAdd) > 0 {
		js, err := jobspec.ParseV1(req.SpecAdd)
		var want *sched.Request
		if err == nil {
			want, err = sched.FromJobspec(js)
		}
		if err != nil {
			r.Errorf(syscall.EPROTO, "sched.realloc: spec_add: %v", err)
			return
		}
		add, err := s.pool.Allocate(want, s.now())
		if err != nil {
			deny("no free resources for %s now", want)
			return
		}
		add.Expiration = held.Expiration
		held.Merge(add)
		resp.RDeltaAdd = s.pool.AppendR(nil, add)
	}
	if sub != nil {
		sub.Start, sub.Expiration = held.Start, held.Expiration
		resp.RDeltaSub = s.pool.AppendR(nil, sub)
	}
	r.Respond(resp)
}

// reallocCancel: realloc requests are answered at once, so there is
// never one to cancel (RFC 51 sched.realloc_cancel, no response).
func (s *scheduler) reallocCancel(*flux.Request) {}
