package broker

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestParseMemoryLimit(t *testing.T) {
	tests := []struct {
		in   string
		want memoryPolicy
		err  bool
	}{
		{in: "auto", want: memoryPolicy{auto: true}},
		{in: "AUTO", want: memoryPolicy{auto: true}},
		{in: "off", want: memoryPolicy{}},
		{in: "0", want: memoryPolicy{}},
		{in: "1048576", want: memoryPolicy{limit: 1 << 20}},
		{in: "512M", want: memoryPolicy{limit: 512 << 20}},
		{in: "512MiB", want: memoryPolicy{limit: 512 << 20}},
		{in: "2g", want: memoryPolicy{limit: 2 << 30}},
		{in: "64KB", want: memoryPolicy{limit: 64 << 10}},
		{in: "1T", want: memoryPolicy{limit: 1 << 40}},
		{in: "", err: true},
		{in: "lots", err: true},
		{in: "-5M", err: true},
		{in: "1.5G", want: memoryPolicy{limit: 3 << 29}}, // the sizes of the configuration
		{in: "0M", err: true},
		{in: "99999999999T", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMemoryLimit(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("parseMemoryLimit(%q) error %v, want error %v", tt.in, err, tt.err)
			}
			if err == nil && got != tt.want {
				t.Fatalf("parseMemoryLimit(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestQuietness: the auto policy trims once after a burst, when the
// collector has been quiet for quietTicks ticks, not during the burst,
// not before anything happened, and not again until the next burst.
func TestQuietness(t *testing.T) {
	var q quietness
	run := func(cycles ...uint64) (trims []int) {
		for i, n := range cycles {
			if q.tick(n) {
				trims = append(trims, i)
			}
		}
		return trims
	}
	if got := run(0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0); len(got) != 0 {
		t.Fatalf("trimmed at ticks %v of a quiet start", got)
	}
	// a burst of 5 s, then quiet: the window of quietTicks ticks holds
	// the burst until quietTicks ticks after its last busy one
	burst := []uint64{30, 40, 25, 30, 20}
	quiet := make([]uint64, 14)
	got := run(append(burst, quiet...)...)
	if len(got) != 1 || got[0] != len(burst)+quietTicks-1 {
		t.Fatalf("trims at ticks %v, want one at tick %d", got, len(burst)+quietTicks-1)
	}
	// occasional collections (a slow trickle of work) are quiet
	if got := run(1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1); len(got) != 0 {
		t.Fatalf("trimmed again at ticks %v without a burst", got)
	}
	// the next burst is trimmed after in turn
	if got := run(append([]uint64{50, 50}, make([]uint64, quietTicks)...)...); len(got) != 1 {
		t.Fatalf("trims after a second burst: %v", got)
	}
}

func TestTuneMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(math.MaxInt64)
	if _, err := TuneMemory(map[string]string{MemoryLimitAttr: "nonsense"}); err == nil {
		t.Fatal("bad broker.memory-limit accepted")
	}
	stop, err := TuneMemory(map[string]string{MemoryLimitAttr: "300M"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("memory limit %d, want 300M", got)
	}
	stop, err = TuneMemory(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	stop() // the auto policy's goroutine ends; it set no limit
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Fatalf("memory limit %d: the auto policy changed it", got)
	}
}

// The auto policy stops ticking once nothing is left to trim and the
// window saw no collection, and not before.
func TestQuietnessIdle(t *testing.T) {
	var q quietness
	if q.idle() {
		t.Fatal("idle before a whole window of ticks")
	}
	for range quietTicks {
		q.tick(0)
	}
	if !q.idle() {
		t.Fatal("not idle after a quiet window")
	}
	q.tick(3) // work
	if q.idle() {
		t.Fatal("idle with a collection in the window")
	}
	trimmed := false
	for range quietTicks {
		trimmed = q.tick(0) || trimmed
		if !trimmed && q.idle() {
			t.Fatal("idle before the burst was trimmed")
		}
	}
	if !trimmed || !q.idle() {
		t.Fatalf("after the burst: trimmed %v, idle %v", trimmed, q.idle())
	}
}

// gcSignal wakes its reader after a collection, each time.
func TestGCSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := gcSignal(ctx)
	for i := range 3 {
		runtime.GC()
		select {
		case <-ch:
		case <-time.After(time.Minute): // a hang guard only
			t.Fatalf("no signal after collection %d", i+1)
		}
	}
}
