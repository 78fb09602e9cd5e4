package jobmanager

import (
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// recentInactive is how many of the newest inactive jobs keep their full
// record in memory (plugins may still be looking at them); older ones
// are compacted to a 56-byte inactiveRec (a full record takes ~430), so an
// instance that has run many jobs stays small.
const recentInactive = 1024

// forgottenJob is what the job manager keeps of an inactive job beyond
// inactiveLimit: enough to purge it (its records stay in the KVS and in
// job-list until then).
type forgottenJob struct {
	id        jobid.ID
	tInactive float64
}

// inactiveRec is what the job manager remembers of a job that has been
// inactive for a while: enough to answer lookups, waits, dependencies
// and stats exactly as for the full record. Plugin aux data and set-flags
// are not kept.
type inactiveRec struct {
	tSubmit, tInactive, expiration float64
	priority                       int64
	userid                         uint32
	waitStatus                     int32
	finishStatus                   int32
	flags                          int32
	exception                      uint16 // index in strs: the fatal exception's type
	result                         uint16 // index in strs
	urgency                        int8
	bits                           uint8 // recRan | recStarted | ...
}

const (
	recRan = 1 << iota
	recStarted
	recFinished
	recFatal
	recFatalBeforeFinish
)

// strs interns the few strings inactive records hold (results and
// exception types), so a record stays at 56 bytes.
type strs struct {
	list []string
	idx  map[string]uint16
}

func (s *strs) intern(v string) uint16 {
	if i, ok := s.idx[v]; ok {
		return i
	}
	if len(s.list) == 1<<16-1 {
		return 0 // every slot taken (by user-defined exception types): ""
	}
	if s.idx == nil {
		s.idx = map[string]uint16{"": 0}
		s.list = []string{""}
		if v == "" {
			return 0
		}
	}
	i := uint16(len(s.list))
	s.list = append(s.list, v)
	s.idx[v] = i
	return i
}

func (s *strs) get(i uint16) string {
	if int(i) < len(s.list) {
		return s.list[i]
	}
	return ""
}

// flagBit is bit if on, else 0.
func flagBit(on bool, bit uint8) uint8 {
	if on {
		return bit
	}
	return 0
}

func (m *manager) compactJob(j *job) inactiveRec {
	bits := flagBit(j.Ran, recRan) | flagBit(j.Started, recStarted) | flagBit(j.finished, recFinished) |
		flagBit(j.fatal, recFatal) | flagBit(j.fatalBeforeFinish, recFatalBeforeFinish)
	return inactiveRec{
		tSubmit: j.TSubmit, tInactive: j.tInactive, expiration: j.expiration,
		priority: j.Priority, userid: j.Userid, urgency: int8(j.Urgency),
		flags: int32(j.Flags), waitStatus: int32(j.WaitStatus),
		finishStatus: int32(j.finishStatus), exception: m.strs.intern(j.exceptType),
		result: m.strs.intern(j.Result), bits: bits,
	}
}

// job rebuilds the full (inactive) record of job id.
func (r *inactiveRec) job(id jobid.ID, s *strs) *job {
	j := newJob(id, r.userid, int(r.urgency), int(r.flags), r.tSubmit)
	j.State = jobtap.StateInactive
	j.Priority = r.priority
	j.Result = s.get(r.result)
	j.WaitStatus = int(r.waitStatus)
	j.exceptType = s.get(r.exception)
	j.Exception = j.exceptType
	j.Ran, j.Started = r.bits&recRan != 0, r.bits&recStarted != 0
	j.finishStatus = int(r.finishStatus)
	j.finished = r.bits&recFinished != 0
	j.fatal = r.bits&recFatal != 0
	j.fatalBeforeFinish = r.bits&recFatalBeforeFinish != 0
	j.tInactive, j.expiration = r.tInactive, r.expiration
	j.cleanPosted, j.releasedAll = true, true
	return j
}

// job finds a job by id, active or inactive.
func (m *manager) job(id jobid.ID) (*job, bool) {
	m.ensure(id)
	if j, ok := m.jobs[id]; ok {
		return j, true
	}
	if r, ok := m.done[id]; ok {
		return r.job(id, &m.strs), true
	}
	return nil, false
}

// known reports whether id names a job the manager remembers.
func (m *manager) known(id jobid.ID) bool {
	m.ensure(id)
	if _, ok := m.jobs[id]; ok {
		return true
	}
	_, ok := m.done[id]
	return ok
}

// ensure reads job id from the KVS if it may be one of the inactive jobs
// not read yet since a restart (load.go).
func (m *manager) ensure(id jobid.ID) {
	if !m.load.on || m.jobs[id] != nil {
		return
	}
	if _, ok := m.done[id]; !ok {
		m.loadLate(id)
	}
}

// trimInactive compacts the inactive jobs older than the newest
// recentInactive and forgets the oldest beyond inactiveLimit, all but
// their id and when they became inactive (what purge needs).
func (m *manager) trimInactive() {
	for len(m.inactive) > m.inactiveLimit {
		old := m.inactive[0]
		m.forgotten = append(m.forgotten, forgottenJob{id: old, tInactive: m.tInactive(old)})
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
			m.done[id] = m.compactJob(j)
			delete(m.jobs, id)
		}
	}
}
