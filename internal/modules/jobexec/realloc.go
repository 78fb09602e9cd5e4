package jobexec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51) on the execution side.
//
// job-exec.grow {id, R_delta_add, R} (the job manager, after a SUCCESS
// that added resources): the job's shells start on the new nodes, shell
// indexes and task ranks after the job's (shell.Plan.Grow). The leader
// shell learns of them first (job-shell.grow), so that it expects their
// output and serves their PMI barriers, which are theirs alone
// (job-shell.pmi-fence with the growth's number). A job of the test
// executor just takes the new R.
//
// job-exec.release {id, ranks} (the job's leader shell, asked by the
// job through shell.release): the shells on those ranks end their tasks
// (SIGTERM, SIGKILL after the kill timeout) and exit; once all of them
// are gone the job manager gets release {ranks, final: false} on the
// start stream (RFC 32) and the request is answered {}. Their exit
// status does not count in the job's.

// releaseWait is a job-exec.release request waiting for its shells.
type releaseWait struct {
	r     *flux.Request
	ranks idset.Set
}

func (x *executor) handleGrow(r *flux.Request) {
	var req wire.ExecGrow
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-exec.grow is for the job manager only")
		return
	}
	j, ok := x.jobs[req.ID]
	switch {
	case !ok:
		r.Errorf(syscall.ENOENT, "job %s is not running", req.ID.String())
		return
	case j.finished || j.killed:
		r.Errorf(syscall.EINVAL, "job %s is ending: it cannot grow", req.ID.String())
		return
	}
	sj, ok := j.aux.(*shellJob)
	if !ok {
		j.R = req.R // test execution: nothing runs on the new nodes
		r.Respond(nil)
		return
	}
	add, err := rset.Parse(req.RDeltaAdd)
	if err != nil {
		r.Errorf(syscall.EPROTO, "job-exec.grow: R_delta_add: %v", err)
		return
	}
	plan, err := sj.plan.Grow(sj.js, add, sj.po)
	if err != nil {
		r.Errorf(syscall.EINVAL, "job %s cannot start shells on its new nodes: %v", j.id.String(), err)
		return
	}
	first := len(sj.plan.Ranks)
	sj.plan = plan
	sj.changes = append(sj.changes, wire.PlanChange{Add: req.RDeltaAdd})
	j.R = req.R
	leader := sj.plan.Ranks[0]
	f, err := x.h.RPC("job-shell.grow", uint32(leader), map[string]any{"id": j.id, "changes": sj.changes}, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			x.log.Error("job-shell.grow", "id", j.id.String(), "err", err)
		}
		if j.finished || j.killed {
			for _, rank := range sj.plan.Ranks[first:] {
				sj.started++
				x.shell.shellExited(j, rank, 0)
			}
			return
		}
		x.shell.startShells(j, sj.plan.Ranks[first:])
	})
	r.Respond(nil)
}

