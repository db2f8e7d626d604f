// Package num holds the exact integers the extension computes with (§2: every
// product is formed in full, never rounded or saturated).
package num

import (
	"math/big"
	"math/bits"
)

// U128 is an unsigned 128-bit integer, the width of a pathway's J and D
// (extension §7.1).
type U128 struct{ Lo, Hi uint64 }

// From64 returns v as a U128.
func From64(v uint64) U128 { return U128{Lo: v} }

// IsZero reports whether x is 0.
func (x U128) IsZero() bool { return x.Lo == 0 && x.Hi == 0 }

// Add returns x + y and whether the sum overflowed 128 bits.
func (x U128) Add(y U128) (U128, bool) {
	lo, c := bits.Add64(x.Lo, y.Lo, 0)
	hi, c := bits.Add64(x.Hi, y.Hi, c)
	return U128{Lo: lo, Hi: hi}, c != 0
}

// Add64 returns x + v and whether the sum overflowed 128 bits.
func (x U128) Add64(v uint64) (U128, bool) { return x.Add(U128{Lo: v}) }

// Cmp compares x and y: -1, 0 or +1.
func (x U128) Cmp(y U128) int {
	switch {
	case x.Hi < y.Hi:
		return -1
	case x.Hi > y.Hi:
		return 1
	case x.Lo < y.Lo:
		return -1
	case x.Lo > y.Lo:
		return 1
	}
	return 0
}

// Big returns x as a big.Int.
func (x U128) Big() *big.Int {
	b := new(big.Int).SetUint64(x.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(x.Lo))
}

// String is x in decimal, as the corpus writes J and D (COMPANION §8).
func (x U128) String() string {
	if x.Hi == 0 {
		return new(big.Int).SetUint64(x.Lo).String()
	}
	return x.Big().String()
}
