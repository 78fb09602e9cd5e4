package schedsimple

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	fluxresource "github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Advance reservations (seed 003's DATs; policy.Reservation has the
// configuration). Before each pass, the pending jobs within the queue
// depth get a request bound to what reservations allow them now:
//
//   - a job of no reservation may not use the nodes of any reservation
//     that is open during its run (from now to its time limit; a job
//     without one runs into every reservation to come);
//   - a job of a reservation may use only its nodes, and waits (Hold)
//     until it opens; once it has closed, the job is denied.
//
// Timers make a pass when a reservation opens or closes. The base
// requests stay in the request cache; the bound ones are kept per
// (request, set of reservations) in s.bound.

// resvState is a reservation with its ranks resolved against the
// inventory.
type resvState struct {
	policy.Reservation
	ranks idset.Set
	only  *jobspec.Constraint // its nodes
	not   *jobspec.Constraint // any other node
}

// setReservations takes the configured reservations (at load and at each
// configuration reload) and arms the timers.
func (s *scheduler) setReservations(p *policy.Config) error {
	for _, t := range s.resvTimers {
		t.Stop()
	}
	s.resvTimers = nil
	// queued jobs go back to their own requests; the next pass binds
	// them again
	for id, base := range s.baseReq {
		if j := s.queue.Get(id); j != nil {
			j.Req, j.Hold = base, false
		}
	}
	s.bound = map[boundKey]*sched.Request{}
	s.resvs = nil
	if p == nil || len(p.Reservations) == 0 {
		return nil
	}
	inv := s.pool.Inventory()
	resvs := map[string]*resvState{}
	for name, r := range p.Reservations {
		st := &resvState{Reservation: r}
		if r.Hosts != "" {
			hl, err := hostlist.Parse(r.Hosts)
			if err != nil {
				return fmt.Errorf("reservations.%s.hosts: %w", name, err)
			}
			if st.ranks, err = inv.RanksOf(hl); err != nil {
				return fmt.Errorf("reservations.%s.hosts: %w", name, err)
			}
		} else {
			st.ranks, _ = idset.Parse(r.Ranks)
		}
		for rank := range st.ranks.All() {
			if _, ok := inv.Node(rank); !ok {
				return fmt.Errorf("reservations.%s: rank %d is not in the instance", name, rank)
			}
		}
		st.only = &jobspec.Constraint{Op: jobspec.OpRanks, Values: []string{st.ranks.String()}}
		st.not = &jobspec.Constraint{Op: jobspec.OpNot, Args: []*jobspec.Constraint{st.only}}
		resvs[name] = st
		now := s.now()
		for _, at := range []float64{r.Start, r.End} {
			if at > now {
				d := time.Duration((at - now) * float64(time.Second))
				s.resvTimers = append(s.resvTimers, time.AfterFunc(d, func() { s.h.Post(s.schedule) }))
			}
		}
	}
	s.resvs = resvs
	return nil
}

// boundKey names a request bound by reservations: the base request and
// the reservations involved ("+NAME": only its nodes, otherwise the
// names whose nodes are off limits).
type boundKey struct {
	base *sched.Request
	key  string
}

