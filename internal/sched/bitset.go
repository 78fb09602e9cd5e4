package sched

import "math/bits"

// bitset is a fixed-size set of small integers (node indexes or core
// positions), one bit each.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }
func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) clear(i int)    { b[i>>6] &^= 1 << (uint(i) & 63) }

// count returns the number of members.
func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// next returns the smallest member >= from, or -1.
func (b bitset) next(from int) int {
	if from < 0 {
		from = 0
	}
	wi := from >> 6
	if wi >= len(b) {
		return -1
	}
	w := b[wi] &^ (1<<(uint(from)&63) - 1)
	for {
		if w != 0 {
			return wi<<6 + bits.TrailingZeros64(w)
		}
		wi++
		if wi >= len(b) {
			return -1
		}
		w = b[wi]
	}
}

func (b bitset) clone() bitset { return append(bitset(nil), b...) }

func (b bitset) and(o bitset) {
	for i := range b {
		b[i] &= o[i]
	}
}

func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// not complements b over the first n positions.
func (b bitset) not(n int) {
	for i := range b {
		b[i] = ^b[i]
	}
	if r := n & 63; r != 0 {
		b[len(b)-1] &= 1<<uint(r) - 1
	}
}

// fill sets positions 0..n-1.
func (b bitset) fill(n int) {
	for i := range b {
		b[i] = ^uint64(0)
	}
	if r := n & 63; r != 0 {
		b[len(b)-1] = 1<<uint(r) - 1
	}
}

// takeLowest moves the k lowest members of b into dst (which has b's
// size) and returns how many it moved (fewer when b has fewer than k).
func (b bitset) takeLowest(dst bitset, k int) int {
	moved := 0
	for wi := range b {
		for b[wi] != 0 && moved < k {
			low := b[wi] & -b[wi]
			b[wi] &^= low
			dst[wi] |= low
			moved++
		}
		if moved == k {
			break
		}
	}
	return moved
}

// takeLowestIn is takeLowest among the members of b that are also in
// mask (which has b's size).
func (b bitset) takeLowestIn(dst, mask bitset, k int) int {
	moved := 0
	for wi := range b {
		for b[wi]&mask[wi] != 0 && moved < k {
			w := b[wi] & mask[wi]
			low := w & -w
			b[wi] &^= low
			dst[wi] |= low
			moved++
		}
		if moved == k {
			break
		}
	}
	return moved
}

// takeHighest moves the k highest members of b into dst (high-id
// placement) and returns how many it moved.
func (b bitset) takeHighest(dst bitset, k int) int {
	return b.takeHighestIn(dst, nil, k)
}

// takeHighestIn is takeHighest among the members of b also in mask
// (nil: all).
func (b bitset) takeHighestIn(dst, mask bitset, k int) int {
	moved := 0
	for wi := len(b) - 1; wi >= 0 && moved < k; wi-- {
		for moved < k {
			w := b[wi]
			if mask != nil {
				w &= mask[wi]
			}
			if w == 0 {
				break
			}
			high := uint64(1) << (63 - bits.LeadingZeros64(w))
			b[wi] &^= high
			dst[wi] |= high
			moved++
		}
	}
	return moved
}

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }
