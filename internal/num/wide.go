package num

import (
	"math/big"
	"math/bits"
)

// U256 is an unsigned 256-bit integer, little-endian words: the full product
// of two U128s, as §6.2 compares figures (J_p × D_q against J_q × D_p).
type U256 [4]uint64

// U320 is an unsigned 320-bit integer, little-endian words: a U256 times a
// u64, as §6.4 weighs a figure by the hysteresis margin
// (J × D × (1 000 000 + h)).
type U320 [5]uint64

// Mul returns the full product x × y: 128 × 128 bits never exceeds 256, so
// nothing is lost (§2: a product is formed in full).
func (x U128) Mul(y U128) U256 {
	// Schoolbook over 64-bit limbs: (x1·2^64 + x0)(y1·2^64 + y0).
	h00, l00 := bits.Mul64(x.Lo, y.Lo)
	h01, l01 := bits.Mul64(x.Lo, y.Hi)
	h10, l10 := bits.Mul64(x.Hi, y.Lo)
	h11, l11 := bits.Mul64(x.Hi, y.Hi)

	var z U256
	z[0] = l00

	var c1, c2 uint64
	z[1], c1 = bits.Add64(h00, l01, 0)
	z[1], c2 = bits.Add64(z[1], l10, 0)
	carry := c1 + c2 // at most 2, into word 2

	z[2], c1 = bits.Add64(h01, h10, 0)
	z[2], c2 = bits.Add64(z[2], l11, 0)
	var c3 uint64
	z[2], c3 = bits.Add64(z[2], carry, 0)
	carry = c1 + c2 + c3 // at most 3, into word 3

	// The product is below 2^256, so word 3 cannot carry out.
	z[3] = h11 + carry
	return z
}

// Cmp compares x and y: -1, 0 or +1.
func (x U256) Cmp(y U256) int {
	for i := len(x) - 1; i >= 0; i-- {
		switch {
		case x[i] < y[i]:
			return -1
		case x[i] > y[i]:
			return 1
		}
	}
	return 0
}

// Mul64 returns the full product x × m: 256 × 64 bits never exceeds 320.
func (x U256) Mul64(m uint64) U320 {
	var z U320
	var carry uint64
	for i, w := range x {
		hi, lo := bits.Mul64(w, m)
		var c uint64
		z[i], c = bits.Add64(lo, carry, 0)
		carry = hi + c // hi ≤ 2^64 − 2, so this does not wrap
	}
	z[4] = carry
	return z
}

// Cmp compares x and y: -1, 0 or +1.
func (x U320) Cmp(y U320) int {
	for i := len(x) - 1; i >= 0; i-- {
		switch {
		case x[i] < y[i]:
			return -1
		case x[i] > y[i]:
			return 1
		}
	}
	return 0
}

// Big returns x as a big.Int.
func (x U256) Big() *big.Int { return wordsBig(x[:]) }

// Big returns x as a big.Int.
func (x U320) Big() *big.Int { return wordsBig(x[:]) }

func wordsBig(w []uint64) *big.Int {
	b := new(big.Int)
	for i := len(w) - 1; i >= 0; i-- {
		b.Lsh(b, 64)
		b.Or(b, new(big.Int).SetUint64(w[i]))
	}
	return b
}
