package schedsimple

import (
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
)

// Debug bits (flux module debug --setbit N sched-simple, or the RPC
// sched-simple.debug {op, flags}), the test hooks of flux-core's
// sched-simple with the same numbers:
const (
	// debugFailAlloc: while set, every pending job is denied
	// ("DEBUG_FAIL_ALLOC") at the next scheduling pass.
	debugFailAlloc = 0x1
	// debugAnnotateReasonPending: while set, every pending job the
	// scheduler holds is annotated after each pass with
	// sched.reason_pending "insufficient resources" and sched.jobs_ahead
	// (its 0-based position in the queue). Clear, pending jobs carry no
	// such annotation (but for those waiting for an advance
	// reservation, see holdReason).
	debugAnnotateReasonPending = 0x2
	// debugExpirationDeny: while set, sched.expiration is refused
	// (EINVAL).
	debugExpirationDeny = 0x4
)

// reasonInsufficient is the reason_pending flux-core's sched-simple gives.
const reasonInsufficient = "insufficient resources"

// debugFailAll denies every pending job (debugFailAlloc).
func (s *scheduler) debugFailAll() {
	var ids []uint64
	for j := range s.queue.All() {
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		if isRealloc(id) {
			s.endRealloc(id, fluxjob.ReallocDeny, "DEBUG_FAIL_ALLOC")
			continue
		}
		j := s.queue.Remove(id)
		delete(s.jobResv, id)
		delete(s.held, id)
		delete(s.debugAhead, id)
		respondType(j.Data.(*flux.Request), id, allocDeny, "DEBUG_FAIL_ALLOC")
	}
}

// debugAnnotate sends each pending job its position in the queue
// (debugAnnotateReasonPending), on change only. Jobs held for an advance
// reservation keep the reason holdReason gave them.
func (s *scheduler) debugAnnotate() {
	if !s.h.DebugTest(debugAnnotateReasonPending, false) {
		return
	}
	seen := make(map[uint64]bool, len(s.debugAhead))
	ahead := 0
	for j := range s.queue.All() {
		seen[j.ID] = true
		if _, held := s.held[j.ID]; held || isRealloc(j.ID) {
			ahead++
			continue
		}
		if n, ok := s.debugAhead[j.ID]; !ok || n != ahead {
			s.debugAhead[j.ID] = ahead
			j.Data.(*flux.Request).Respond(map[string]any{"id": j.ID, "type": allocAnnotate,
				"annotations": map[string]any{"sched": map[string]any{
					"reason_pending": reasonInsufficient, "jobs_ahead": ahead}}})
		}
		ahead++
	}
	for id := range s.debugAhead {
		if !seen[id] {
			delete(s.debugAhead, id)
		}
	}
}

// debugDenyExpiration refuses r if debugExpirationDeny is set, and says
// so.
func (s *scheduler) debugDenyExpiration(r *flux.Request) bool {
	if !s.h.DebugTest(debugExpirationDeny, false) {
		return false
	}
	r.Errorf(syscall.EINVAL, "Rejecting expiration update for testing")
	return true
}
