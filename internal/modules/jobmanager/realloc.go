package jobmanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51, seed 000). A running job's shell (its
// realloc method), or its owner through flux job realloc, sends
// job-manager.realloc {id, spec_add?, spec_sub?, R?, nowait?}: at least
// one of spec_add (a jobspec of what to add) and spec_sub (a jobspec of
// what to give back; R names the very resources). The plugins vet the
// growth (jobtap.ReallocHook: the same limits as a new job); the request
// goes on to the scheduler as sched.realloc with the job's priority and
// user, and waits there, as a pending job would, unless nowait is set.
// The requestor gets the scheduler's answer {alloc_id, type, note?,
// R_delta_add?, R_delta_sub?} plus the job's R:
//
//   - SUCCESS with R_delta_add: the job's R in the KVS becomes R ∪ add,
//     and the eventlog gets alloc {alloc_id} then resource-update
//     {alloc_id, R_delta_add}; the executor is told (job-exec.grow), and
//     starts the job's shells on the new nodes.
//   - SUCCESS with R_delta_sub: nothing changes yet. The job stops using
//     those resources, then says so through its shell (shell.release);
//     the executor, once the shells there have exited, sends release
//     {ranks, final: false} on the job's start stream (RFC 32). Then the
//     job's R loses them (resource-update {R_delta_sub}), release is
//     posted, the scheduler gets them back (sched.free, final false) and
//     free {ranks, final: false} follows its answer.
//   - DENY, CANCEL: nothing changes. A scheduler without realloc
//     (ENOSYS) is answered UNSUPPORTED (3) here.
//
// A waiting request ends with CANCEL when its requestor disconnects or
// asks job-manager.realloc-cancel {id}: the job manager sends
// sched.realloc_cancel {matchtag} (RFC 51, RFC 6).

// pendingRealloc is a job's request with the scheduler.
type pendingRealloc struct {
	r     *flux.Request
	f     *flux.Future
	route string // the requestor's, for disconnect
}

// reallocRequest is job-manager.realloc's payload.
type reallocRequest struct {
	ID      jobid.ID
	SpecAdd json.RawMessage
	SpecSub json.RawMessage
	R       json.RawMessage
	NoWait  bool
}

// decodeReallocRequest checks each key, naming the one that is wrong.
func decodeReallocRequest(p []byte) (*reallocRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(p, &raw); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object: %v", err)
	}
	if raw["id"] == nil {
		return nil, fmt.Errorf("id is required")
	}
	req := &reallocRequest{}
	for key, v := range raw {
		var err error
		switch key {
		case "id":
			err = json.Unmarshal(v, &req.ID)
		case "spec_add":
			req.SpecAdd, err = v, checkJobspec(v)
		case "spec_sub":
			req.SpecSub, err = v, checkJobspec(v)
		case "R":
			if _, perr := rset.Parse(v); perr != nil {
				err = perr
			}
			req.R = v
		case "nowait":
			err = json.Unmarshal(v, &req.NoWait)
		default:
			err = fmt.Errorf("unknown key (RFC 51 has id, spec_add, spec_sub, R; fluxgo adds nowait)")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
	}
	if req.SpecAdd == nil && req.SpecSub == nil {
		return nil, fmt.Errorf("at least one of spec_add and spec_sub is required (RFC 51)")
	}
	return req, nil
}

func checkJobspec(v json.RawMessage) error {
	if len(v) == 0 || v[0] != '{' {
		return fmt.Errorf("must be a jobspec (a JSON object)")
	}
	_, err := jobspec.Parse(v)
	return err
}

// sizeOf counts the resources of an R (the zero Size if it is not one).
func sizeOf(R json.RawMessage) jobtap.Size {
	r, err := rset.Parse(R)
	if err != nil {
		return jobtap.Size{}
	}
	return jobtap.Size{Nodes: r.NNodes(), Cores: r.NCores(), GPUs: r.NGPUs()}
}

