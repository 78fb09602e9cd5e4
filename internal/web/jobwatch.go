package web

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// JournalWatcher is the optional part of an Instance that follows the
// job manager's journal (job-manager.events-journal): the events named
// of every active job so far (the backlog), the end of the backlog,
// then each new event as the job manager commits it.
type JournalWatcher interface {
	WatchJournal(ctx context.Context, events []string) (JournalStream, error)
}

// JournalStream is one journal subscription. Next returns the next
// entry, with end set (and no entry) once at the end of the backlog;
// Close ends the subscription.
type JournalStream interface {
	Next(ctx context.Context) (e wire.JournalEntry, end bool, err error)
	Close()
}

const (
	// hubLinger is how long the journal subscription outlives its last
	// watcher (a page reload reuses it); without watchers flux web
	// follows no journal, so an idle server costs the instance nothing.
	hubLinger = 10 * time.Second
	// maxWatcherPending bounds the changed jobs held for one watcher
	// that does not read them; beyond it they are dropped and the
	// watcher is told to reload (a reset).
	maxWatcherPending = 100000
)

// jobsHub shares one journal subscription among the /v1/jobs/events
// streams: a pump goroutine, started by the first watcher and stopped
// hubLinger after the last one leaves, owns the jobs' tracks and hands
// each watcher the records of the jobs it may see that changed.
//
// Lock order: hub.mu, then a watcher's mu.
type jobsHub struct {
	src    JournalWatcher
	log    *slog.Logger
	linger time.Duration
	base   context.Context // ends with the server (Server.Close)

	mu       sync.Mutex
	watchers map[*jobsWatcher]struct{}
	live     bool               // the running pump is past its backlog
	gen      int                // counts the pumps started
	stop     context.CancelFunc // the running pump's; nil: none runs
	idle     *time.Timer        // stops the pump after linger without watchers
	wg       sync.WaitGroup     // the pumps
}

// jobsWatcher is one stream's mailbox: the latest record of each job
// that changed since the stream last wrote, in the order they changed.
type jobsWatcher struct {
	as     Caller
	notify chan struct{} // capacity 1: something to take

	mu      sync.Mutex
	ready   bool // the hub is live: changes from now on are all here
	pending map[jobid.ID][]byte
	order   []jobid.ID
	reset   bool  // pending overflowed: the watcher must reload
	fail    error // the journal ended: the stream ends with this
}

func newJobsHub(base context.Context, src JournalWatcher, log *slog.Logger) *jobsHub {
	return &jobsHub{src: src, log: log, linger: hubLinger, base: base, watchers: map[*jobsWatcher]struct{}{}}
}

// add registers a watcher for caller as, starting the pump if none runs.
func (h *jobsHub) add(as Caller) *jobsWatcher {
	w := &jobsWatcher{as: as, notify: make(chan struct{}, 1), pending: map[jobid.ID][]byte{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[w] = struct{}{}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	switch {
	case h.base.Err() != nil:
		w.finish(errors.New("flux web is stopping"))
	case h.stop == nil:
		ctx, cancel := context.WithCancel(h.base)
		h.gen++
		h.stop, h.live = cancel, false
		h.wg.Add(1)
		go h.pump(ctx, cancel, h.gen)
	case h.live:
		w.markReady()
	}
	return w
}

// remove unregisters w; the last one out arms the idle timer.
func (h *jobsHub) remove(w *jobsWatcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
	if len(h.watchers) == 0 && h.stop != nil && h.idle == nil {
		h.idle = time.AfterFunc(h.linger, h.stopIfIdle)
	}
}

func (h *jobsHub) stopIfIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle = nil
	if len(h.watchers) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// wait waits for the pumps to end (after the base context).
func (h *jobsHub) wait() {
	h.mu.Lock()
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// running reports whether a pump (a journal subscription) runs.
func (h *jobsHub) running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stop != nil
}

// pump follows the journal until ctx ends or the journal does; then the
// watchers of this pump (if it is still the current one) are told.
func (h *jobsHub) pump(ctx context.Context, cancel context.CancelFunc, gen int) {
	defer h.wg.Done()
	defer cancel()
	err := h.follow(ctx, gen)
	if ctx.Err() != nil {
		err = errors.New("flux web stopped following the job manager's journal")
	} else {
		h.log.Warn("the job manager's journal ended", "err", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return // stopped idle; another pump serves the watchers now
	}
	h.stop, h.live = nil, false
	for w := range h.watchers {
		w.finish(err)
	}
}

func (h *jobsHub) follow(ctx context.Context, gen int) error {
	st, err := h.src.WatchJournal(ctx, journalEvents)
	if err != nil {
		return err
	}
	defer st.Close()
	jobs := map[jobid.ID]*jobTrack{}
	live := false
	for {
		e, end, err := st.Next(ctx)
		if err != nil {
			return err
		}
		if end {
			live = true
			h.mu.Lock()
			if h.gen == gen {
				h.live = true
				for w := range h.watchers {
					w.markReady()
				}
			}
			h.mu.Unlock()
			continue
		}
		t := jobs[e.ID]
		if t == nil {
			t = newJobTrack(e.ID)
			jobs[e.ID] = t
		}
		known := t.p.Submitted || hasSubmit(&e)
		t.apply(&e)
		if t.done() {
			delete(jobs, e.ID)
		}
		if !live || t.invalid {
			continue
		}
		h.deliver(t.ID, t.Userid, known, t.appendJSON(nil))
	}
}

func hasSubmit(e *wire.JournalEntry) bool {
	for _, ev := range e.Events {
		if ev.Name == "submit" {
			return true
		}
	}
	return false
}

// deliver hands a job's record to the watchers that may see it: its
// owner's, and those of the instance owner and operators. A job whose
// owner is not known (no submit seen) goes to the latter only.
func (h *jobsHub) deliver(id jobid.ID, uid uint32, known bool, rec []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		if w.as.all() || known && w.as.Userid == uid {
			w.put(id, rec)
		}
	}
}

func (w *jobsWatcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *jobsWatcher) markReady() {
	w.mu.Lock()
	w.ready = true
	w.mu.Unlock()
	w.signal()
}

func (w *jobsWatcher) finish(err error) {
	w.mu.Lock()
	if w.fail == nil {
		w.fail = err
	}
	w.mu.Unlock()
	w.signal()
}

func (w *jobsWatcher) put(id jobid.ID, rec []byte) {
	w.mu.Lock()
	if !w.ready || w.fail != nil {
		w.mu.Unlock()
		return
	}
	if _, ok := w.pending[id]; !ok {
		if len(w.order) >= maxWatcherPending {
			clear(w.pending)
			w.order = w.order[:0]
			w.reset = true
		}
		w.order = append(w.order, id)
	}
	w.pending[id] = rec
	w.mu.Unlock()
	w.signal()
}

// take returns what the watcher holds and empties it.
func (w *jobsWatcher) take() (ready, reset bool, recs [][]byte, fail error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) > 0 {
		recs = make([][]byte, len(w.order))
		for i, id := range w.order {
			recs[i] = w.pending[id]
		}
		clear(w.pending)
		w.order = w.order[:0]
	}
	ready, reset, fail = w.ready, w.reset, w.fail
	w.reset = false
	return ready, reset, recs, fail
}
