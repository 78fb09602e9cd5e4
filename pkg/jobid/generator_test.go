package jobid

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock; sleeping advances it.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps int
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps++
	c.t = c.t.Add(d)
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var testEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeGenerator(t *testing.T, genID uint16, start time.Time) (*Generator, *fakeClock) {
	t.Helper()
	g, err := NewGenerator(genID, testEpoch)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: start}
	g.now, g.sleep = c.now, c.sleep
	return g, c
}

func mustNext(t *testing.T, g *Generator) ID {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestGeneratorFields(t *testing.T) {
	g, _ := newFakeGenerator(t, 5, testEpoch.Add(1500*time.Millisecond))
	id := mustNext(t, g)
	if id.Timestamp() != 1500 || id.Generator() != 5 || id.Sequence() != 0 {
		t.Fatalf("first id fields = %d/%d/%d, want 1500/5/0", id.Timestamp(), id.Generator(), id.Sequence())
	}
	id = mustNext(t, g)
	if id.Timestamp() != 1500 || id.Sequence() != 1 {
		t.Fatalf("second id fields = %d/%d, want 1500/1", id.Timestamp(), id.Sequence())
	}
}

func TestGeneratorSequenceRollover(t *testing.T) {
	g, c := newFakeGenerator(t, 1, testEpoch.Add(10*time.Millisecond+300*time.Microsecond))
	var last ID
	for i := 0; i < 3*(MaxSequence+1); i++ {
		id := mustNext(t, g)
		if i > 0 && id <= last {
			t.Fatalf("id %d: %d not greater than %d", i, id, last)
		}
		last = id
	}
	if c.sleeps != 2 {
		t.Errorf("slept %d times, want 2 (once per exhausted millisecond)", c.sleeps)
	}
	if last.Timestamp() != 12 || last.Sequence() != MaxSequence {
		t.Errorf("last id at %d/%d, want 12/%d", last.Timestamp(), last.Sequence(), MaxSequence)
	}
}

func TestGeneratorClockBackwards(t *testing.T) {
	start := testEpoch.Add(time.Hour)
	g, c := newFakeGenerator(t, 3, start)
	seen := map[ID]bool{}
	var last ID
	next := func() {
		t.Helper()
		id := mustNext(t, g)
		if seen[id] {
			t.Fatalf("duplicate id %d", id)
		}
		if id <= last {
			t.Fatalf("id %d not greater than %d", id, last)
		}
		seen[id], last = true, id
	}
	for i := 0; i < 10; i++ {
		next()
	}
	c.set(start.Add(-time.Minute)) // clock set back a minute
	for i := 0; i < 5*(MaxSequence+1); i++ {
		next()
	}
	if c.sleeps != 0 {
		t.Errorf("slept %d times while the clock was behind; want 0", c.sleeps)
	}
	c.set(testEpoch.Add(-time.Hour)) // before the epoch
	for i := 0; i < 2*(MaxSequence+1); i++ {
		next()
	}
	if c.sleeps != 0 {
		t.Errorf("slept %d times while the clock was before the epoch; want 0", c.sleeps)
	}
	c.set(start.Add(time.Minute)) // clock ahead again
	next()
	if last.Timestamp() != uint64(time.Hour/time.Millisecond+time.Minute/time.Millisecond) || last.Sequence() != 0 {
		t.Errorf("after the clock caught up: %d/%d", last.Timestamp(), last.Sequence())
	}
}

func TestGeneratorAdvancePast(t *testing.T) {
	g, _ := newFakeGenerator(t, 0, testEpoch.Add(time.Second))
	old, _ := New(5000, MaxGenerator, MaxSequence) // from another generator, later than our clock
	g.AdvancePast(old)
	id := mustNext(t, g)
	if id <= old {
		t.Fatalf("id %d not above %d", id, old)
	}
	if id.Timestamp() != 5001 {
		t.Errorf("timestamp %d, want 5001", id.Timestamp())
	}
	g.AdvancePast(1) // older: no effect
	if id2 := mustNext(t, g); id2 <= id {
		t.Errorf("AdvancePast(older) moved the generator back: %d after %d", id2, id)
	}
}

func TestGeneratorExhausted(t *testing.T) {
	g, _ := newFakeGenerator(t, 0, testEpoch.Add(time.Duration(MaxTimestamp)*time.Millisecond))
	g.AdvancePast(MustParse("0xffffffffffffffff"))
	if _, err := g.Next(); !errors.Is(err, ErrGenerator) {
		t.Fatalf("Next past the last timestamp: %v, want ErrGenerator", err)
	}
}

func TestNewGeneratorBadID(t *testing.T) {
	if _, err := NewGenerator(MaxGenerator+1, testEpoch); !errors.Is(err, ErrGenerator) {
		t.Fatalf("NewGenerator(%d) error = %v", MaxGenerator+1, err)
	}
}

// TestGeneratorConcurrent uses the real clock: many goroutines share one
// generator; every ID is unique and each goroutine sees increasing IDs.
func TestGeneratorConcurrent(t *testing.T) {
	g, err := NewGenerator(7, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const workers, per = 8, 3000
	results := make([][]ID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]ID, 0, per)
			for range per {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, id)
			}
			results[w] = ids
		}()
	}
	wg.Wait()
	seen := make(map[ID]bool, workers*per)
	for w, ids := range results {
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("worker %d: id %d not above %d", w, id, ids[i-1])
			}
			if id.Generator() != 7 {
				t.Fatalf("id %d has generator %d", id, id.Generator())
			}
		}
	}
}

// Two generators with different ids never collide even at the same
// timestamp.
func TestGeneratorsDistinct(t *testing.T) {
	start := testEpoch.Add(time.Second)
	a, _ := newFakeGenerator(t, 1, start)
	b, _ := newFakeGenerator(t, 2, start)
	seen := map[ID]bool{}
	for range 2000 {
		for _, g := range []*Generator{a, b} {
			id := mustNext(t, g)
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
		}
	}
}
