package joblist

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// job-list.job-state-pause and job-state-unpause (flux-core's test
// hooks, instance owner only): while paused, job-list holds the journal
// entries it receives, so a test can look at the listing in a state it
// would otherwise pass through too fast; unpause applies them in order.

// maxPaused bounds what a pause holds; past it the pause ends by itself.
const maxPaused = 100000

type pauseState struct {
	on   bool
	held []journalEntry
}

// holdEntry keeps e while paused and reports whether it did.
func (s *service) holdEntry(e *journalEntry) bool {
	if !s.pause.on {
		return false
	}
	if len(s.pause.held) >= maxPaused {
		s.log.Warn(fmt.Sprintf("job-state-pause held %d journal entries: unpausing", maxPaused))
		s.unpause()
		return false
	}
	s.pause.held = append(s.pause.held, *e)
	return true
}

func (s *service) unpause() {
	held := s.pause.held
	s.pause = pauseState{}
	for i := range held {
		s.applyEntry(&held[i], false)
	}
}

func (s *service) handlePause(r *flux.Request) {
	if !r.RequireOwner() {
		return
	}
	s.pause.on = true
	r.Respond(nil)
}

func (s *service) handleUnpause(r *flux.Request) {
	if !r.RequireOwner() {
		return
	}
	s.unpause()
	r.Respond(nil)
}