func (m *manager) handleRealloc(r *flux.Request) {
	req, err := decodeReallocRequest(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "realloc: %v", err)
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorize(r, j) {
		return
	}
	switch {
	case j.State != jobtap.StateRun || j.fatal:
		r.Errorf(syscall.EINVAL, "job %s is %s: only running jobs can change their resources", j.ID.String(), j.State)
		return
	case j.bypass:
		r.Errorf(syscall.EINVAL, "job %s brought its own R (alloc-bypass): the scheduler cannot change it", j.ID.String())
		return
	case j.realloc != nil:
		r.Errorf(syscall.EBUSY, "job %s already has a realloc request in progress", j.ID.String())
		return
	}
	if req.SpecSub != nil {
		if err := m.chooseSub(j, req); err != nil {
			r.Errorf(syscall.EINVAL, "realloc: %v", err)
			return
		}
	}
	if req.SpecAdd != nil {
		js, _ := jobspec.Parse(req.SpecAdd)
		add := jobtap.Size{Nodes: js.NNodes(), Cores: js.NSlots() * js.CoresPerSlot(), GPUs: js.ResourceCount("gpu")}
		if err := m.plugins.reallocCheck(j, sizeOf(j.R), add); err != nil {
			r.Respond(fluxjob.ReallocResponse{Type: fluxjob.ReallocDeny, Note: err.Error(), R: j.R})
			return
		}
	}
	fwd := map[string]any{"job_id": j.ID, "priority": j.Priority, "userid": j.Userid, "generation": m.generation}
	for k, v := range map[string]json.RawMessage{"spec_add": req.SpecAdd, "spec_sub": req.SpecSub, "R": req.R} {
		if v != nil {
			fwd[k] = v
		}
	}
	if req.NoWait {
		fwd["nowait"] = true
	}
	f, err := m.h.RPC("sched.realloc", flux.NodeidAny, fwd, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	j.realloc = &pendingRealloc{r: r, f: f, route: r.Msg.RouteString()}
	m.reallocs[j.ID] = j
	f.Then(func(msg *flux.Message, err error) {
		j.realloc = nil
		delete(m.reallocs, j.ID)
		m.reallocAnswer(j, r, msg, err)
	})
}

// reallocAnswer applies and relays the scheduler's answer.
func (m *manager) reallocAnswer(j *job, r *flux.Request, msg *flux.Message, err error) {
	if errors.Is(err, syscall.ENOSYS) {
		r.Respond(fluxjob.ReallocResponse{Type: fluxjob.ReallocUnsupported, Note: "the scheduler does not support realloc", R: j.R})
		return
	}
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
		resp.R = j.R
		r.Respond(resp)
		return
	}
	if len(resp.RDeltaAdd) == 0 && len(resp.RDeltaSub) == 0 {
		m.log.Error("realloc: the scheduler answered SUCCESS with neither R_delta_add nor R_delta_sub", "id", j.ID.String())
		r.Errorf(syscall.EPROTO, "realloc: the scheduler answered SUCCESS with neither R_delta_add nor R_delta_sub")
		return
	}
	if j.State != jobtap.StateRun || j.fatal {
		// it ended meanwhile: what it was given goes back at once
		if len(resp.RDeltaAdd) > 0 {
			m.reallocFree(j, resp.RDeltaAdd, "")
		}
		r.Respond(fluxjob.ReallocResponse{AllocID: resp.AllocID, Type: fluxjob.ReallocCancel, Note: "the job ended during the request"})
		return
	}
	if len(resp.RDeltaAdd) > 0 {
		before := sizeOf(j.R)
		newR, err := applyDelta(j.R, resp.RDeltaAdd, true)
		if err != nil {
			m.log.Error("realloc: the scheduler's R_delta_add does not apply", "id", j.ID.String(), "err", err)
			m.reallocFree(j, resp.RDeltaAdd, "")
			r.Errorf(syscall.EPROTO, "realloc: R_delta_add: %v", err)
			return
		}
		j.R = newR
		m.batch.PutShared(j.kvsDir+".R", newR)
		m.post(j, "alloc", map[string]any{"alloc_id": resp.AllocID})
		m.post(j, "resource-update", map[string]any{"alloc_id": resp.AllocID, "R_delta_add": resp.RDeltaAdd})
		m.plugins.resized(j, diffSize(sizeOf(newR), before))
		if order, err := m.rankOrder(j); err == nil {
			if add, err := rset.Parse(resp.RDeltaAdd); err == nil {
				j.rankOrder = appendNew(order, slices.Collect(add.Ranks().All()))
			}
		}
		m.exec.grow(j, resp.RDeltaAdd)
	}
	if len(resp.RDeltaSub) > 0 {
		// the release that follows names the request it ends
		if sub, err := rset.Parse(resp.RDeltaSub); err == nil {
			if j.subGrants == nil {
				j.subGrants = make(map[string]uint64)
			}
			j.subGrants[sub.Ranks().String()] = resp.AllocID
		}
	}
	resp.R = j.R
	m.respondDurable(r, resp)
}

