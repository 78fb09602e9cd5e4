package broker

import (
	"math"
	"runtime/debug"
	"testing"
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
		{in: "1.5G", err: true},
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

func TestAutoLimit(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		name                string
		goal, unused, other int64
		want                int64
	}{
		{name: "small heap: the floor", goal: 4 * mb, unused: mb, other: 8 * mb, want: MemoryLimitFloor},
		{name: "goal plus overheads plus an eighth", goal: 200 * mb, unused: 40 * mb, other: 16 * mb, want: 288 * mb},
		{name: "negative readings ignored", goal: 400 * mb, unused: -1, other: -1, want: 450 * mb},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := autoLimit(tt.goal, tt.unused, tt.other); got != tt.want {
				t.Fatalf("autoLimit = %d MiB, want %d MiB", got/mb, tt.want/mb)
			}
		})
	}
	// what the runtime reports now gives a limit at least the floor
	s := newHeapSampler()
	s.read()
	if l := s.read().limit(); l < MemoryLimitFloor && l != math.MaxInt64 {
		t.Fatalf("limit %d below the floor", l)
	}
}

func TestHeapStateLimit(t *testing.T) {
	const mb = 1 << 20
	steady := heapState{live: 100 * mb, gogc: 100, scan: 4 * mb, unused: 12 * mb, other: 20 * mb}
	// goal 100 + 104 = 204, need 236, plus an eighth
	if got, want := steady.limit(), int64(236*mb+236*mb/8); got != want {
		t.Fatalf("limit %d MiB, want %d MiB", got/mb, want/mb)
	}
	growing := steady
	growing.growing = true
	if got := growing.limit(); got != math.MaxInt64 {
		t.Fatalf("limit while the heap grows: %d", got)
	}
	busy := steady
	busy.busy = true
	if got := busy.limit(); got != math.MaxInt64 {
		t.Fatalf("limit while the collector runs: %d", got)
	}
	off := steady
	off.gogc = -1
	if got := off.limit(); got != math.MaxInt64 {
		t.Fatalf("limit with GOGC=off: %d", got)
	}
	s := newHeapSampler()
	s.prevLive = 1 << 40
	if s.read().growing {
		t.Fatal("a heap smaller than before reads as growing")
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
	stop() // the auto policy's goroutine ends and lifts its limit
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d after the auto policy stopped", got)
	}
}
