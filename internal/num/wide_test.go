package num

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// edges are the 64-bit words at which carries happen.
var edges = []uint64{0, 1, 2, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, 1<<64 - 2, 1<<64 - 1}

// random128 draws a U128 whose words are either random or an edge word, so
// carries across every limb are exercised.
func random128(r *rand.Rand) U128 {
	w := func() uint64 {
		if r.IntN(3) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return r.Uint64()
	}
	return U128{Lo: w(), Hi: w()}
}

// TestMulAgainstBig_6_2 checks the 256-bit product of §6.2 (a product formed in
// full, §2) against math/big, on edge words and thousands of random values.
func TestMulAgainstBig_6_2(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(x, y U128) {
		got := x.Mul(y).Big()
		want := new(big.Int).Mul(x.Big(), y.Big())
		if got.Cmp(want) != 0 {
			t.Fatalf("%v × %v = %v, want %v", x, y, got, want)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range edges {
				check(U128{Lo: a, Hi: b}, U128{Lo: c, Hi: a})
				check(U128{Lo: a, Hi: b}, U128{Lo: b, Hi: c})
			}
		}
	}
	for range 20000 {
		check(random128(r), random128(r))
	}
}

// TestMul64AgainstBig_6_4 checks the 320-bit product of §6.4's margin against
// math/big.
func TestMul64AgainstBig_6_4(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		x := random128(r).Mul(random128(r))
		m := r.Uint64()
		if r.IntN(4) == 0 {
			m = edges[r.IntN(len(edges))]
		}
		got := x.Mul64(m).Big()
		want := new(big.Int).Mul(x.Big(), new(big.Int).SetUint64(m))
		if got.Cmp(want) != 0 {
			t.Fatalf("%v × %d = %v, want %v", x.Big(), m, got, want)
		}
	}
}

// TestWideCmpAgainstBig_6_2 checks that comparing two fixed-width products agrees
// with comparing them in math/big (§6.2 step 2 and §6.4's beats), including
// products that pass 128 and 256 bits.
func TestWideCmpAgainstBig_6_2(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		jp, dq, jq, dp := random128(r), random128(r), random128(r), random128(r)
		if i%5 == 0 {
			// Equal products by construction, in either order of factors.
			jq, dp = dq, jp
		}
		l, rr := jp.Mul(dq), jq.Mul(dp)
		want := new(big.Int).Mul(jp.Big(), dq.Big()).Cmp(new(big.Int).Mul(jq.Big(), dp.Big()))
		if got := l.Cmp(rr); got != want {
			t.Fatalf("Cmp(%v×%v, %v×%v) = %d, want %d", jp, dq, jq, dp, got, want)
		}
		m1, m2 := uint64(1_000_000+r.Uint32()), uint64(1_000_000)
		want = new(big.Int).Mul(l.Big(), new(big.Int).SetUint64(m1)).Cmp(new(big.Int).Mul(rr.Big(), new(big.Int).SetUint64(m2)))
		if got := l.Mul64(m1).Cmp(rr.Mul64(m2)); got != want {
			t.Fatalf("Cmp(%v×%d, %v×%d) = %d, want %d", l.Big(), m1, rr.Big(), m2, got, want)
		}
	}
}

// TestMulMaxima_2: the largest operands fill all 256 and 320 bits exactly.
func TestMulMaxima_2(t *testing.T) {
	top := U128{Lo: 1<<64 - 1, Hi: 1<<64 - 1}
	p := top.Mul(top) // (2^128 − 1)^2 = 2^256 − 2^129 + 1
	want := U256{1, 0, 1<<64 - 2, 1<<64 - 1}
	if p != want {
		t.Fatalf("max × max = %x, want %x", p, want)
	}
	q := p.Mul64(1<<64 - 1)
	if q.Big().Cmp(new(big.Int).Mul(p.Big(), new(big.Int).SetUint64(1<<64-1))) != 0 {
		t.Fatalf("max² × max64 = %x", q)
	}
	if (U256{0, 0, 0, 1}).Cmp(U256{1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 0}) != 1 {
		t.Fatal("the top word must decide a U256 comparison")
	}
	if (U320{0, 0, 0, 0, 1}).Cmp(U320{1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 1<<64 - 1, 0}) != 1 {
		t.Fatal("the top word must decide a U320 comparison")
	}
}
