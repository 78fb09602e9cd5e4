package jobmanager

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// job-manager.wait (flux job wait) works like wait(2) for jobs submitted
// with the waitable flag: {id} waits for that job, {id: -1} (flux-core's
// FLUX_JOBID_ANY) for the next waitable job to end; either answers
// {id, success, errstr}. A job's result is consumed by the first wait
// that gets it; with no waitable job left, a wait for any fails ECHILD.

// waitState is the job manager's waitable-job bookkeeping.
type waitState struct {
	active  int                          // waitable jobs not yet inactive
	zombies []jobid.ID                   // ended, not yet waited for (oldest first)
	byID    map[jobid.ID][]*flux.Request // waits for one job
	any     []*flux.Request              // waits for any job
	reaped  map[jobid.ID]bool            // results already consumed
	// notes keeps the fatal exception note of zombies, which inactive
	// job records do not
	notes map[jobid.ID]string
}

func waitable(j *job) bool { return j.Flags&flagWaitable != 0 }

// waitCheck refuses the waitable flag to users other than the instance
// owner (flux-job(1)).
func waitCheck(j *job, owner bool) error {
	if waitable(j) && !owner {
		return fmt.Errorf("only the instance owner may submit a job with the waitable flag")
	}
	return nil
}

// waitNew counts a new waitable job.
func (m *manager) waitNew(j *job) {
	if waitable(j) {
		m.wait.active++
	}
}

// waitDone hands an ended waitable job to a waiter, or keeps it for the
// next one.
func (m *manager) waitDone(j *job) {
	if !waitable(j) {
		return
	}
	w := &m.wait
	w.active--
	switch {
	case len(w.byID[j.ID]) > 0:
		for _, r := range w.byID[j.ID] {
			m.answerWait(r, j)
		}
		delete(w.byID, j.ID)
		w.reap(j.ID)
	case len(w.any) > 0:
		r := w.any[0]
		w.any = w.any[1:]
		m.answerWait(r, j)
		w.reap(j.ID)
	default:
		w.zombies = append(w.zombies, j.ID)
		if j.exceptNote != "" {
			if w.notes == nil {
				w.notes = make(map[jobid.ID]string)
			}
			w.notes[j.ID] = j.exceptNote
		}
	}
	m.waitNoChildren()
}

func (w *waitState) reap(id jobid.ID) {
	if w.reaped == nil {
		w.reaped = make(map[jobid.ID]bool)
	}
	w.reaped[id] = true
	for i, z := range w.zombies {
		if z == id {
			w.zombies = append(w.zombies[:i], w.zombies[i+1:]...)
			break
		}
	}
}

// waitNoChildren fails the waits for any job once none can end.
func (m *manager) waitNoChildren() {
	if m.wait.active > 0 || len(m.wait.zombies) > 0 {
		return
	}
	for _, r := range m.wait.any {
		r.Errorf(syscall.ECHILD, "there are no more waitable jobs")
	}
	m.wait.any = nil
}

func (m *manager) answerWait(r *flux.Request, j *job) {
	success := j.Result == "COMPLETED"
	errstr := ""
	if !success {
		// like flux-core, describe what ended the job: a fatal exception
		// before the shells finished, or their exit status
		if j.fatal && (j.fatalBeforeFinish || !j.finished) {
			note := j.exceptNote
			if n, ok := m.wait.notes[j.ID]; ok {
				note = n
				delete(m.wait.notes, j.ID)
			}
			errstr = fmt.Sprintf("Fatal exception type=%s %s", j.exceptType, note)
		} else {
			_, errstr = fluxjob.ExitCode(j.finishStatus)
		}
	}
	r.Respond(map[string]any{"id": j.ID, "success": success, "errstr": errstr})
}

// waitAnyID reports whether a request id is FLUX_JOBID_ANY (sent as -1,
// or as its unsigned value).
func waitAnyID(n json.Number) bool {
	return n == "-1" || n == json.Number(strconv.FormatUint(^uint64(0), 10))
}

func (m *manager) handleWait(r *flux.Request) {
	var req struct {
		ID json.Number `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	w := &m.wait
	if waitAnyID(req.ID) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "only the instance owner may wait for any job")
			return
		}
		if len(w.zombies) > 0 {
			j, _ := m.job(w.zombies[0])
			w.reap(w.zombies[0])
			if j != nil {
				m.answerWait(r, j)
				return
			}
		}
		if w.active == 0 {
			r.Errorf(syscall.ECHILD, "there are no more waitable jobs")
			return
		}
		w.any = append(w.any, r)
		return
	}
	n, err := strconv.ParseUint(string(req.ID), 10, 64)
	if err != nil {
		r.Errorf(syscall.EPROTO, "job-manager.wait: invalid id %q", req.ID)
		return
	}
	j := m.lookup(r, jobid.ID(n))
	if j == nil || !authorize(r, j) {
		return
	}
	if !waitable(j) {
		r.Errorf(syscall.EINVAL, "job %s was not submitted with the waitable flag", j.ID.String())
		return
	}
	if w.reaped[j.ID] {
		r.Errorf(syscall.ECHILD, "job %s was already waited for", j.ID.String())
		return
	}
	if j.State == jobtap.StateInactive {
		m.answerWait(r, j)
		w.reap(j.ID)
		return
	}
	if w.byID == nil {
		w.byID = make(map[jobid.ID][]*flux.Request)
	}
	w.byID[j.ID] = append(w.byID[j.ID], r)
}

// waitDisconnect drops the waits of a client that went away.
func (m *manager) waitDisconnect(route string) {
	w := &m.wait
	for id, list := range w.byID {
		kept := list[:0]
		for _, r := range list {
			if r.Msg.RouteString() != route {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(w.byID, id)
		} else {
			w.byID[id] = kept
		}
	}
	kept := w.any[:0]
	for _, r := range w.any {
		if r.Msg.RouteString() != route {
			kept = append(kept, r)
		}
	}
	w.any = kept
}
