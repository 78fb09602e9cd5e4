package broker

import (
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// overlayDisconnectSubtree answers overlay.disconnect-subtree {"rank":N}
// (flux overlay disconnect): drop the link to child N, which then counts
// as lost with the error "administrative disconnect"; the child, having
// lost its parent, shuts its subtree down.
func (s *builtins) overlayDisconnectSubtree(r *flux.Request) {
	if !requireOwner(r) {
		return
	}
	var req struct {
		Rank *int64 `json:"rank"`
	}
	if err := r.Decode(&req); err != nil || req.Rank == nil {
		r.Errorf(syscall.EPROTO, "overlay.disconnect-subtree: the request needs an integer rank")
		return
	}
	if err := s.b.overlay.disconnectChild(*req.Rank); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

// disconnectChild drops the link to child rank and marks it lost.
func (o *overlay) disconnectChild(rank int64) error {
	o.mu.Lock()
	var cs *childState
	if rank >= 0 && rank <= int64(^uint32(0)) {
		cs = o.children[uint32(rank)]
	}
	if cs == nil {
		o.mu.Unlock()
		return flux.NewError(syscall.EINVAL, fmt.Sprintf("rank %d is not a child of rank %d", rank, o.b.rank))
	}
	l := cs.link
	if l == nil {
		state := cs.state
		o.mu.Unlock()
		return flux.NewError(syscall.EINVAL, fmt.Sprintf("rank %d is already %s", rank, state))
	}
	cs.state = stateLost
	cs.err = "administrative disconnect"
	cs.since = time.Now()
	o.mu.Unlock()
	o.b.log.Error(fmt.Sprintf("overlay: disconnecting child rank %d by request", rank))
	l.drop("administrative disconnect")
	o.notifyChanged()
	return nil
}
