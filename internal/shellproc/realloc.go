package shellproc

import (
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51) through the job shell's service
// (<userid>-shell-<jobid>, registered by the leader shell):
//
//   - realloc {spec_add?, spec_sub?, R?, nowait?}: the job asks for
//     more resources or offers some back. The shell sends
//     job-manager.realloc for its job and relays the answer ({alloc_id,
//     type, note?, R_delta_add?, R_delta_sub?, R}). While it waits, the
//     requestor may send realloc-cancel {} (answered {} once the cancel
//     is sent; the realloc itself is answered CANCEL), and a requestor
//     that disconnects cancels it.
//   - release {R} (or {ranks}): the job is done with those resources,
//     typically the R_delta_sub of a SUCCESS. The shell asks job-exec
//     (job-exec.release), which stops what still runs there (the shells
//     on those nodes end their tasks and exit), then gives them back to
//     the job manager (RFC 32 release, final false) and answers {}.

// reallocPending is a realloc request the shell relays.
type reallocPending struct {
	route string
}

func (j *job) reallocRequest(r *flux.Request) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(r.Msg.JSON(), &req); err != nil {
		r.Errorf(syscall.EPROTO, "realloc: payload is not a JSON object: %v", err)
		return
	}
	if j.realloc != nil {
		r.Errorf(syscall.EBUSY, "realloc: job %s has a request in progress already", j.id.String())
		return
	}
	idb, _ := json.Marshal(j.id)
	req["id"] = idb
	f, err := j.x.h.RPC("job-manager.realloc", flux.NodeidAny, req, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	j.realloc = &reallocPending{route: r.Msg.RouteString()}
	f.Then(func(m *flux.Message, err error) {
		j.realloc = nil
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(json.RawMessage(m.JSON()))
	})
}

func (j *job) reallocCancel(r *flux.Request) {
	if j.realloc == nil {
		r.Errorf(syscall.ENOENT, "realloc-cancel: job %s has no realloc request waiting", j.id.String())
		return
	}
	j.x.h.RPC("job-manager.realloc-cancel", flux.NodeidAny, map[string]any{"id": j.id}, flux.NoResponse)
	r.Respond(nil)
}

// reallocDisconnect cancels the waiting request of a requestor that
// went away.
func (j *job) reallocDisconnect(route string) {
	if j.realloc != nil && j.realloc.route == route {
		j.x.h.RPC("job-manager.realloc-cancel", flux.NodeidAny, map[string]any{"id": j.id}, flux.NoResponse)
	}
}

func (j *job) releaseRequest(r *flux.Request) {
	var req struct {
		R     json.RawMessage `json:"R"`
		Ranks *string         `json:"ranks"`
	}
	if err := json.Unmarshal(r.Msg.JSON(), &req); err != nil {
		r.Errorf(syscall.EPROTO, "release: %v", err)
		return
	}
	var ranks idset.Set
	switch {
	case req.R != nil && req.Ranks != nil:
		r.Errorf(syscall.EPROTO, "release: give R or ranks, not both")
		return
	case req.R != nil:
		R, err := rset.Parse(req.R)
		if err != nil {
			r.Errorf(syscall.EPROTO, "release: R: %v", err)
			return
		}
		ranks = R.Ranks()
	case req.Ranks != nil:
		var err error
		if ranks, err = idset.Parse(*req.Ranks); err != nil {
			r.Errorf(syscall.EPROTO, "release: ranks %q: %v", *req.Ranks, err)
			return
		}
	default:
		r.Errorf(syscall.EPROTO, "release: R (the resources to give back) is required")
		return
	}
	if ranks.Empty() {
		r.Errorf(syscall.EPROTO, "release: no ranks to give back")
		return
	}
	if ranks.Contains(uint(j.x.rank)) {
		r.Errorf(syscall.EINVAL, "release: rank %d runs the job's leader shell: the job cannot give it back (it ends instead)", j.x.rank)
		return
	}
	f, err := j.x.h.RPC("job-exec.release", flux.NodeidAny, map[string]any{"id": j.id, "ranks": ranks.String()}, 0)
	r.Relay(f, err)
}

// shellGroup is a part of a job's shells: indexes first .. first+n-1
// of the plan, the nth growth (0: the shells the job started with).
type shellGroup struct {
	n, first, count int
}

// size is the number of shells in the group (count 0, a shell that
// predates groups: all of them).
func (g shellGroup) size(all int) int {
	if g.count == 0 {
		return all
	}
	return g.count
}

