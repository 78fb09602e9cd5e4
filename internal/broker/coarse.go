package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// coarseTick is how often a coarseClock moves while it is read.
const coarseTick = 100 * time.Millisecond

// coarseClock is the time in Unix nanoseconds, at most about a tick old:
// for per-message bookkeeping that reports seconds (a module's idle
// time), where a clock read per message showed in the job pipeline's
// profile. It moves every tick only while something reads it: a tick in
// which nobody read it stops the timer, and the next read starts it
// again (with the time read then), so an idle broker has no timer
// waking it ten times a second. The zero value is ready to use.
type coarseClock struct {
	now     atomic.Int64
	read    atomic.Bool // read since the last tick
	running atomic.Bool // the timer is set
	mu      sync.Mutex  // timer, stopped
	timer   *time.Timer
	stopped bool
	// onQuiet, if set, runs (on the timer's goroutine) each time the
	// clock stops because nobody read it: the broker went quiet.
	onQuiet func()
}

// Now returns the coarse time.
func (c *coarseClock) Now() int64 {
	if !c.read.Load() {
		c.read.Store(true) // a store only once a tick: the line stays shared
	}
	if !c.running.Load() {
		c.wake()
	}
	return c.now.Load()
}

// wake starts the timer (unless another reader did, or the clock was
// stopped) with the time now.
func (c *coarseClock) wake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running.Load() {
		return
	}
	c.now.Store(time.Now().UnixNano())
	if c.stopped {
		return // read exactly each time: the broker is ending
	}
	c.running.Store(true)
	if c.timer == nil {
		c.timer = time.AfterFunc(coarseTick, c.advance)
	} else {
		c.timer.Reset(coarseTick)
	}
}

// advance is the timer's tick: the time moves, and the timer is set
// again only if the clock was read since the last tick.
func (c *coarseClock) advance() {
	c.mu.Lock()
	c.now.Store(time.Now().UnixNano())
	if !c.stopped && c.read.Swap(false) {
		c.timer.Reset(coarseTick)
		c.mu.Unlock()
		return
	}
	c.running.Store(false)
	quiet := c.onQuiet
	if c.stopped {
		quiet = nil
	}
	c.mu.Unlock()
	if quiet != nil {
		quiet()
	}
}

// stop ends the timer for good; reads after it read the clock each time.
func (c *coarseClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.running.Store(false)
}
