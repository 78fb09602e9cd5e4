package broker

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/internal/size"
)

// Memory tuning of a broker process.
//
// The Go collector lets the heap grow to about twice what is live before
// it collects (GOGC=100) and hands memory it no longer needs back to the
// kernel only slowly. A broker's live heap swings: a burst of jobs makes
// it grow for minutes, then the jobs end and most of it is garbage. Left
// alone, the process would keep that high-water mark resident for a
// long while.
//
// The broker attribute broker.memory-limit (read at start-up) says what
// to do:
//
//   - "auto" (the default, unless GOMEMLIMIT is set in the environment):
//     once a burst is over (the collector ran at most once in the last
//     5 seconds: quietCycles, quietTicks), the broker collects once and
//     returns all free memory to the kernel (debug.FreeOSMemory): resident
//     memory drops to what is live. It sets no memory limit: a limit
//     makes the runtime hand pages back as soon as the heap nears it, and
//     at the start of the next burst those pages are wanted again a moment
//     later; faulting them back in cost the job pipeline 12-15% of its CPU
//     (bench/throughput; a page fault takes ~28 us on a small VM).
//     Once quiet it also unmaps the binary's read-only pages it is not
//     using (filepages.go): most of an idle broker's RSS was those.
//   - a size ("512M", "2G", "268435456"; K, M, G, T are powers of 1024):
//     a fixed soft limit. Near it the collector works harder (at most
//     about half the CPU) to stay under it.
//   - "off" or "0": the runtime's defaults (GOGC and GOMEMLIMIT from the
//     environment).
//
// GOMEMLIMIT set in the environment is honored as a fixed limit (the
// runtime applies it) unless broker.memory-limit is given too. The
// setting is process-wide: it is applied by the flux broker command, not
// by brokers run inside another program (tests).

// MemoryLimitAttr is the broker attribute that sets the memory policy.
const MemoryLimitAttr = "broker.memory-limit"

// The "auto" policy looks at the collector every memoryTick; it trims
// when the collector ran at most quietCycles times (its own collection
// aside) in the last quietTicks ticks, and not again until it has been
// busier than that.
const (
	memoryTick  = time.Second
	quietTicks  = 5
	quietCycles = 1
)

// memoryPolicy is a parsed broker.memory-limit value.
type memoryPolicy struct {
	auto  bool
	limit int64 // fixed limit in bytes; 0 with !auto: runtime defaults
}

// parseMemoryLimit parses a broker.memory-limit value.
func parseMemoryLimit(s string) (memoryPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return memoryPolicy{auto: true}, nil
	case "off", "0":
		return memoryPolicy{}, nil
	}
	n, err := size.Parse(s)
	if err != nil {
		return memoryPolicy{}, fmt.Errorf("%s=%q: %v (want auto, off or a size like 512M)", MemoryLimitAttr, s, err)
	}
	return memoryPolicy{limit: n}, nil
}

// TuneMemory applies the broker.memory-limit policy found in attrs (the
// broker's --setattr values) to this process and returns a function that
// stops the "auto" policy's goroutine. Call it once per process, before
// the broker runs.
func TuneMemory(attrs map[string]string) (stop func(), err error) {
	v, set := attrs[MemoryLimitAttr]
	if !set {
		if os.Getenv("GOMEMLIMIT") != "" {
			return func() {}, nil // the runtime applied it
		}
		v = "auto"
	}
	p, err := parseMemoryLimit(v)
	if err != nil {
		return nil, err
	}
	switch {
	case p.auto:
		releaseOnQuiet.Store(true) // filepages.go
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			trimWhenQuiet(ctx)
		}()
		return func() { releaseOnQuiet.Store(false); cancel(); <-done }, nil
	case p.limit > 0:
		debug.SetMemoryLimit(p.limit)
	default:
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(math.MaxInt64)
		}
	}
	return func() {}, nil
}

// trimWhenQuiet runs the "auto" policy until ctx is done.
func trimWhenQuiet(ctx context.Context) {
	var q quietness
	// (debug.ReadGCStats, not runtime/metrics: that package's init
	// costs every flux process ~0.5 ms, and job shells are processes too)
	var stats debug.GCStats
	cycles := func() uint64 {
		debug.ReadGCStats(&stats)
		return uint64(stats.NumGC)
	}
	prev := cycles()
	t := time.NewTicker(memoryTick)
	defer t.Stop()
	gc := gcSignal(ctx)
	release := true // the binary's pages start-up touched (filepages.go)
	for {
		if q.idle() {
			if release {
				releaseBinaryPages()
				release = false
			}
			// nothing to trim and nothing collected for a while: no tick
			// until the collector runs again (work, or the runtime's
			// forced collection every two minutes)
			t.Stop()
			for cycles() == prev {
				select {
				case <-ctx.Done():
					return
				case <-gc: // one from before prev was read wakes it in vain
				}
			}
			t.Reset(memoryTick)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := cycles()
		if q.tick(now - prev) {
			debug.FreeOSMemory()
			release = true
			now = cycles() // that collection was ours
		}
		prev = now
	}
}

// gcSignal returns a channel that is sent to (without blocking: it holds
// one) after each collection, until ctx is done: a finalizer on an
// unreachable sentinel runs once a cycle has found it, and arms the next.
func gcSignal(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	type sentinel struct{ _ [32]byte } // not a tiny allocation: its finalizer runs
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(sentinel), func(*sentinel) {
			if ctx.Err() != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			arm()
		})
	}
	arm()
	return ch
}

// quietness decides when the "auto" policy trims, from the collections
// of each tick.
type quietness struct {
	recent  [quietTicks]uint64 // collections in each of the last ticks
	ticks   int
	pending bool // busy since the last trim
}

// idle says that no tick is needed until the collector runs: nothing is
// waiting to be trimmed and no tick in the window saw a collection.
func (q *quietness) idle() bool {
	if q.pending || q.ticks < quietTicks {
		return false
	}
	for _, c := range q.recent {
		if c != 0 {
			return false
		}
	}
	return true
}

// tick records the collections of one tick and says whether to trim now.
func (q *quietness) tick(n uint64) bool {
	q.recent[q.ticks%quietTicks] = n
	q.ticks++
	var total uint64
	for _, c := range q.recent {
		total += c
	}
	if total > quietCycles {
		q.pending = true
		return false
	}
	if q.pending && q.ticks >= quietTicks {
		q.pending = false
		return true
	}
	return false
}
