package jobexec

import (
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Critical ranks: by default every shell of a job is critical, and
// losing one (its broker died or became unreachable) is a fatal
// node-failure exception. A job that can survive the loss of some of its
// nodes says which of its shells it cannot lose with
// job-exec.critical-ranks {id, ranks}, ranks an RFC 22 idset of shell
// ranks (the shell on the job's i-th node, in ascending broker rank
// order, is shell rank i). A nested instance (flux batch, flux alloc)
// sends its rank 0 and the brokers with children in its tree. Losing any
// other shell then raises a non-fatal exception and the job goes on; the
// job's exit status is the largest of its critical shells'.

// handleCriticalRanks sets a running job's critical shell ranks.
func (x *executor) handleCriticalRanks(r *flux.Request) {
	var req struct {
		ID    jobid.ID `json:"id"`
		Ranks string   `json:"ranks"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok {
		r.Errorf(syscall.ENOENT, "job %s is not running", req.ID.String())
		return
	}
	if !r.IsOwner() && r.Userid() != j.userid {
		r.Errorf(syscall.EPERM, "job %s belongs to another user", req.ID.String())
		return
	}
	sj, ok := j.aux.(*shellJob)
	if !ok {
		r.Errorf(syscall.EINVAL, "job %s does not run job shells", req.ID.String())
		return
	}
	set, err := idset.Parse(req.Ranks)
	if err != nil {
		r.Errorf(syscall.EINVAL, "critical ranks %q: %v", req.Ranks, err)
		return
	}
	if last, ok := set.Last(); ok && int(last) >= len(sj.plan.Ranks) {
		r.Errorf(syscall.EINVAL, "critical rank %d is not a shell rank of job %s (it has %d)", last, req.ID.String(), len(sj.plan.Ranks))
		return
	}
	sj.critical = &set
	r.Respond(nil)
}

// isCritical reports whether losing the shell on broker rank ends the job.
func (sj *shellJob) isCritical(rank uint) bool {
	if sj.critical == nil {
		return true
	}
	for i, br := range sj.plan.Ranks {
		if br == rank {
			return sj.critical.Contains(uint(i))
		}
	}
	return true
}

// lostNoncritical handles the loss of a shell the job can do without: a
// non-fatal exception, and the shell counts as exited.
func (s *shellExec) lostNoncritical(j *execJob, rank uint, err error) {
	sj := j.aux.(*shellJob)
	if f := sj.futs[rank]; f != nil {
		f.Close()
		delete(sj.futs, rank)
	}
	sj.lost = append(sj.lost, rank)
	j.exception("node-failure", 1, fmt.Sprintf("lost non-critical job shell on broker rank %d: %v", rank, err))
	s.shellExited(j, rank, 0)
}

// hostOf names broker rank for a message about job j: "rank N (host)",
// the host as the job's R names it (the instance's hostlist attribute
// as job-exec read it at load may name a broker booted from a list of
// addresses by its address, before the broker gave its hostname).
func (j *execJob) hostOf(rank uint) string {
	if R, err := rset.Parse(j.R); err == nil {
		if h, ok := R.Host(rank); ok {
			return fmt.Sprintf("rank %d (%s)", rank, h)
		}
	}
	return j.x.hostOf(rank)
}
