package sched

import (
	"math"
	"slices"
)

// Backfill is queue-order scheduling with reservations (seed 004's EASY,
// hybrid and conservative backfill). In each pass it walks the first
// Depth pending jobs in queue order: a job that fits now starts unless
// it would hold, at the start of a reservation made earlier in the pass,
// resources that reservation counts on; a job that cannot start gets a
// reservation, while fewer than Reserve jobs have one: the earliest time
// it could start, found by releasing the running jobs' resources at their
// expirations and keeping clear of the reservations already made, and
// the resources it would take then. Reserve 1 is EASY backfill (only the
// first blocked job is protected), a larger Reserve is hybrid, and
// Reserve < 0 conservative (every job considered is protected). A job
// backfills when it ends before the reservations it would delay start,
// or uses other resources. Jobs without a time limit (and running jobs
// without an expiration) are taken to run forever.
//
// Reservations are remade every pass (no reservation is remembered
// between passes), so they follow completions, cancellations and
// priority changes. The search for one runs in a scratch copy of the
// pool's free state and leaves the pool alone; what it costs is a copy
// of the free bits and one sweep over the running jobs, or, for a
// policy told of starts and ends (Started, Ended), the copy and the
// changes since the last pass. Like FCFS, a Backfill holds no goroutines
// and does no I/O.
type Backfill struct {
	// Depth is how many pending jobs a pass considers (<= 0: the
	// default queue depth).
	Depth int
	// Reserve is the reservation depth (see above).
	Reserve int
	// Running returns the allocations of the running jobs, with their
	// Expiration (0: none). Nil means nothing is running. A policy told
	// of starts and ends (Started, Ended) does not call it.
	Running func() []*Alloc
	// Reservations, when set, receives the reservations of each pass
	// (for status reports and tests).
	Reservations func([]Reservation)
	name         string

	// buffers of the reservation search, kept between passes
	shadow shadow
	due    []*Alloc
	later  []release
	run    *runningJobs // set by Started and Ended
	walk   laterEnds
	// search, when set, replaces earliest (tests compare the two)
	search func(p *Pool, j *Job, now float64, running []*Alloc, resv []Reservation) (Reservation, bool)
}

// Reservation is a pending job's place in the future: when it is
// expected to start and the resources it would take then.
type Reservation struct {
	Job   *Job
	Start float64
	End   float64 // math.Inf(1) for a job without a time limit
	Alloc *Alloc
}

// NewBackfill returns the named backfill policy: "easy" (reservation
// depth 1), "conservative" (every job), or "hybrid" with the given
// reservation depth (>= 1).
func NewBackfill(name string, depth, reserve int) *Backfill {
	switch name {
	case "easy":
		reserve = 1
	case "conservative":
		reserve = -1
	}
	return &Backfill{Depth: depth, Reserve: reserve, name: name}
}

var _ Policy = (*Backfill)(nil)

// Started tells b that a job started with the resources of a, to end
// at a.Expiration (0: never). Once told of a start or an end, b plans
// with what it was told instead of calling Running, and keeps the
// running jobs' ends in order between passes, so a pass costs what
// changed rather than a sweep over every running job. The pass's own
// decisions are running jobs too: tell b of them when they start. An
// allocation must not change while b tracks it (a partial release, a
// grow, a new Expiration): end it, change it, and start it again.
func (b *Backfill) Started(a *Alloc) {
	if b.run == nil {
		b.run = newRunningJobs()
	}
	b.run.add(a)
}

// Ended tells b that the job holding a ended (its resources were freed,
// or are being); see Started.
func (b *Backfill) Ended(a *Alloc) {
	if b.run == nil {
		b.run = newRunningJobs()
	}
	b.run.remove(a)
}

// Name implements Policy.
func (b *Backfill) Name() string {
	if b.name != "" {
		return b.name
	}
	return "backfill"
}

func endOf(start, duration float64) float64 {
	if duration <= 0 {
		return math.Inf(1)
	}
	return start + duration
}

// Schedule implements Policy.
func (b *Backfill) Schedule(q *Queue, p *Pool, now float64) []Decision {
	depth := b.Depth
	if depth <= 0 {
		depth = DefaultQueueDepth
	}
	var running []*Alloc
	if b.Running != nil && b.run == nil {
		running = b.Running()
	}
	var out []Decision
	var resv []Reservation
	seen := 0
	for j := range q.All() {
		if seen >= depth {
			break
		}
		seen++
		if j.Hold {
			continue
		}
		if p.freeCores.max() == 0 && b.Reserve >= 0 && len(resv) >= b.Reserve {
			break // nothing free anywhere and no reservation to make: no job can start
		}
		if a, ok := p.placeAvoiding(j, now, resv); ok {
			out = append(out, Decision{Job: j, Alloc: a})
			continue
		}
		if b.Reserve >= 0 && len(resv) >= b.Reserve {
			continue
		}
		if r, ok := b.earliest(p, j, now, running, resv); ok {
			resv = append(resv, r)
		}
	}
	if b.Reservations != nil {
		b.Reservations(resv)
	}
	return out
}

