package broker

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// Memory tuning of a broker process.
//
// The Go collector lets the heap grow to about twice what is live before
// it collects (GOGC=100) and hands memory it no longer needs back to the
// kernel only slowly. A broker's live heap swings: a burst of jobs makes
// it grow for minutes, then the jobs end and most of it is garbage. Left
// alone, the process would keep that high-water mark resident.
//
// The broker attribute broker.memory-limit (read at start-up) says what
// to do:
//
//   - "auto" (the default, unless GOMEMLIMIT is set in the environment):
//     every second the broker sets a soft memory limit
//     (runtime/debug.SetMemoryLimit) just above what the heap goal GOGC
//     sets for the live heap needs, never below MemoryLimitFloor, and no
//     limit while the live heap is growing or while the broker is busy
//     (the collector ran since the last reading). A limit makes the
//     runtime hand free pages back to the kernel as soon as the heap
//     approaches it; while jobs stream through, those pages are wanted
//     again a moment later, and faulting them back in cost the job
//     pipeline 10-20% of its CPU (a page fault takes ~28 µs on a small
//     VM). So the limit trims what a burst left behind, once it is
//     over. The limit is derived from GOGC's goal, not from the
//     collector's current goal (which a limit caps), so it makes the
//     collector run no earlier than GOGC would, but the runtime returns
//     memory above it to the kernel promptly: resident memory tracks
//     the live heap instead of its peak.
//     And when the collector has not run for idleTrim (the broker went
//     quiet after a burst, so the heap goal still reflects the burst),
//     the broker collects once and returns all free memory
//     (debug.FreeOSMemory): at most one extra collection per natural
//     one, made when allocation is slow.
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

// MemoryLimitFloor is the lowest limit the "auto" policy sets: below it
// the collector is left to GOGC alone.
const MemoryLimitFloor = 64 << 20

// memoryTick is how often the "auto" policy moves the limit, and
// idleTrim how long without a collection makes it collect and return
// free memory to the kernel.
const (
	memoryTick = time.Second
	idleTrim   = 10 * time.Second
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
	n, err := parseSize(s)
	if err != nil {
		return memoryPolicy{}, fmt.Errorf("%s=%q: %v (want auto, off or a size like 512M)", MemoryLimitAttr, s, err)
	}
	return memoryPolicy{limit: n}, nil
}

// parseSize parses a byte count with an optional K, M, G or T suffix
// (powers of 1024; a trailing "B" or "iB" is accepted).
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseUint(t, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("not a size")
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size too large")
	}
	if n == 0 {
		return 0, fmt.Errorf("size must be positive")
	}
	return int64(n) << shift, nil
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
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			followHeapGoal(ctx)
		}()
		return func() { cancel(); <-done }, nil
	case p.limit > 0:
		debug.SetMemoryLimit(p.limit)
	default:
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(math.MaxInt64)
		}
	}
	return func() {}, nil
}

// followHeapGoal runs the "auto" policy until ctx is done.
func followHeapGoal(ctx context.Context) {
	s := newHeapSampler()
	t := time.NewTicker(memoryTick)
	defer t.Stop()
	lastGC, trimmed := time.Now(), false
	for {
		h := s.read()
		now := time.Now()
		if h.busy {
			lastGC, trimmed = now, false
		}
		if !trimmed && now.Sub(lastGC) >= idleTrim {
			debug.FreeOSMemory()
			trimmed = true
			h = s.read()
			h.busy = false // the collection was ours
		}
		debug.SetMemoryLimit(h.limit())
		select {
		case <-ctx.Done():
			debug.SetMemoryLimit(math.MaxInt64)
			return
		case <-t.C:
		}
	}
}

// heapSampler reads the runtime metrics the "auto" policy needs.
type heapSampler struct {
	samples    []metrics.Sample
	prevLive   int64
	prevCycles uint64
}

// The metrics heapSampler reads, in this order.
var heapMetrics = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/live:bytes",
	"/gc/gogc:percent",
	"/gc/scan/stack:bytes",
	"/gc/scan/globals:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

func newHeapSampler() *heapSampler {
	s := &heapSampler{samples: make([]metrics.Sample, len(heapMetrics))}
	for i, n := range heapMetrics {
		s.samples[i].Name = n
	}
	return s
}

// heapState is one reading of the runtime metrics.
type heapState struct {
	cycles  uint64
	live    int64 // heap marked live by the last collection
	growing bool  // live grew by more than a tenth since the last reading
	busy    bool  // the collector ran since the last reading
	gogc    int64 // GOGC; negative: off
	scan    int64 // stacks and globals the collector scans
	unused  int64 // room in in-use heap spans that holds no object
	other   int64 // the runtime's memory outside the heap
}

func (s *heapSampler) read() heapState {
	metrics.Read(s.samples)
	v := func(i int) uint64 {
		if s.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.samples[i].Value.Uint64()
	}
	i := func(k int) int64 { return int64(min(v(k), math.MaxInt64)) }
	h := heapState{cycles: v(0), live: i(1), scan: i(3) + i(4), unused: i(7)}
	if g := v(2); g > math.MaxInt32 {
		h.gogc = -1 // GOGC=off reads as the largest uint64
	} else {
		h.gogc = int64(g)
	}
	h.other = i(5) - i(6) - i(7) - i(8) - i(9)
	h.growing = h.live > s.prevLive+s.prevLive/10
	h.busy = h.cycles != s.prevCycles
	s.prevLive, s.prevCycles = h.live, h.cycles
	return h
}

// limit is the soft memory limit for h: none while the live heap grows
// (so the limit never makes the collector run earlier than GOGC would),
// while the broker is busy (so free pages stay mapped for the work in
// progress) or when GOGC is off; otherwise autoLimit of the heap goal
// GOGC gives for the live heap.
func (h heapState) limit() int64 {
	if h.growing || h.busy || h.gogc < 0 {
		return math.MaxInt64
	}
	goal := h.live + (h.live+h.scan)*h.gogc/100
	return autoLimit(goal, h.unused, h.other)
}

// autoLimit is the "auto" policy's limit: the heap goal, plus the heap's
// fragmentation (unused: room in in-use spans that holds no object) and
// the runtime's memory outside the heap (other: stacks, metadata), plus
// an eighth for the goal to move between ticks, and at least the floor.
func autoLimit(goal, unused, other int64) int64 {
	need := goal + max(unused, 0) + max(other, 0)
	return max(need+need/8, MemoryLimitFloor)
}
