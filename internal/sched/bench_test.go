package sched

import (
	"testing"
)

// BenchmarkAllocFree1Core measures allocating and freeing one-core jobs on
// 16,384 nodes × 64 cores kept about half full.
func BenchmarkAllocFree1Core(b *testing.B) {
	p := bigPool(b, 16384, 64)
	req := &Request{Slots: 1, SlotCores: 1}
	ring := make([]*Alloc, 1<<19)
	for i := range ring {
		a, err := p.Allocate(req, 0)
		if err != nil {
			b.Fatal(err)
		}
		ring[i] = a
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		if err := p.Free(ring[k]); err != nil {
			b.Fatal(err)
		}
		a, err := p.Allocate(req, 1)
		if err != nil {
			b.Fatal(err)
		}
		buf = p.AppendR(buf[:0], a)
		ring[k] = a
		k = (k + 1) & (len(ring) - 1)
	}
}
