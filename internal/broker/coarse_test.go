package broker

import (
	"testing"
	"time"
)

// The coarse clock runs while read and stops when nobody reads it; a
// read after a stop gets the time of that read, not the stale one.
func TestCoarseClockStopsWhenUnread(t *testing.T) {
	var c coarseClock
	before := time.Now().UnixNano()
	if got := c.Now(); got < before {
		t.Fatalf("first read %d is before %d", got, before)
	}
	if !c.running.Load() {
		t.Fatal("a read did not start the clock")
	}
	// nobody reads: it stops within a couple of ticks
	deadline := time.Now().Add(time.Minute) // a hang guard only
	for c.running.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the clock kept running with no reader")
		}
		time.Sleep(coarseTick / 4)
	}
	before = time.Now().UnixNano()
	if got := c.Now(); got < before {
		t.Fatalf("a read after the clock stopped got %d, older than %d", got, before)
	}
	if !c.running.Load() {
		t.Fatal("a read did not start the stopped clock again")
	}
	// while read, it moves
	first := c.Now()
	for c.Now() == first {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not move while read")
		}
		time.Sleep(coarseTick / 4)
	}
	c.stop()
	if c.running.Load() {
		t.Fatal("stop left the timer running")
	}
	before = time.Now().UnixNano()
	if got := c.Now(); got < before || c.running.Load() {
		t.Fatalf("a read after stop got %d (before %d), running %v", got, before, c.running.Load())
	}
}

// onQuiet runs when the clock stops for want of readers.
func TestCoarseClockOnQuiet(t *testing.T) {
	quiet := make(chan struct{}, 4)
	c := coarseClock{onQuiet: func() { quiet <- struct{}{} }}
	c.Now()
	select {
	case <-quiet:
	case <-time.After(time.Minute): // a hang guard only
		t.Fatal("onQuiet did not run after the clock stopped")
	}
	if c.running.Load() {
		t.Fatal("onQuiet ran while the clock was running")
	}
	c.stop()
}
