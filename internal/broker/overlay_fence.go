package broker

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// fenceTimeout bounds the wait for the job-shell module's answer.
const fenceTimeout = 5 * time.Second

// fence is called when this broker dropped its parent for silence (a
// partition, or a parent that stopped): the instance finds this broker
// lost and ends its jobs, so their tasks here must not go on running
// (wire.JobShellFence). It runs before the broker shuts down, while
// the job-shell module is still loaded.
func (b *Broker) fence(why string) {
	ctx, cancel := context.WithTimeout(b.ctx, fenceTimeout)
	defer cancel()
	var resp wire.JobShellFenceResponse
	err := b.svc.h.Call(ctx, wire.JobShellFence, b.rank, wire.JobShellFenceRequest{Reason: why}, &resp)
	switch {
	case err == nil && len(resp.Jobs) > 0:
		b.log.Error(fmt.Sprintf("overlay: cut off from the parent (%s): killed the tasks of %d job(s): %v",
			why, len(resp.Jobs), resp.Jobs))
	case err == nil:
	case flux.ErrnoOf(err) == syscall.ENOSYS:
		// no job-shell module: no jobs here
	default:
		b.log.Error(fmt.Sprintf("overlay: cut off from the parent (%s): could not kill this node's job tasks: %v", why, err))
	}
}
