package sched

import (
	"math"
	"math/bits"
)

// runningJobs is what a Backfill told of starts and ends (Started,
// Ended) knows of the running jobs, kept between passes so that a
// reservation search costs what changed since the last one, not a sweep
// over every running job:
//
//   - the jobs that end after the time of the last search, in a min-heap
//     by end time (a job's end is its allocation's Expiration when it
//     started), which the search walks in order without taking it apart;
//   - the jobs past their end but not freed yet ("due": they end any
//     moment), as the union of what they hold on each node, which the
//     search gives back to its copy of the pool in one pass over the
//     nodes;
//   - jobs without an end, which the search never releases.
//
// Moving to a later time moves the jobs that ended meanwhile from the
// heap to the due masks; moving back in time (not done by a scheduler,
// whose clock goes forward) sorts every job again.
type runningJobs struct {
	jobs  map[*Alloc]*runEnd
	later []*runEnd // ends after now: a min-heap by at
	now   float64   // the time jobs were split into later and due at
	// per node, what the due jobs hold (nil: nothing)
	dueCores, dueGPUs []bitset
	// overlap is set when two due jobs hold the same resource (a
	// caller's mistake): the masks cannot say which to release, so the
	// search gives the due jobs back one by one, as Free would
	overlap bool
}

// runEnd is one tracked running job.
type runEnd struct {
	at  float64 // its end (<= 0: none)
	a   *Alloc
	pos int // its place in later, or posDue or posNever
}

const (
	posDue   = -1
	posNever = -2
)

func newRunningJobs() *runningJobs {
	return &runningJobs{jobs: make(map[*Alloc]*runEnd), now: math.Inf(-1)}
}

// add tracks a, which ends at its Expiration (never if 0).
func (r *runningJobs) add(a *Alloc) {
	if _, ok := r.jobs[a]; ok {
		r.remove(a)
	}
	e := &runEnd{at: a.Expiration, a: a}
	r.jobs[a] = e
	switch {
	case e.at <= 0:
		e.pos = posNever
	case e.at <= r.now:
		e.pos = posDue
		r.maskAdd(a)
	default:
		r.push(e)
	}
}

// remove stops tracking a (a no-op if it is not tracked).
func (r *runningJobs) remove(a *Alloc) {
	e, ok := r.jobs[a]
	if !ok {
		return
	}
	delete(r.jobs, a)
	switch e.pos {
	case posNever:
	case posDue:
		r.maskRemove(a)
	default:
		r.removeAt(e.pos)
	}
}

// advance moves the split of later and due ends to now.
func (r *runningJobs) advance(now float64) {
	if now < r.now {
		r.resort(now)
		return
	}
	r.now = now
	for len(r.later) > 0 && r.later[0].at <= now {
		e := r.later[0]
		r.removeAt(0)
		e.pos = posDue
		r.maskAdd(e.a)
	}
}

// resort splits every job again at now.
func (r *runningJobs) resort(now float64) {
	r.now = now
	clear(r.later)
	r.later = r.later[:0]
	for _, m := range r.dueCores {
		clear(m)
	}
	for _, m := range r.dueGPUs {
		clear(m)
	}
	r.overlap = false
	for _, e := range r.jobs {
		switch {
		case e.at <= 0:
			e.pos = posNever
		case e.at <= now:
			e.pos = posDue
			r.maskAdd(e.a)
		default:
			e.pos = len(r.later)
			r.later = append(r.later, e)
		}
	}
	for i := len(r.later)/2 - 1; i >= 0; i-- {
		r.down(i)
	}
}

func (r *runningJobs) maskAdd(a *Alloc) {
	for k := range a.Nodes {
		na := &a.Nodes[k]
		r.overlap = orInto(&r.dueCores, int(na.node), na.cores) || r.overlap
		if na.gpus != nil {
			r.overlap = orInto(&r.dueGPUs, int(na.node), na.gpus) || r.overlap
		}
	}
}

func (r *runningJobs) maskRemove(a *Alloc) {
	for k := range a.Nodes {
		na := &a.Nodes[k]
		andNotFrom(r.dueCores, int(na.node), na.cores)
		if na.gpus != nil {
			andNotFrom(r.dueGPUs, int(na.node), na.gpus)
		}
	}
	if r.overlap {
		r.resort(r.now) // the masks may have lost a bit another due job holds
	}
}

// orInto adds b to (*masks)[i], growing the masks as needed, and reports
// whether some of b was there already.
func orInto(masks *[]bitset, i int, b bitset) bool {
	for len(*masks) <= i {
		*masks = append(*masks, nil)
	}
	m := (*masks)[i]
	for len(m) < len(b) {
		m = append(m, 0)
	}
	(*masks)[i] = m
	dup := false
	for w := range b {
		dup = dup || m[w]&b[w] != 0
		m[w] |= b[w]
	}
	return dup
}

