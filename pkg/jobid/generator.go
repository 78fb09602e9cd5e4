package jobid

import (
	"fmt"
	"sync"
	"time"
)

// Generator makes FLUIDs: strictly increasing, unique IDs from one
// generator id. Several generators with distinct ids (Flux uses the broker
// rank) never collide with one another. A Generator is safe for concurrent
// use.
//
// The timestamp field counts milliseconds since the generator's epoch;
// Flux uses one epoch per instance (the instance's start time) so that the
// 40-bit field lasts about 35 years from then.
//
// Next never returns the same ID twice and never returns an ID smaller
// than the previous one, even if the wall clock steps backwards:
//
//   - When the 1024 sequence numbers of the current millisecond are used
//     up, Next sleeps until the clock reaches the next millisecond.
//   - When the clock reads earlier than the last timestamp used (it was set
//     back), Next keeps counting from the last timestamp, and on running out
//     of sequence numbers moves to the following millisecond at once rather
//     than wait for the clock to catch up.
//
// An epoch taken from time.Now() in this process carries Go's monotonic
// clock reading, and then wall-clock steps do not affect the timestamps at
// all.
type Generator struct {
	mu     sync.Mutex
	gen    uint64
	epoch  time.Time
	lastTS uint64
	seq    uint64 // last sequence number used at lastTS
	fresh  bool   // no ID made yet at lastTS

	now   func() time.Time    // clock; time.Now outside tests
	sleep func(time.Duration) // time.Sleep outside tests
}

// NewGenerator returns a generator with id genID (at most [MaxGenerator])
// whose timestamps count milliseconds since epoch.
func NewGenerator(genID uint16, epoch time.Time) (*Generator, error) {
	if genID > MaxGenerator {
		return nil, fmt.Errorf("%w: generator id %d exceeds %d", ErrGenerator, genID, MaxGenerator)
	}
	return &Generator{
		gen:   uint64(genID),
		epoch: epoch,
		fresh: true,
		now:   time.Now,
		sleep: time.Sleep,
	}, nil
}

// AdvancePast makes every later ID from g greater than id, whichever
// generator made id. A restarted instance calls it with the largest job ID
// it has on record, so that new IDs stay above the old ones.
func (g *Generator) AdvancePast(id ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ts := id.Timestamp(); ts >= g.lastTS {
		// Mark ts as used up: the next ID moves to ts+1.
		g.lastTS = ts
		g.seq = MaxSequence
		g.fresh = false
	}
}

// Next returns a new ID. It fails, wrapping [ErrGenerator], only once the
// timestamp field is exhausted (about 35 years after the epoch).
func (g *Generator) Next() (ID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		clock, sane := g.clock()
		switch {
		case clock > g.lastTS || g.fresh && clock == g.lastTS:
			g.lastTS, g.seq, g.fresh = clock, 0, false
		case g.seq < MaxSequence:
			g.seq++
		case sane && clock == g.lastTS:
			// Sequence used up in the current millisecond: wait for the next.
			g.sleep(g.untilNextMillisecond())
			continue
		default:
			// The clock is behind lastTS (it was set back, or reads before
			// the epoch): move on without waiting for it.
			g.lastTS, g.seq = g.lastTS+1, 0
		}
		if g.lastTS > MaxTimestamp {
			return 0, fmt.Errorf("%w: timestamp %d ms since epoch exceeds %d bits", ErrGenerator, g.lastTS, TimestampBits)
		}
		return compose(g.lastTS, g.gen, g.seq), nil
	}
}

// clock returns whole milliseconds since the epoch, and false (with 0) if
// the clock reads before the epoch.
func (g *Generator) clock() (uint64, bool) {
	d := g.now().Sub(g.epoch)
	if d < 0 {
		return 0, false
	}
	return uint64(d / time.Millisecond), true
}

func (g *Generator) untilNextMillisecond() time.Duration {
	d := g.now().Sub(g.epoch)
	wait := time.Millisecond - d%time.Millisecond
	if wait <= 0 {
		wait = time.Millisecond
	}
	return wait
}