// applyReservations binds the requests of the jobs a pass will consider.
func (s *scheduler) applyReservations(now float64) {
	if len(s.bound) > 4096 {
		clear(s.bound)
	}
	for id := range s.baseReq {
		if s.queue.Get(id) == nil {
			delete(s.baseReq, id)
			delete(s.held, id)
		}
	}
	var deny []*sched.Job
	n := 0
	for j := range s.queue.All() {
		if n >= s.cfg.QueueDepth {
			break
		}
		n++
		base := s.baseReq[j.ID]
		if base == nil {
			base = j.Req
			s.baseReq[j.ID] = base
		}
		j.Hold = false
		if name := s.jobResv[j.ID]; name != "" {
			r := s.resvs[name]
			switch {
			case r == nil:
				deny = append(deny, j)
				continue
			case now >= r.End:
				deny = append(deny, j)
				continue
			case now < r.Start:
				j.Hold = true
				s.holdReason(j.ID, fmt.Sprintf("reservation %s opens at %s", name, time.Unix(int64(r.Start), 0).Format("2006-01-02 15:04")))
				continue
			}
			s.holdReason(j.ID, "")
			j.Req = s.bind(base, "+"+name, r.only)
			continue
		}
		end := now + base.Duration
		if base.Duration <= 0 {
			end = inf
		}
		var names []string
		for name, r := range s.resvs {
			if r.Start < end && r.End > now {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			j.Req = base
			continue
		}
		sort.Strings(names)
		key := strings.Join(names, ",")
		if bk := (boundKey{base, key}); s.bound[bk] != nil {
			j.Req = s.bound[bk]
			continue
		}
		var off idset.Set
		for _, name := range names {
			off = off.Union(s.resvs[name].ranks)
		}
		not := &jobspec.Constraint{Op: jobspec.OpNot, Args: []*jobspec.Constraint{{Op: jobspec.OpRanks, Values: []string{off.String()}}}}
		j.Req = s.bind(base, key, not)
	}
	for _, j := range deny {
		name := s.jobResv[j.ID]
		note := fmt.Sprintf("reservation %s has ended", name)
		if s.resvs[name] == nil {
			note = fmt.Sprintf("reservation %s no longer exists", name)
		}
		if isRealloc(j.ID) {
			s.endRealloc(j.ID, fluxjob.ReallocDeny, note)
			continue
		}
		s.queue.Remove(j.ID)
		delete(s.jobResv, j.ID)
		respondType(j.Data.(*flux.Request), j.ID, allocDeny, note)
	}
}

var inf = 1e300

func (s *scheduler) bind(base *sched.Request, key string, c *jobspec.Constraint) *sched.Request {
	bk := boundKey{base, key}
	if r := s.bound[bk]; r != nil {
		return r
	}
	r := base.Within(c)
	s.bound[bk] = r
	return r
}

// holdReason tells flux jobs why a job waits (annotation
// sched.reason_pending), on change only; "" withdraws it.
func (s *scheduler) holdReason(id uint64, reason string) {
	if s.held[id] == reason {
		return
	}
	if reason == "" {
		delete(s.held, id)
	} else {
		s.held[id] = reason
	}
	j := s.queue.Get(id)
	if j == nil || isRealloc(id) {
		return
	}
	var v any
	if reason != "" {
		v = reason
	}
	j.Data.(*flux.Request).Respond(map[string]any{"id": id, "type": allocAnnotate,
		"annotations": map[string]any{"sched": map[string]any{"reason_pending": v}}})
}

// checkReservationFit says why a job of a reservation could never run in
// it (nil if it could).
func (s *scheduler) checkReservationFit(e *cacheEntry) error {
	r := s.resvs[e.reservation]
	if r == nil {
		return fmt.Errorf("reservation %s does not exist", e.reservation)
	}
	if err := s.pool.Feasible(e.req.Within(r.only)); err != nil {
		return fmt.Errorf("cannot run in reservation %s (ranks %s): %v", e.reservation, r.ranks.String(), err)
	}
	return nil
}

// reservationsList answers sched-simple.reservations (flux resource
// reservations): each configured reservation with its ranks and hosts.
func (s *scheduler) reservationsList(r *flux.Request) {
	out := []fluxresource.Reservation{}
	inv := s.pool.Inventory()
	for name, st := range s.resvs {
		e := fluxresource.Reservation{Name: name, Ranks: st.ranks.String(), Start: st.Start, End: st.End, Users: []uint32{}}
		if hl := inv.CopyRanks(st.ranks).Nodelist(); hl != nil {
			e.Nodelist = hl.String()
		}
		for uid := range st.Users {
			e.Users = append(e.Users, uid)
		}
		sort.Slice(e.Users, func(i, j int) bool { return e.Users[i] < e.Users[j] })
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Start < out[j].Start || out[i].Start == out[j].Start && out[i].Name < out[j].Name
	})
	r.Respond(fluxresource.ReservationsResponse{Reservations: out})
}