func andNotFrom(masks []bitset, i int, b bitset) {
	if i >= len(masks) {
		return
	}
	m := masks[i]
	for w := range min(len(m), len(b)) {
		m[w] &^= b[w]
	}
}

// putDue gives what the due jobs hold back to the shadow s (a fresh copy
// of the pool), node by node. It reports false, leaving s changed, if
// the masks cannot be used: some due job's resources are free in the
// pool already (freed without Ended) or two due jobs overlap; the caller
// then gives the due jobs back one by one.
func (r *runningJobs) putDue(s *shadow) bool {
	if r.overlap {
		return false
	}
	p := &s.p
	for i := range max(len(r.dueCores), len(r.dueGPUs)) {
		var m, g bitset
		if i < len(r.dueCores) {
			m = r.dueCores[i]
		}
		if i < len(r.dueGPUs) {
			g = r.dueGPUs[i]
		}
		if !nonzero(m) && !nonzero(g) {
			continue
		}
		if i >= len(p.nodes) {
			return false
		}
		nd := &p.nodes[i]
		if len(m) > len(nd.coreFree) || len(g) > len(nd.gpuFree) {
			return false
		}
		if _, ok := overlap(nd.coreFree, m); ok {
			return false
		}
		if _, ok := overlap(nd.gpuFree, g); ok {
			return false
		}
		c, n := 0, 0
		for w := range m {
			c += bits.OnesCount64(m[w])
			nd.coreFree[w] |= m[w]
		}
		for w := range g {
			n += bits.OnesCount64(g[w])
			nd.gpuFree[w] |= g[w]
		}
		nd.nCores += int32(c)
		nd.nGPUs += int32(n)
		if p.avail.has(i) {
			p.nFreeCores += c
			p.nFreeGPUs += n
		}
		s.dirty = append(s.dirty, int32(i))
		s.touched.set(i)
	}
	return true
}

func nonzero(b bitset) bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

// heap of later ends (by at), each entry knowing its place

func (r *runningJobs) push(e *runEnd) {
	e.pos = len(r.later)
	r.later = append(r.later, e)
	r.up(e.pos)
}

func (r *runningJobs) removeAt(i int) {
	n := len(r.later) - 1
	if i != n {
		r.swap(i, n)
	}
	r.later[n] = nil
	r.later = r.later[:n]
	if i != n {
		r.down(i)
		r.up(i)
	}
}

func (r *runningJobs) swap(i, j int) {
	h := r.later
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

func (r *runningJobs) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if r.later[parent].at <= r.later[i].at {
			return
		}
		r.swap(i, parent)
		i = parent
	}
}

func (r *runningJobs) down(i int) {
	h := r.later
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if l+1 < len(h) && h[l+1].at < h[l].at {
			m = l + 1
		}
		if h[i].at <= h[m].at {
			return
		}
		r.swap(i, m)
		i = m
	}
}

// laterEnds walks r's later ends in order without changing the heap:
// a small heap of the entries that may come next (the walked entries'
// children), so reaching the k-th end costs O(k log k).
type laterEnds struct {
	h    []*runEnd
	next []int // indexes into h, a min-heap by h[i].at
}

func (w *laterEnds) reset(h []*runEnd) {
	w.h = h
	w.next = w.next[:0]
	if len(h) > 0 {
		w.next = append(w.next, 0)
	}
}

func (w *laterEnds) peek() (float64, bool) {
	if len(w.next) == 0 {
		return 0, false
	}
	return w.h[w.next[0]].at, true
}

func (w *laterEnds) pop() *Alloc {
	i := w.next[0]
	n := len(w.next) - 1
	w.next[0] = w.next[n]
	w.next = w.next[:n]
	w.down(0)
	for _, c := range [2]int{2*i + 1, 2*i + 2} {
		if c < len(w.h) {
			w.next = append(w.next, c)
			w.up(len(w.next) - 1)
		}
	}
	return w.h[i].a
}

func (w *laterEnds) less(i, j int) bool { return w.h[w.next[i]].at < w.h[w.next[j]].at }

func (w *laterEnds) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !w.less(i, parent) {
			return
		}
		w.next[i], w.next[parent] = w.next[parent], w.next[i]
		i = parent
	}
}

func (w *laterEnds) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(w.next) {
			return
		}
		m := l
		if l+1 < len(w.next) && w.less(l+1, l) {
			m = l + 1
		}
		if !w.less(m, i) {
			return
		}
		w.next[i], w.next[m] = w.next[m], w.next[i]
		i = m
	}
}
