package sched

import (
	"math"
	"slices"
)

// earliestLegacy is the reservation search as it was before shadow.go
// (commit f56f21a), kept to check the new one against and to measure
// both in one run: it sorts every running job's release each pass and
// frees and reclaims them in the pool itself.
// earliestLegacy finds when j could start after now: at each time a running
// job ends or a reservation ends, in order, with the running jobs ended
// by then released and the reservations overlapping j's run kept off
// limits, it tries to place j. The pool is left as it was.
func (p *Pool) earliestLegacy(j *Job, now float64, running []*Alloc, resv []Reservation) (Reservation, bool) {
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

// legacy switches b to the old search.
func legacy(b *Backfill) *Backfill {
	b.search = (*Pool).earliestLegacy
	return b
}
