package cli

import (
	"context"
	"math"
	"time"
)

// A requeued job (preempt-mode=requeue) runs more than once under one
// id: its eventlog goes on past a requeue event to a new alloc, start
// and finish, and each run writes a fresh guest directory (the job
// manager moves the previous one to requeue.N.guest with the requeue
// event). Attach follows the job to its last run: when the main eventlog
// shows a requeue after the start of the run the exec and output
// watches are following, those watches deliver the rest of that run's
// logs (written before the requeue) and end, and new ones follow the
// next run. A requeue from before that run (an attach begun after it)
// changes nothing: the watches follow the current run already.

// follows are the exec and output eventlog watches of one run.
type follows struct {
	cancel    context.CancelFunc
	exec, out chan error
}

// startFollows starts watching the exec and output eventlogs (the run's
// output from its start when tail is false).
func (a *attacher) startFollows(ctx context.Context, tail bool) *follows {
	ctx, cancel := context.WithCancel(ctx)
	f := &follows{cancel: cancel, exec: make(chan error, 1), out: make(chan error, 1)}
	a.runT0.Store(0)
	go func() { f.exec <- a.followExec(ctx) }()
	go func() { f.out <- a.followOutput(ctx, tail) }()
	return f
}

// requeued handles a requeue event at ts: the watches of a run that
// began before it give way to new ones, once they have taken the rest of
// that run's logs (complete before the requeue; a watch still busy after
// requeueDrain is stopped).
func (a *attacher) requeued(ctx context.Context, f *follows, ts float64) *follows {
	t0 := math.Float64frombits(a.runT0.Load())
	if t0 == 0 || t0 >= ts {
		return f // following the run after the requeue already
	}
	nctx, cancel := context.WithCancel(ctx)
	nf := &follows{cancel: cancel, exec: make(chan error, 1), out: make(chan error, 1)}
	go func() {
		drain := time.NewTimer(requeueDrain)
		defer drain.Stop()
		for _, c := range []chan error{f.exec, f.out} {
			select {
			case <-c:
			case <-drain.C:
			case <-ctx.Done():
			}
		}
		f.cancel()
		a.runT0.Store(0)
		go func() { nf.exec <- a.followExec(nctx) }()
		nf.out <- a.followOutput(nctx, false)
	}()
	return nf
}

// requeueDrain bounds how long the watches of a requeued run may take
// to deliver the rest of its logs before the next run's are followed.
const requeueDrain = 10 * time.Second

// runStarted notes the timestamp of the followed run's first exec event.
func (a *attacher) runStarted(ts float64) {
	a.runT0.CompareAndSwap(0, math.Float64bits(ts))
}
