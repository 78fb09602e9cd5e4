package jobmanager

import (
	"sort"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The bulk operations of flux-core's job manager (flux cancel --all, flux
// job raiseall and killall use them): job-manager.raiseall {dry_run,
// userid, states, severity, type, note?} and job-manager.killall
// {dry_run, userid, signum}, each answering {count, errors}. userid
// FLUX_USERID_UNKNOWN (0xFFFFFFFF, or -1) means every user's jobs, which
// only the instance owner and operators may touch, as they may name any
// user; others may only name themselves.

const useridAll = 0xFFFFFFFF

// bulkTargets returns the active jobs in states (a bitmask of RFC 21
// states) of userid, oldest first, or answers r with an error.
// guestErr is flux-core's refusal of a guest targeting others' jobs.
func (m *manager) bulkTargets(r *flux.Request, userid int64, states jobtap.State, guestErr string) ([]*job, bool) {
	all := userid == -1 || userid == useridAll
	switch {
	case all && !r.IsOperator():
		r.Errorf(syscall.EPERM, "%s", guestErr)
		return nil, false
	case !all && (userid < 0 || userid > useridAll):
		r.Errorf(syscall.EINVAL, "invalid userid %d", userid)
		return nil, false
	case !all && uint32(userid) != r.Userid() && !r.IsOperator():
		r.Errorf(syscall.EPERM, "%s", guestErr)
		return nil, false
	case states&jobtap.StateActive == 0:
		r.Errorf(syscall.EINVAL, "states %#x names no active job state", int(states))
		return nil, false
	}
	var out []*job
	for _, j := range m.jobs {
		if j.State&states != 0 && j.State != jobtap.StateInactive && (all || j.Userid == uint32(userid)) {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, true
}

func (m *manager) handleRaiseAll(r *flux.Request) {
	var req struct {
		DryRun   bool   `json:"dry_run"`
		Userid   int64  `json:"userid"`
		States   int    `json:"states"`
		Severity int    `json:"severity"`
		Type     string `json:"type"`
		Note     string `json:"note"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !checkException(r, req.Type, req.Severity) {
		return
	}
	jobs, ok := m.bulkTargets(r, req.Userid, jobtap.State(req.States), "guests can only raise exceptions on their own jobs")
	if !ok {
		return
	}
	if !req.DryRun {
		for _, j := range jobs {
			if j.State != jobtap.StateInactive { // an earlier raise may have ended it
				m.raise(j, req.Type, req.Severity, req.Note, r.Userid())
			}
		}
	}
	m.respondDurable(r, map[string]any{"count": len(jobs), "errors": 0})
}

func (m *manager) handleKillAll(r *flux.Request) {
	var req struct {
		DryRun bool  `json:"dry_run"`
		Userid int64 `json:"userid"`
		Signum int   `json:"signum"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Signum <= 0 || req.Signum >= 65 {
		r.Errorf(syscall.EINVAL, "invalid signal number %d", req.Signum)
		return
	}
	jobs, ok := m.bulkTargets(r, req.Userid, jobtap.StateRunning, "guests can only kill their own jobs")
	if !ok {
		return
	}
	count := 0
	for _, j := range jobs {
		if !j.startSent {
			continue
		}
		count++
		if !req.DryRun {
			m.exec.kill(j, req.Signum)
		}
	}
	r.Respond(map[string]any{"count": count, "errors": 0})
}

// handleGetattr answers job-manager.getattr {id, attrs} (flux-core's
// view into the job manager, for tests and tools): "jobspec" is the job's
// current jobspec without its environment (redacted, as flux-core's),
// "R" its resource set; an attribute the job does not have (an inactive
// job keeps neither in memory) is ENOENT.
func (m *manager) handleGetattr(r *flux.Request) {
	var req struct {
		ID    jobid.ID `json:"id"`
		Attrs []any    `json:"attrs"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorizeOperator(r, j) {
		return
	}
	out := map[string]any{}
	for _, a := range req.Attrs {
		name, ok := a.(string)
		if !ok {
			r.Errorf(syscall.EPROTO, "attribute list contains non-string")
			return
		}
		switch {
		case name == "jobspec" && j.Jobspec != nil:
			out[name] = j.Jobspec
		case name == "R" && len(j.R) > 0:
			out[name] = j.R
		case name == "jobspec" || name == "R":
			r.Errorf(syscall.ENOENT, "job %s has no %s in the job manager's memory", j.ID.String(), name)
			return
		default:
			r.Errorf(syscall.ENOENT, "unknown attr %s", name)
			return
		}
	}
	r.Respond(out)
}
