package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// pullJournal learns how the jobs flux pool pull submitted ended from
// one job-manager.events-journal stream of the instance they run in
// (their finish, exception and clean events), instead of a watch of
// each job's eventlog: the job manager sends what it commits anyway,
// and the puller is told of every job's end by one stream. Only the
// instance owner may follow the journal: for anyone else
// startPullJournal returns errJournalRefused and each job is watched.
type pullJournal struct {
	mu sync.Mutex
	// running: the jobs' events so far, by job (any job of the
	// instance: which are the puller's is known only once their
	// submission is answered)
	running map[jobid.ID]*job.JobResult
	// ended: inactive jobs not (yet) known to be the puller's
	ended map[jobid.ID]*job.JobResult
	// mine: the puller's jobs still running, and whom to tell
	mine map[jobid.ID]func(*job.JobResult, error)
	// submitting counts submissions not answered yet: while none is,
	// an ended job that is not the puller's is none of its business
	submitting int
	err        error // the stream failed (then every job is told)
	f          *flux.Future
}

var errJournalRefused = errors.New("the job manager's journal is the instance owner's")

// journalFilter is what the puller follows of the journal.
var journalFilter = map[string]any{"finish": 1, "exception": 1, "clean": 1}

// startPullJournal subscribes to h's journal and returns once the
// subscription is in place (its backlog's end has come).
func startPullJournal(ctx context.Context, h *flux.Handle) (*pullJournal, error) {
	f, err := h.RPC("job-manager.events-journal", 0, map[string]any{"full": true, "allow": journalFilter}, flux.Streaming)
	if err != nil {
		return nil, err
	}
	pj := &pullJournal{f: f, running: map[jobid.ID]*job.JobResult{}, ended: map[jobid.ID]*job.JobResult{},
		mine: map[jobid.ID]func(*job.JobResult, error){}}
	for {
		m, err := f.Next(ctx)
		if errors.Is(err, syscall.EPERM) {
			f.Close()
			return nil, errJournalRefused
		}
		if err == io.EOF {
			err = errors.New("the stream ended")
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("job-manager.events-journal: %s", flux.ErrorText(err))
		}
		end, err := pj.apply(m.JSON())
		if err != nil {
			f.Close()
			return nil, err
		}
		if end {
			break
		}
	}
	pj.pruneLocked() // the backlog's ended jobs are none of the puller's
	go pj.follow(ctx)
	return pj, nil
}

// follow reads the stream until it fails.
func (pj *pullJournal) follow(ctx context.Context) {
	for {
		m, err := pj.f.Next(ctx)
		if err == nil {
			_, err = pj.apply(m.JSON())
		}
		if err == io.EOF {
			err = errors.New("the stream ended")
		}
		if err != nil {
			pj.fail(fmt.Errorf("job-manager.events-journal: %s", flux.ErrorText(err)))
			return
		}
	}
}

// apply takes one journal response; end reports the backlog's end.
func (pj *pullJournal) apply(p []byte) (end bool, err error) {
	e, end, err := wire.DecodeJournalEntry(p)
	if err != nil || end {
		return end, err
	}
	pj.mu.Lock()
	defer pj.mu.Unlock()
	r := pj.running[e.ID]
	if r == nil {
		r = &job.JobResult{ID: e.ID}
		pj.running[e.ID] = r
	}
	for _, ev := range e.Events {
		if !r.Accumulate(eventlog.Event{Timestamp: ev.Timestamp, Name: ev.Name, Context: ev.Context}) {
			continue
		}
		delete(pj.running, e.ID)
		if tell := pj.mine[e.ID]; tell != nil {
			delete(pj.mine, e.ID)
			go tell(r, nil)
		} else if pj.submitting > 0 {
			pj.ended[e.ID] = r
		}
		break
	}
	return false, nil
}

// submit notes a submission on its way (see submitting).
func (pj *pullJournal) submit() {
	pj.mu.Lock()
	pj.submitting++
	pj.mu.Unlock()
}

// submitted notes a submission answered: id (0 if it failed) is the
// puller's, and tell is called once it has ended (or with the error that
// ended the stream).
func (pj *pullJournal) submitted(id jobid.ID, tell func(*job.JobResult, error)) {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	pj.submitting--
	if id != 0 {
		switch r := pj.ended[id]; {
		case r != nil:
			delete(pj.ended, id)
			go tell(r, nil)
		case pj.err != nil:
			go tell(nil, pj.err)
		default:
			pj.mine[id] = tell
		}
	}
	pj.pruneLocked()
}

// pruneLocked forgets ended jobs not the puller's: with no submission
// unanswered, every job of the puller's is in mine.
func (pj *pullJournal) pruneLocked() {
	if pj.submitting == 0 {
		clear(pj.ended)
	}
}

// fail ends the jobs waited for with the stream's error.
func (pj *pullJournal) fail(err error) {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	pj.err = err
	for _, tell := range pj.mine {
		go tell(nil, err)
	}
	clear(pj.mine)
}

// close ends the subscription.
func (pj *pullJournal) close() { pj.f.Close() }
