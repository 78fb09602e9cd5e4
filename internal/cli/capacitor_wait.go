package cli

import (
	"fmt"
	"io"
	"sync"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// capacitorWaiter is flux capacitor --wait for the instance owner: the
// jobs' ends come from one job-manager.events-journal stream (as flux
// pool pull learns them), counted as they come, instead of one eventlog
// watch per job after the last is submitted (serial: a million jobs'
// watches took longer than running them). Nothing is kept of a job once
// it has ended.
type capacitorWaiter struct {
	pj   *pullJournal
	errw io.Writer

	mu      sync.Mutex
	cond    sync.Cond // signalled at each end
	running int       // submitted, not ended
	worst   int       // the largest exit code so far
	err     error     // the journal failed
}

func newCapacitorWaiter(pj *pullJournal, errw io.Writer) *capacitorWaiter {
	w := &capacitorWaiter{pj: pj, errw: errw}
	w.cond.L = &w.mu
	return w
}

// submitted notes a submission's answer (id is 0 when err is set).
func (w *capacitorWaiter) submitted(id jobid.ID, err error) {
	if err != nil || id == 0 {
		w.pj.submitted(0, nil)
		return
	}
	w.mu.Lock()
	w.running++
	w.mu.Unlock()
	w.pj.submitted(id, func(r *job.JobResult, err error) { w.ended(id, r, err) })
}

// ended counts one job's end.
func (w *capacitorWaiter) ended(id jobid.ID, r *job.JobResult, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	if err != nil {
		if w.err == nil {
			w.err = err
		}
	} else {
		out := outcomeOf(r)
		if out.exception != "" {
			fmt.Fprintf(w.errw, "%s: job.exception type=%s severity=%d %s\n", id.String(), out.exception, out.exSev, out.note)
		}
		w.worst = max(w.worst, out.exitCode())
	}
	w.cond.Broadcast()
}

// unfinished is how many jobs submitted (and answered) have not ended.
func (w *capacitorWaiter) unfinished() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running
}

// waitBelow waits until fewer than n jobs are unfinished.
func (w *capacitorWaiter) waitBelow(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running >= n && w.err == nil {
		w.cond.Wait()
	}
	if w.err != nil {
		return fmt.Errorf("waiting for the jobs: %s", flux.ErrorText(w.err))
	}
	return nil
}

// wait returns the largest exit code once every job submitted has ended.
func (w *capacitorWaiter) wait() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.running > 0 && w.err == nil {
		w.cond.Wait()
	}
	if w.err != nil {
		return 1, fmt.Errorf("waiting for the jobs: %s", flux.ErrorText(w.err))
	}
	return w.worst, nil
}

// outcomeOf is a job's outcome as followJob would have seen it: its wait
// status and its fatal exception.
func outcomeOf(r *job.JobResult) jobOutcome {
	out := jobOutcome{status: -1}
	if r.Waitstatus != nil {
		out.status = *r.Waitstatus
	}
	if r.ExceptionOccurred && r.ExceptionSeverity != nil && *r.ExceptionSeverity == 0 {
		out.exception, out.note, out.exSev = r.ExceptionType, r.ExceptionNote, 0
	}
	return out
}