// jobPlan is the plan of a job that started on R and then changed as
// changes say, with its groups of shells (growPlan).
func jobPlan(js *jobspec.Jobspec, R *rset.R, changes []wire.PlanChange) (*shell.Plan, []shellGroup, error) {
	po, err := shell.PlanOptionsFrom(js)
	if err != nil {
		return nil, nil, err
	}
	plan, err := shell.MakePlan(js, R, po)
	if err != nil {
		return nil, nil, err
	}
	return growPlan(js, plan, po, changes)
}

// growPlan applies the job's changes to the plan of its original R, and
// returns the groups of shells: the original ones, then one per growth
// (numbered by its place among the changes).
func growPlan(js *jobspec.Jobspec, plan *shell.Plan, po shell.PlanOptions, changes []wire.PlanChange) (*shell.Plan, []shellGroup, error) {
	groups := []shellGroup{{n: 0, first: 0, count: len(plan.Ranks)}}
	for i, c := range changes {
		var err error
		switch {
		case c.Add != nil:
			R, perr := rset.Parse(c.Add)
			if perr != nil {
				return nil, nil, fmt.Errorf("changes[%d]: %v", i, perr)
			}
			first := len(plan.Ranks)
			if plan, err = plan.Grow(js, R, po); err != nil {
				return nil, nil, fmt.Errorf("changes[%d]: %v", i, err)
			}
			groups = append(groups, shellGroup{n: i + 1, first: first, count: len(plan.Ranks) - first})
		case c.Sub != "":
			ranks, perr := idset.Parse(c.Sub)
			if perr != nil {
				return nil, nil, fmt.Errorf("changes[%d]: %v", i, perr)
			}
			if plan, err = plan.Truncate(ranks.Count()); err != nil {
				return nil, nil, fmt.Errorf("changes[%d]: %v", i, err)
			}
			for g := range groups {
				groups[g].count = max(0, min(groups[g].count, len(plan.Ranks)-groups[g].first))
			}
		}
	}
	return plan, groups, nil
}

func groupOf(groups []shellGroup, idx int) shellGroup {
	for i := len(groups) - 1; i >= 0; i-- {
		if g := groups[i]; idx >= g.first && idx < g.first+g.count {
			return g
		}
	}
	return groups[0]
}

// growRequest (job-shell.grow {id, grow}, from job-exec to the leader
// shell before it starts shells on a running job's new nodes): the
// leader takes the job's new plan, so that it waits for the new tasks'
// output and serves their barriers.
func (x *host) growRequest(r *flux.Request) {
	var req struct {
		ID      jobid.ID          `json:"id"`
		Changes []wire.PlanChange `json:"changes"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.grow is for job-exec only")
		return
	}
	j := x.jobs[req.ID]
	if j == nil || !j.leader() {
		r.Errorf(syscall.ENOENT, "job %s has no leader shell here", req.ID.String())
		return
	}
	R, err := rset.Parse(j.R)
	if err != nil {
		r.Errorf(syscall.EINVAL, "R: %v", err)
		return
	}
	plan, groups, err := jobPlan(j.js, R, req.Changes)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	old := j.plan.NTasks
	if j.out != nil {
		// a shell given back: its forwarding count goes with it, so a
		// new shell on that node later starts afresh
		for _, r := range j.plan.Ranks {
			if plan.Index(r) < 0 {
				delete(j.out.fwdSeq, r)
			}
		}
	}
	j.plan = plan
	j.groups = groups
	j.group = groupOf(groups, j.idx)
	if j.out != nil {
		j.out.resize(old, plan.NTasks)
	}
	r.Respond(nil)
}

// resize follows the job's task count from old to n: tasks given back
// (their streams ended when their shell exited) are dropped, the tasks
// of a growth (their ranks may be those of tasks given back before) are
// waited for.
func (o *outputLog) resize(old, n int) {
	if n < len(o.open) {
		for _, bits := range o.open[n:] {
			if bits != 0 {
				o.nopen--
			}
		}
		o.open = o.open[:n]
		return
	}
	for len(o.open) < n {
		o.open = append(o.open, 0)
	}
	for i := old; i < n; i++ {
		if o.open[i] == 0 {
			o.open[i] = 3
			o.nopen++
		}
		for si, ft := range o.files {
			if ft != nil {
				o.closeStream(i, si)
			}
		}
	}
}