func diffSize(a, b jobtap.Size) jobtap.Size {
	return jobtap.Size{Nodes: a.Nodes - b.Nodes, Cores: a.Cores - b.Cores, GPUs: a.GPUs - b.GPUs}
}

// applyDelta returns R ∪ delta (add) or R − delta.
func applyDelta(R, delta json.RawMessage, add bool) (json.RawMessage, error) {
	cur, err := rset.Parse(R)
	if err != nil {
		return nil, fmt.Errorf("the job's R: %w", err)
	}
	d, err := rset.Parse(delta)
	if err != nil {
		return nil, err
	}
	if add {
		cur = cur.Union(d)
	} else {
		cur = cur.Difference(d)
	}
	return cur.Encode(), nil
}

// partialRelease handles the executor's release {ranks, final: false}:
// the shells on those ranks are gone, so their resources leave the job.
func (m *manager) partialRelease(j *job, data map[string]any) {
	ranks, _ := data["ranks"].(string)
	ids, err := idset.Parse(ranks)
	if err != nil || ids.Empty() {
		m.log.Error("exec release final=false: bad ranks", "id", j.ID.String(), "ranks", ranks)
		return
	}
	cur, err := rset.Parse(j.R)
	if err != nil {
		m.log.Error("exec release: the job's R", "id", j.ID.String(), "err", err)
		return
	}
	part := cur.CopyRanks(ids)
	if part.Empty() || part.NNodes() == cur.NNodes() {
		m.log.Error("exec release final=false: the ranks are not a part of the job's", "id", j.ID.String(), "ranks", ranks)
		return
	}
	before := sizeOf(j.R)
	if order, err := m.rankOrder(j); err == nil {
		j.rankOrder = slices.DeleteFunc(slices.Clone(order), func(r uint) bool { return ids.Contains(r) })
	}
	sub := part.Encode()
	j.R = cur.ExcludeRanks(ids).Encode()
	m.batch.PutShared(j.kvsDir+".R", j.R)
	ranks = part.Ranks().String()
	ctx := map[string]any{"R_delta_sub": json.RawMessage(sub)}
	if id, ok := j.subGrants[ranks]; ok {
		ctx["alloc_id"] = id
		delete(j.subGrants, ranks)
	}
	m.post(j, "resource-update", ctx)
	m.post(j, "release", map[string]any{"ranks": ranks, "final": false})
	m.plugins.resized(j, diffSize(sizeOf(j.R), before))
	m.reallocFree(j, sub, ranks)
}

// reallocFree gives resources back to the scheduler (not the job's
// last); with ranks set, free {ranks, final: false} is posted once the
// scheduler has them.
func (m *manager) reallocFree(j *job, R json.RawMessage, ranks string) {
	f, err := m.h.RPC("sched.free", flux.NodeidAny, map[string]any{"id": j.ID, "R": R, "final": false}, 0)
	if err != nil {
		m.log.Error("realloc: sched.free", "id", j.ID.String(), "err", err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			m.log.Error("realloc: sched.free", "id", j.ID.String(), "err", err)
			return
		}
		if ranks != "" && j.State < jobtap.StateInactive {
			m.post(j, "free", map[string]any{"ranks": ranks, "final": false})
		}
	})
}

