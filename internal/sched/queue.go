package sched

import (
	"iter"
)

// Job is a pending allocation request.
type Job struct {
	ID       uint64
	Priority int64
	TSubmit  float64
	Userid   uint32
	Req      *Request
	// Preemptible jobs may be ended to make room for others (the
	// scheduler module decides; policies treat them as any job).
	Preemptible bool
	// Hold keeps the job from starting (and from reservations) for now:
	// policies pass over it (it still counts in their depth). The
	// scheduler module sets it, e.g. for a job waiting for its advance
	// reservation to open.
	Hold bool
	// Data is the caller's (the scheduler module keeps the request to
	// answer here).
	Data any

	next []*Job // skip list forward pointers, one per level
}

// before reports whether j comes before o in the queue: higher priority
// first, then earlier submit time, then lower id.
func (j *Job) before(o *Job) bool {
	if j.Priority != o.Priority {
		return j.Priority > o.Priority
	}
	if j.TSubmit != o.TSubmit {
		return j.TSubmit < o.TSubmit
	}
	return j.ID < o.ID
}

const maxLevel = 24

// Queue holds pending jobs in order (see Job.before). Insertion, removal
// and reprioritization cost O(log n) expected (a skip list); iteration
// from the head is O(1) per job.
type Queue struct {
	head  Job // sentinel; head.next[l] is the first job at level l
	byID  map[uint64]*Job
	level int
	rng   uint64
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{head: Job{next: make([]*Job, maxLevel)}, byID: make(map[uint64]*Job), level: 1, rng: 0x9e3779b97f4a7c15}
}

// Len returns the number of jobs.
func (q *Queue) Len() int { return len(q.byID) }

// Get returns the job with id, or nil.
func (q *Queue) Get(id uint64) *Job { return q.byID[id] }

// randomLevel draws a level with P(level > k) = 4^-k (xorshift, so runs
// are reproducible).
func (q *Queue) randomLevel() int {
	q.rng ^= q.rng << 13
	q.rng ^= q.rng >> 7
	q.rng ^= q.rng << 17
	l := 1
	for r := q.rng; l < maxLevel && r&3 == 0; r >>= 2 {
		l++
	}
	return l
}

// Add inserts j. It fails with ErrConflict if a job with j's id is
// already queued.
func (q *Queue) Add(j *Job) error {
	if _, dup := q.byID[j.ID]; dup {
		return errorf(ErrConflict, "job %d is already queued", j.ID)
	}
	var update [maxLevel]*Job
	x := &q.head
	for l := q.level - 1; l >= 0; l-- {
		for x.next[l] != nil && x.next[l].before(j) {
			x = x.next[l]
		}
		update[l] = x
	}
	lvl := q.randomLevel()
	if lvl > q.level {
		for l := q.level; l < lvl; l++ {
			update[l] = &q.head
		}
		q.level = lvl
	}
	j.next = make([]*Job, lvl)
	for l := 0; l < lvl; l++ {
		j.next[l] = update[l].next[l]
		update[l].next[l] = j
	}
	q.byID[j.ID] = j
	return nil
}

// Remove takes the job with id out of the queue and returns it (nil if
// it is not queued).
func (q *Queue) Remove(id uint64) *Job {
	j := q.byID[id]
	if j == nil {
		return nil
	}
	x := &q.head
	for l := q.level - 1; l >= 0; l-- {
		for x.next[l] != nil && x.next[l] != j && x.next[l].before(j) {
			x = x.next[l]
		}
		if x.next[l] == j {
			x.next[l] = j.next[l]
		}
	}
	for q.level > 1 && q.head.next[q.level-1] == nil {
		q.level--
	}
	j.next = nil
	delete(q.byID, id)
	return j
}

// SetPriority moves the job with id to its place for a new priority. It
// returns false if the job is not queued.
func (q *Queue) SetPriority(id uint64, prio int64) bool {
	j := q.Remove(id)
	if j == nil {
		return false
	}
	j.Priority = prio
	q.Add(j)
	return true
}

// All yields the jobs in queue order. The queue must not be changed
// during the iteration.
func (q *Queue) All() iter.Seq[*Job] {
	return func(yield func(*Job) bool) {
		for j := q.head.next[0]; j != nil; j = j.next[0] {
			if !yield(j) {
				return
			}
		}
	}
}

// Position returns the 0-based position of the job with id, or -1. It
// walks the queue from the head, stopping at limit (returning -1 beyond
// it).
func (q *Queue) Position(id uint64, limit int) int {
	n := 0
	for j := range q.All() {
		if n >= limit {
			break
		}
		if j.ID == id {
			return n
		}
		n++
	}
	return -1
}