// placeAvoiding allocates j's resources at time t (from the pool as it
// is) without taking any resource a reservation needs while j would
// run: those are held aside during the attempt.
func (p *Pool) placeAvoiding(j *Job, t float64, resv []Reservation) (*Alloc, bool) {
	end := endOf(t, j.Req.Duration)
	var held []*Alloc
	for _, r := range resv {
		if r.Start < end && r.End > t {
			if c := p.claimFree(r.Alloc); !c.Empty() {
				held = append(held, c)
			}
		}
	}
	a, err := p.Allocate(j.Req, t)
	for _, c := range held {
		p.Free(c)
	}
	return a, err == nil
}

// earliest finds when j could start after now: at now, with the
// running jobs past their expiration released, and then at each time a
// running job ends or a reservation ends, in order, with the running
// jobs ended by then released and the reservations overlapping j's run
// kept off limits. The search runs in a copy of the pool's free state
// (shadow.go), so the pool is not touched. The running jobs come from
// what Started and Ended told (running.go: the jobs past their
// expiration are given back node by node, the later ends are walked in
// order as far as the search goes), or else from Running, swept once:
// the jobs past their expiration are given back as they are met, the
// others go onto a heap.
func (b *Backfill) earliest(p *Pool, j *Job, now float64, running []*Alloc, resv []Reservation) (Reservation, bool) {
	if b.search != nil {
		return b.search(p, j, now, running, resv)
	}
	s := b.shadow.of(p)
	var next endQueue
	if b.run != nil {
		b.run.advance(now)
		if !b.run.putDue(&b.shadow) {
			s = b.shadow.of(p)
			for _, e := range b.run.jobs {
				if e.pos == posDue {
					b.shadow.put(e.a)
				}
			}
		}
		b.walk.reset(b.run.later)
		next = &b.walk
	} else {
		later := b.later[:0]
		for _, a := range running {
			switch {
			case a.Expiration > now:
				later = append(later, release{a.Expiration, a})
			case a.Expiration > 0:
				// past its expiration but not freed yet: it ends any
				// moment
				b.shadow.put(a)
			}
		}
		defer func() {
			clear(later) // keep no running job alive through the buffer
			b.later = later[:0]
		}()
		h := releaseHeap(later)
		h.init()
		next = &h
	}
	b.shadow.refresh()
	var ends []float64
	for _, r := range resv {
		if !math.IsInf(r.End, 1) && r.End > now {
			ends = append(ends, r.End)
		}
	}
	slices.Sort(ends)
	found := func(t float64) (Reservation, bool) {
		a, ok := s.placeAvoiding(j, t, resv)
		if !ok {
			return Reservation{}, false
		}
		return Reservation{Job: j, Start: t, End: endOf(t, j.Req.Duration), Alloc: a}, true
	}
	if r, ok := found(now); ok { // placed elsewhere, it may fit now
		return r, true
	}
	due := b.due[:0]
	defer func() {
		clear(due)
		b.due = due[:0]
	}()
	for {
		t, ok := next.peek()
		if !ok {
			t = math.Inf(1)
		}
		if len(ends) > 0 && ends[0] < t {
			t = ends[0]
		}
		if math.IsInf(t, 1) {
			return Reservation{}, false
		}
		for len(ends) > 0 && ends[0] <= t {
			ends = ends[1:]
		}
		due = due[:0]
		for at, ok := next.peek(); ok && at <= t; at, ok = next.peek() {
			due = append(due, next.pop())
		}
		b.shadow.release(due)
		if r, ok := found(t); ok {
			return r, true
		}
	}
}

// endQueue yields running jobs' releases in time order.
type endQueue interface {
	peek() (float64, bool) // the next end, false if none is left
	pop() *Alloc           // the job that ends then
}

// release is a running job's end time and what it frees then.
type release struct {
	at float64
	a  *Alloc
}

// releaseHeap is a min-heap of releases by time: building it costs one
// pass over the running jobs, and the search pops only the ends it
// reaches.
type releaseHeap []release

func (h releaseHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *releaseHeap) peek() (float64, bool) {
	if len(*h) == 0 {
		return 0, false
	}
	return (*h)[0].at, true
}

func (h *releaseHeap) pop() *Alloc {
	old := *h
	top := old[0]
	n := len(old) - 1
	old[0] = old[n]
	old[n] = release{}
	*h = old[:n]
	h.down(0)
	return top.a
}

func (h releaseHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].at < h[l].at {
			m = r
		}
		if h[i].at <= h[m].at {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// claimFree marks allocated the part of a that is free now and returns
// that part (Free gives it back).
func (p *Pool) claimFree(a *Alloc) *Alloc {
	c := &Alloc{}
	for _, na := range a.Nodes {
		nd := &p.nodes[na.node]
		part := NodeAlloc{node: na.node, cores: na.cores.clone()}
		for w := range part.cores {
			part.cores[w] &= nd.coreFree[w]
		}
		if na.gpus != nil {
			part.gpus = na.gpus.clone()
			for w := range part.gpus {
				part.gpus[w] &= nd.gpuFree[w]
			}
		}
		if part.cores.count() > 0 || (part.gpus != nil && part.gpus.count() > 0) {
			c.Nodes = append(c.Nodes, part)
		}
	}
	if err := p.Claim(c); err != nil {
		return &Alloc{} // cannot happen: only free resources were taken
	}
	return c
}