// handleReallocCancel: job-manager.realloc-cancel {id} ends the job's
// waiting request (answered CANCEL); no response of its own.
func (m *manager) handleReallocCancel(r *flux.Request) {
	var req struct {
		ID jobid.ID `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorize(r, j) {
		return
	}
	if j.realloc == nil {
		r.Errorf(syscall.ENOENT, "job %s has no realloc request waiting", j.ID.String())
		return
	}
	m.cancelRealloc(j)
	r.Respond(nil)
}

func (m *manager) cancelRealloc(j *job) {
	m.h.RPC("sched.realloc_cancel", flux.NodeidAny, map[string]any{"matchtag": j.realloc.f.Matchtag()}, flux.NoResponse)
}

// reallocDisconnect cancels the requests of a requestor that went away.
func (m *manager) reallocDisconnect(route string) {
	for _, j := range m.reallocs {
		if j.realloc != nil && j.realloc.route == route {
			m.cancelRealloc(j)
		}
	}
}

// grow tells the executor about resources added to a running job.
func (e *execClient) grow(j *job, add json.RawMessage) {
	if e.service == "" || !j.startSent {
		return
	}
	f, err := e.m.h.RPC(e.service+".grow", flux.NodeidAny, wire.ExecGrow{ID: j.ID, RDeltaAdd: add, R: j.R}, 0)
	if err != nil {
		e.m.log.Error("realloc: "+e.service+".grow", "id", j.ID.String(), "err", err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil && !errors.Is(err, syscall.ENOSYS) {
			e.m.log.Error("realloc: "+e.service+".grow", "id", j.ID.String(), "err", err)
		}
	})
}

// rankOrder returns the job's nodes in the order it got them: those of
// its first R in ascending order, then each growth's. A job gives back
// the nodes it got last first (LIFO): its shells, and a nested
// instance's brokers, are numbered in that order, so what goes is always
// the end of their numbering. Kept in memory once known; after a
// restart it is rebuilt from the eventlog (the first R is the current
// one less what was added, plus what was given back, undone last to
// first).
func (m *manager) rankOrder(j *job) ([]uint, error) {
	if j.rankOrder != nil {
		return j.rankOrder, nil
	}
	cur, err := rset.Parse(j.R)
	if err != nil {
		return nil, fmt.Errorf("the job's R: %w", err)
	}
	type change struct {
		add   bool
		ranks []uint
	}
	var changes []change
	evs, _ := eventlog.Parse(j.eventlog)
	for _, ev := range evs {
		if ev.Name != "resource-update" {
			continue
		}
		var c struct {
			Add json.RawMessage `json:"R_delta_add"`
			Sub json.RawMessage `json:"R_delta_sub"`
		}
		if ev.DecodeContext(&c) != nil {
			continue
		}
		for _, d := range []struct {
			raw json.RawMessage
			add bool
		}{{c.Add, true}, {c.Sub, false}} {
			if len(d.raw) == 0 {
				continue
			}
			r, err := rset.Parse(d.raw)
			if err != nil {
				return nil, fmt.Errorf("resource-update: %w", err)
			}
			changes = append(changes, change{add: d.add, ranks: slices.Collect(r.Ranks().All())})
		}
	}
	set := cur.Ranks()
	for i := len(changes) - 1; i >= 0; i-- {
		for _, r := range changes[i].ranks {
			if changes[i].add {
				set.Remove(r)
			} else {
				set.Add(r)
			}
		}
	}
	order := slices.Collect(set.All())
	for _, c := range changes {
		if c.add {
			order = appendNew(order, c.ranks)
		} else {
			order = slices.DeleteFunc(order, func(r uint) bool { return slices.Contains(c.ranks, r) })
		}
	}
	j.rankOrder = order
	return order, nil
}

// appendNew appends the ranks not in order yet (a growth by cores on a
// node the job has does not move it).
func appendNew(order, ranks []uint) []uint {
	for _, r := range ranks {
		if !slices.Contains(order, r) {
			order = append(order, r)
		}
	}
	return order
}

// chooseSub works out what a shrink gives back: whole nodes, the ones
// the job got last. With R, R must be exactly that; without, spec_sub's
// node count picks them, and R is filled in for the scheduler. Requests
// the scheduler will deny anyway (no node count, all of the job) pass.
func (m *manager) chooseSub(j *job, req *reallocRequest) error {
	order, err := m.rankOrder(j)
	if err != nil {
		return err
	}
	cur, err := rset.Parse(j.R)
	if err != nil {
		return err
	}
	if req.R != nil {
		r, err := rset.Parse(req.R)
		if err != nil {
			return fmt.Errorf("R: %w", err)
		}
		ranks := r.Ranks()
		if whole := cur.CopyRanks(ranks); whole.String() != r.String() {
			return fmt.Errorf("R names %s, part of the job's %s: a job gives back whole nodes", r.String(), whole.String())
		}
		n := ranks.Count()
		if n >= len(order) {
			return nil
		}
		if last := idset.New(order[len(order)-n:]...); !last.Equal(ranks) {
			return fmt.Errorf("R names ranks %s, but a job gives back the nodes it got last first (LIFO): its last %d are %s", ranks.String(), n, last.String())
		}
		return nil
	}
	js, err := jobspec.Parse(req.SpecSub)
	if err != nil {
		return fmt.Errorf("spec_sub: %w", err)
	}
	n := js.NNodes()
	if n < 1 || n >= len(order) {
		return nil
	}
	req.R = cur.CopyRanks(idset.New(order[len(order)-n:]...)).Encode()
	return nil
}