func (x *executor) handleRelease(r *flux.Request) {
	var req struct {
		ID    jobid.ID `json:"id"`
		Ranks string   `json:"ranks"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j, ok := x.jobs[req.ID]
	switch {
	case !ok:
		r.Errorf(syscall.ENOENT, "job %s is not running", req.ID.String())
		return
	case !r.IsOwner() && r.Userid() != j.userid:
		r.Errorf(syscall.EPERM, "job %s belongs to another user", req.ID.String())
		return
	case j.finished || j.killed:
		r.Errorf(syscall.EINVAL, "job %s is ending: its resources go back with it", req.ID.String())
		return
	}
	ranks, err := idset.Parse(req.Ranks)
	if err != nil || ranks.Empty() {
		r.Errorf(syscall.EPROTO, "job-exec.release: ranks %q: want a non-empty idset", req.Ranks)
		return
	}
	sj, ok := j.aux.(*shellJob)
	if !ok {
		// test execution: nothing runs there
		if err := checkRanksOf(j.R, ranks); err != nil {
			r.Errorf(syscall.EINVAL, "job-exec.release: %v", err)
			return
		}
		j.respond("release", releaseData(ranks))
		r.Respond(nil)
		return
	}
	n := ranks.Count()
	if n >= len(sj.plan.Ranks) {
		r.Errorf(syscall.EINVAL, "job-exec.release: job %s has %d shells: it cannot give back %d (it ends instead)", j.id.String(), len(sj.plan.Ranks), n)
		return
	}
	if last := idset.New(sj.plan.Ranks[len(sj.plan.Ranks)-n:]...); !last.Equal(ranks) {
		r.Errorf(syscall.EINVAL, "job-exec.release: ranks %s are not job %s's last shells (%s): a job gives back the nodes it got last first", ranks.String(), j.id.String(), last.String())
		return
	}
	if _, err := sj.plan.Truncate(n); err != nil {
		r.Errorf(syscall.EINVAL, "job-exec.release: %v", err)
		return
	}
	for rank := range ranks.All() {
		switch {
		case sj.plan.Index(rank) < 0:
			r.Errorf(syscall.EINVAL, "job-exec.release: rank %d is not one of job %s's", rank, j.id.String())
			return
		case rank == sj.plan.Ranks[0]:
			r.Errorf(syscall.EINVAL, "job-exec.release: rank %d runs the job's leader shell", rank)
			return
		case sj.released[rank]:
			r.Errorf(syscall.EINVAL, "job-exec.release: rank %d was given back already", rank)
			return
		}
	}
	if sj.released == nil {
		sj.released = make(map[uint]bool)
	}
	for rank := range ranks.All() {
		sj.released[rank] = true
		if !sj.gone[rank] {
			x.h.RPC("job-shell.kill", uint32(rank), map[string]any{"id": j.id, "signum": int(syscall.SIGTERM)}, flux.NoResponse)
		}
	}
	sj.releases = append(sj.releases, &releaseWait{r: r, ranks: ranks})
	j.after(x.killTimeout, func() {
		for rank := range ranks.All() {
			// (a rank given back and got again has a new shell)
			if sj.released[rank] && !sj.gone[rank] {
				x.h.RPC("job-shell.kill", uint32(rank), map[string]any{"id": j.id, "signum": int(syscall.SIGKILL)}, flux.NoResponse)
			}
		}
	})
	x.shell.checkReleases(j)
}

// checkReleases answers the release requests whose shells are all gone
// (or all of them with an error once the job is done).
func (s *shellExec) checkReleases(j *execJob) {
	sj := j.aux.(*shellJob)
	out := sj.releases[:0]
	for _, w := range sj.releases {
		done := true
		for rank := range w.ranks.All() {
			done = done && sj.gone[rank]
		}
		switch {
		case sj.exited == len(sj.plan.Ranks):
			w.r.Errorf(syscall.EINVAL, "job %s ended: its resources go back with it", j.id.String())
		case done:
			s.dropShells(j, w.ranks)
			j.respond("release", releaseData(w.ranks))
			w.r.Respond(nil)
		default:
			out = append(out, w)
		}
	}
	clear(sj.releases[len(out):])
	sj.releases = out
}

func releaseData(ranks idset.Set) []byte {
	return []byte(`{"final":false,"ranks":` + strconv.Quote(ranks.String()) + `}`)
}

// checkRanksOf says why ranks are not a part of R that may be given back
// (all of R, or not in it).
func checkRanksOf(R json.RawMessage, ranks idset.Set) error {
	r, err := rset.Parse(R)
	if err != nil {
		return err
	}
	have := r.Ranks()
	for rank := range ranks.All() {
		if !have.Contains(rank) {
			return fmt.Errorf("rank %d is not one of the job's", rank)
		}
	}
	if ranks.Count() >= have.Count() {
		return fmt.Errorf("the job cannot give back all its ranks (it ends instead)")
	}
	return nil
}

// dropShells takes the shells of ranks, all gone, out of the job: the
// plan loses them (they are its last: handleRelease checked), so a
// later growth numbers its tasks from there, and they no longer count
// among the job's shells; the leader shell is told.
func (s *shellExec) dropShells(j *execJob, ranks idset.Set) {
	sj := j.aux.(*shellJob)
	plan, err := sj.plan.Truncate(ranks.Count())
	if err != nil {
		j.x.log.Error("release: the job's plan", "id", j.id.String(), "err", err)
		return
	}
	sj.plan = plan
	sj.changes = append(sj.changes, wire.PlanChange{Sub: ranks.String()})
	for rank := range ranks.All() {
		if sj.gone[rank] {
			sj.exited--
		}
		if sj.startedRanks[rank] {
			sj.started--
		}
		delete(sj.gone, rank)
		delete(sj.startedRanks, rank)
		delete(sj.released, rank)
		delete(sj.detached, rank)
		if f := sj.futs[rank]; f != nil {
			f.Close()
			delete(sj.futs, rank)
		}
	}
	leader := sj.plan.Ranks[0]
	f, err := j.x.h.RPC("job-shell.grow", uint32(leader), map[string]any{"id": j.id, "changes": sj.changes}, 0)
	if err != nil {
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			j.x.log.Error("job-shell.grow", "id", j.id.String(), "err", err)
		}
	})
}
