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
// Reservations are remade every pass (nothing is remembered between
// passes), so they follow completions, cancellations and priority
// changes. Like FCFS, a Backfill holds no goroutines and does no I/O.
type Backfill struct {
	// Depth is how many pending jobs a pass considers (<= 0: the
	// default queue depth).
	Depth int
	// Reserve is the reservation depth (see above).
	Reserve int
	// Running returns the allocations of the running jobs, with their
	// Expiration (0: none). Nil means nothing is running.
	Running func() []*Alloc
	// Reservations, when set, receives the reservations of each pass
	// (for status reports and tests).
	Reservations func([]Reservation)
	name         string
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
	if b.Running != nil {
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
		if a, ok := p.placeAvoiding(j, now, resv); ok {
			out = append(out, Decision{Job: j, Alloc: a})
			continue
		}
		if b.Reserve >= 0 && len(resv) >= b.Reserve {
			continue
		}
		if r, ok := p.earliest(j, now, running, resv); ok {
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

// earliest finds when j could start after now: at each time a running
// job ends or a reservation ends, in order, with the running jobs ended
// by then released and the reservations overlapping j's run kept off
// limits, it tries to place j. The pool is left as it was.
func (p *Pool) earliest(j *Job, now float64, running []*Alloc, resv []Reservation) (Reservation, bool) {
	type release struct {
		at float64
		a  *Alloc
	}
	var rel []release
	times := []float64{now} // placed elsewhere, it may fit now
	for _, a := range running {
		if a.Expiration > now {
			rel = append(rel, release{a.Expiration, a})
			times = append(times, a.Expiration)
		} else if a.Expiration > 0 {
			// past its expiration but not freed yet: it ends any moment
			rel = append(rel, release{now, a})
			times = append(times, now)
		}
	}
	for _, r := range resv {
		if !math.IsInf(r.End, 1) && r.End > now {
			times = append(times, r.End)
		}
	}
	slices.SortFunc(rel, func(x, y release) int {
		switch {
		case x.at < y.at:
			return -1
		case x.at > y.at:
			return 1
		}
		return 0
	})
	slices.Sort(times)
	times = slices.Compact(times)
	var freed []*Alloc
	defer func() {
		for _, a := range freed {
			p.Claim(a) // back as it was: these were allocated
		}
	}()
	next := 0
	for _, t := range times {
		for next < len(rel) && rel[next].at <= t {
			if p.Free(rel[next].a) == nil {
				freed = append(freed, rel[next].a)
			}
			next++
		}
		a, ok := p.placeAvoiding(j, t, resv)
		if !ok {
			continue
		}
		p.Free(a)
		return Reservation{Job: j, Start: t, End: endOf(t, j.Req.Duration), Alloc: a}, true
	}
	return Reservation{}, false
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
