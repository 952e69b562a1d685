package scheduling

import "math/bits"

// bitset indexes a NodePool's instance types (ordered cheapest first), so
// per-shape and per-claim type filtering is a few word operations.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) has(i int) bool { return i >= 0 && i>>6 < len(b) && b[i>>6]&(1<<(uint(i)&63)) != 0 }

func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// each calls f for every set bit in ascending order until f returns false.
func (b bitset) each(f func(int) bool) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			if !f(wi<<6 + t) {
				return
			}
			w &= w - 1
		}
	}
}

// first returns the lowest set bit or -1.
func (b bitset) first() int {
	for wi, w := range b {
		if w != 0 {
			return wi<<6 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// growBits is a bitset over node indices that grows on demand.
type growBits []uint64

func (b *growBits) set(i int) {
	for i>>6 >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[i>>6] |= 1 << (uint(i) & 63)
}

func (b growBits) has(i int) bool { return i>>6 < len(b) && b[i>>6]&(1<<(uint(i)&63)) != 0 }

func (b bitset) equal(o bitset) bool {
	if len(b) != len(o) {
		return false
	}
	for i := range b {
		if b[i] != o[i] {
			return false
		}
	}
	return true
}

// and returns a new set of the bits in both b and o.
func (b bitset) and(o bitset) bitset {
	out := make(bitset, len(b))
	for i := range out {
		if i < len(o) {
			out[i] = b[i] & o[i]
		}
	}
	return out
}
