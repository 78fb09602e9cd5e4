package jobmanager

import (
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51, seed 000): a running job's owner (its shell
// or a tool such as flux job realloc) asks job-manager.realloc for
// resources to add (spec_add, a jobspec) or to give back (spec_sub, a
// jobspec, or R, the very resources). The job manager forwards the
// request to the scheduler (sched.realloc) and, on SUCCESS, applies it:
// the job's R in the KVS becomes R ∪ R_delta_add − R_delta_sub, a
// resource-update event records the deltas (so replaying the eventlog
// and the job's R agree), and resources given back are released (a
// release event with final false) and freed to the scheduler
// (sched.free, final false) at once: a job asks to shrink once it has
// stopped using them. The requestor gets the scheduler's answer
// ({alloc_id, type, R_delta_add?, R_delta_sub?}) plus the job's new R.
// Responses of type DENY (1) or UNSUPPORTED (3) change nothing.

// Realloc response types (RFC 51).
func (m *manager) handleRealloc(r *flux.Request) {
	var req struct {
		ID      jobid.ID        `json:"id"`
		SpecAdd json.RawMessage `json:"spec_add"`
		SpecSub json.RawMessage `json:"spec_sub"`
		R       json.RawMessage `json:"R"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorize(r, j) {
		return
	}
	switch {
	case len(req.SpecAdd) == 0 && len(req.SpecSub) == 0 && len(req.R) == 0:
		r.Errorf(syscall.EPROTO, "realloc: give spec_add, spec_sub or R")
		return
	case j.State != jobtap.StateRun || j.fatal:
		r.Errorf(syscall.EINVAL, "job %s is %s: only running jobs can change their resources", j.ID.String(), j.State)
		return
	case j.bypass:
		r.Errorf(syscall.EINVAL, "job %s brought its own R (alloc-bypass): the scheduler cannot change it", j.ID.String())
		return
	case j.realloc:
		r.Errorf(syscall.EBUSY, "job %s already has a realloc request in progress", j.ID.String())
		return
	}
	fwd := map[string]any{"job_id": j.ID}
	for k, v := range map[string]json.RawMessage{"spec_add": req.SpecAdd, "spec_sub": req.SpecSub, "R": req.R} {
		if len(v) > 0 {
			fwd[k] = v
		}
	}
	f, err := m.h.RPC("sched.realloc", flux.NodeidAny, fwd, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	j.realloc = true
	f.Then(func(msg *flux.Message, err error) {
		j.realloc = false
		if err != nil {
			r.RespondError(fmt.Errorf("scheduler: %w", err))
			return
		}
		var resp fluxjob.ReallocResponse
		if err := json.Unmarshal(msg.JSON(), &resp); err != nil {
			r.Errorf(syscall.EPROTO, "sched.realloc response: %v", err)
			return
		}
		if resp.Type != fluxjob.ReallocSuccess {
			r.Respond(resp)
			return
		}
		if j.State != jobtap.StateRun || j.fatal {
			// it ended meanwhile: what it was given goes back at once
			if len(resp.RDeltaAdd) > 0 {
				m.reallocFree(j, resp.RDeltaAdd)
			}
			r.Errorf(syscall.EINVAL, "job %s ended during the realloc request", j.ID.String())
			return
		}
		newR, subRanks, err := applyDeltas(j.R, resp.RDeltaAdd, resp.RDeltaSub)
		if err != nil {
			m.log.Error("realloc: the scheduler's answer does not apply", "id", j.ID.String(), "err", err)
			r.Errorf(syscall.EPROTO, "realloc: %v", err)
			return
		}
		j.R = newR
		m.batch.PutShared(j.kvsDir+".R", newR)
		ctx := map[string]any{"alloc_id": resp.AllocID}
		if len(resp.RDeltaAdd) > 0 {
			ctx["R_delta_add"] = resp.RDeltaAdd
		}
		if len(resp.RDeltaSub) > 0 {
			ctx["R_delta_sub"] = resp.RDeltaSub
		}
		m.post(j, "resource-update", ctx)
		if len(resp.RDeltaSub) > 0 {
			m.post(j, "release", map[string]any{"ranks": subRanks, "final": false})
			m.reallocFree(j, resp.RDeltaSub)
		}
		resp.R = newR
		m.respondDurable(r, resp)
	})
}

// applyDeltas returns R ∪ add − sub, and the ranks sub names.
func applyDeltas(R, add, sub json.RawMessage) (json.RawMessage, string, error) {
	cur, err := rset.Parse(R)
	if err != nil {
		return nil, "", fmt.Errorf("the job's R: %w", err)
	}
	if len(add) > 0 {
		a, err := rset.Parse(add)
		if err != nil {
			return nil, "", fmt.Errorf("R_delta_add: %w", err)
		}
		cur = cur.Union(a)
	}
	ranks := ""
	if len(sub) > 0 {
		s, err := rset.Parse(sub)
		if err != nil {
			return nil, "", fmt.Errorf("R_delta_sub: %w", err)
		}
		cur = cur.Difference(s)
		ranks = s.Ranks().String()
	}
	return cur.Encode(), ranks, nil
}

// reallocFree gives resources back to the scheduler (not the job's last).
func (m *manager) reallocFree(j *job, R json.RawMessage) {
	f, err := m.h.RPC("sched.free", flux.NodeidAny, map[string]any{"id": j.ID, "R": R, "final": false}, 0)
	if err != nil {
		m.log.Error("realloc: sched.free", "id", j.ID.String(), "err", err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			m.log.Error("realloc: sched.free", "id", j.ID.String(), "err", err)
		}
	})
}
