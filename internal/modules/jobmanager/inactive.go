package jobmanager

import (
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// recentInactive is how many of the newest inactive jobs keep their full
// record in memory (plugins may still be looking at them); older ones
// are compacted to an inactiveRec, about a quarter of the size, so an
// instance that has run many jobs stays small.
const recentInactive = 1024

// inactiveRec is what the job manager remembers of a job that has been
// inactive for a while: enough to answer lookups, waits, dependencies
// and stats exactly as for the full record. Plugin aux data and set-flags
// are not kept.
type inactiveRec struct {
	tSubmit, tInactive, expiration float64
	priority                       int64
	userid                         uint32
	urgency                        int32
	flags                          int32
	waitStatus                     int32
	finishStatus                   int32
	exception                      string // the fatal exception's type
	result                         string
	ran, started                   bool
	finished, fatal                bool
	fatalBeforeFinish              bool
}

func compactJob(j *job) inactiveRec {
	return inactiveRec{
		tSubmit: j.TSubmit, tInactive: j.tInactive, expiration: j.expiration,
		priority: j.Priority, userid: j.Userid, urgency: int32(j.Urgency),
		flags: int32(j.Flags), waitStatus: int32(j.WaitStatus),
		finishStatus: int32(j.finishStatus), exception: j.exceptType,
		result: j.Result, ran: j.Ran, started: j.Started,
		finished: j.finished, fatal: j.fatal, fatalBeforeFinish: j.fatalBeforeFinish,
	}
}

// job rebuilds the full (inactive) record of job id.
func (r *inactiveRec) job(id jobid.ID) *job {
	j := newJob(id, r.userid, int(r.urgency), int(r.flags), r.tSubmit)
	j.State = jobtap.StateInactive
	j.Priority = r.priority
	j.Result = r.result
	j.WaitStatus = int(r.waitStatus)
	j.Exception = r.exception
	j.Ran, j.Started = r.ran, r.started
	j.exceptType = r.exception
	j.finishStatus = int(r.finishStatus)
	j.finished, j.fatal, j.fatalBeforeFinish = r.finished, r.fatal, r.fatalBeforeFinish
	j.tInactive, j.expiration = r.tInactive, r.expiration
	j.cleanPosted, j.releasedAll = true, true
	return j
}

// job finds a job by id, active or inactive.
func (m *manager) job(id jobid.ID) (*job, bool) {
	if j, ok := m.jobs[id]; ok {
		return j, true
	}
	if r, ok := m.done[id]; ok {
		return r.job(id), true
	}
	return nil, false
}

// known reports whether id names a job the manager remembers.
func (m *manager) known(id jobid.ID) bool {
	if _, ok := m.jobs[id]; ok {
		return true
	}
	_, ok := m.done[id]
	return ok
}

// trimInactive compacts the inactive jobs older than the newest
// recentInactive and forgets the oldest beyond inactiveLimit.
func (m *manager) trimInactive() {
	for len(m.inactive) > m.inactiveLimit {
		old := m.inactive[0]
		m.inactive[0] = 0
		m.inactive = m.inactive[1:]
		if m.ncompact > 0 {
			m.ncompact--
		}
		delete(m.jobs, old)
		delete(m.done, old)
	}
	for len(m.inactive)-m.ncompact > recentInactive {
		id := m.inactive[m.ncompact]
		m.ncompact++
		if j, ok := m.jobs[id]; ok && j.State == jobtap.StateInactive {
			m.done[id] = compactJob(j)
			delete(m.jobs, id)
		}
	}
}
