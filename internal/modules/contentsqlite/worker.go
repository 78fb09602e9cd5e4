package contentsqlite

import (
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// opKind says what an op does.
type opKind int

const (
	opLoad opKind = iota
	opStore
	opCheckpointGet
	opCheckpointPut
)

// op is one database operation queued for the worker. The inputs are set
// by the Serve goroutine; the worker fills the outputs, then done runs
// back on the Serve goroutine.
type op struct {
	kind opKind
	data []byte // opLoad: digest; opStore: blob
	// digest is an opStore's digest when its sender computed it (nil:
	// the worker hashes the blob)
	digest []byte
	index  int             // opStore: the blob's place in its store-batch
	key    string          // checkpoint key
	value  json.RawMessage // opCheckpointPut

	out   []byte          // opLoad: blob; opStore: digest
	json  json.RawMessage // opCheckpointGet
	err   error
	start time.Time
	done  func(o *op)
}

// maxBatch bounds the operations applied in one transaction, so one
// commit never holds back answers (loads above all) for long.
const maxBatch = 1024

// worker owns the Store on its own goroutine. Operations queued while it
// is busy are applied together in one transaction, in queue order, so a
// burst of stores costs one commit (one fsync) rather than one each.
// Loads do not wait behind the stores queued before them: a write-back
// burst (the KVS under a burst of jobs) must not stall the reads a
// commit is waiting for. Each time the worker takes the queue it answers
// the loads first, outside any transaction; a blob found is the right one
// whatever is still queued (blobs are named by their hash), and a load
// that finds nothing while writes are queued goes after them, in case one
// of them stores its blob. Queueing never blocks the caller.
type worker struct {
	st   *Store
	post func(func()) // runs a function on the Serve goroutine

	mu      sync.Mutex
	queue   []*op
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	// statistics, read under mu
	batches  uint64
	maxSeen  int
	commitNs int64
}

func startWorker(st *Store, post func(func())) *worker {
	w := &worker{st: st, post: post, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go w.run()
	return w
}

// enqueue adds ops to the queue, in order; their done functions will run
// on the Serve goroutine.
// After stop, they fail at once.
func (w *worker) enqueue(ops ...*op) {
	now := time.Now()
	for _, o := range ops {
		o.start = now
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		for _, o := range ops {
			o.err = errClosed
			o.done(o)
		}
		return
	}
	w.queue = append(w.queue, ops...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop applies what is queued, then ends the goroutine and waits for it.
func (w *worker) stop() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.stopped
}

func (w *worker) run() {
	defer close(w.stopped)
	var writes []*op // taken from the queue, not yet applied, in order
	for {
		w.mu.Lock()
		queued := w.queue
		w.queue = nil
		closed := w.closed
		w.mu.Unlock()
		writes = w.loadFirst(queued, writes)
		if len(writes) > 0 {
			// one transaction, then look at the queue again for loads
			n := min(len(writes), maxBatch)
			w.apply(writes[:n])
			clear(writes[:n])
			writes = writes[n:]
			continue
		}
		if closed {
			w.mu.Lock()
			empty := len(w.queue) == 0
			w.mu.Unlock()
			if empty {
				return
			}
			continue
		}
		<-w.wake
	}
}

// loadFirst answers the loads among queued at once and returns writes
// with the other operations of queued appended in order (and the loads
// that found nothing while writes were waiting: see worker).
func (w *worker) loadFirst(queued, writes []*op) []*op {
	var done []*op
	for _, o := range queued {
		if o.kind != opLoad {
			writes = append(writes, o)
			continue
		}
		o.out, o.err = w.st.Load(o.data)
		if len(writes) > 0 && errors.Is(o.err, ErrNotFound) {
			o.out, o.err = nil, nil
			writes = append(writes, o)
			continue
		}
		done = append(done, o)
	}
	if len(done) > 0 {
		w.post(func() {
			for _, o := range done {
				o.done(o)
			}
		})
	}
	return writes
}

// apply runs one batch in a transaction and hands the results back.
func (w *worker) apply(batch []*op) {
	t0 := time.Now()
	tx, err := w.st.Begin()
	if err != nil {
		for _, o := range batch {
			o.err = err
		}
	} else {
		wrote := false
		for i := 0; i < len(batch); i++ {
			o := batch[i]
			switch o.kind {
			case opLoad:
				o.out, o.err = tx.Load(o.data)
			case opStore:
				// this store and those right after it, together
				n := 1
				for i+n < len(batch) && batch[i+n].kind == opStore {
					n++
				}
				storeRun(tx, batch[i:i+n])
				i += n - 1
				wrote = true
			case opCheckpointGet:
				o.json, o.err = tx.CheckpointGet(o.key)
			case opCheckpointPut:
				o.err = tx.CheckpointPut(o.key, o.value)
				wrote = true
			}
		}
		if err := tx.Commit(); err != nil && wrote {
			// nothing written in this batch is durable
			for _, o := range batch {
				if o.err == nil && (o.kind == opStore || o.kind == opCheckpointPut) {
					o.out, o.err = nil, err
				}
			}
		}
	}
	w.mu.Lock()
	w.batches++
	w.maxSeen = max(w.maxSeen, len(batch))
	w.commitNs += int64(time.Since(t0))
	w.mu.Unlock()
	done := append([]*op(nil), batch...)
	w.post(func() {
		for _, o := range done {
			o.done(o)
		}
	})
}

// storeRun applies a run of stores with as few statements as it can.
func storeRun(tx *Tx, run []*op) {
	blobs := make([][]byte, len(run))
	var known [][]byte
	for i, o := range run {
		blobs[i] = o.data
		if o.digest != nil {
			if known == nil {
				known = make([][]byte, len(run))
			}
			known[i] = o.digest
		}
	}
	digests, err := tx.StoreAll(blobs, known)
	for i, o := range run {
		if err != nil {
			o.err = err
		} else {
			o.out = digests[i]
		}
	}
}

type workerStats struct {
	Batches  uint64  `json:"batches"`
	MaxBatch int     `json:"max_batch"`
	BusySecs float64 `json:"busy_seconds"`
}

func (w *worker) stats() workerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return workerStats{Batches: w.batches, MaxBatch: w.maxSeen, BusySecs: float64(w.commitNs) / 1e9}
}
