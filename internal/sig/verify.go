package sig

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// Step 6 of the strict rule, [S]B = R + [k]A, is checked by computing
// R' = [S]B − [k]A and comparing its canonical encoding with R's bytes, as
// crypto/ed25519 and circl do. A server verifies the same few keys (its
// hops') again and again, so each scalar is split into four 64-bit quarters,
// s = Σ s_i·2^(64i), and the four points [2^(64i)]A are computed once per
// key: the sum then needs 63 doublings where one 253-bit scalar needs 252,
// and the additions are about as many as before. All of it is group
// arithmetic on the whole curve, torsion and all, so R' is the same point,
// and the verdict the same, as the one-scalar way; verify_test checks both
// against circl.
//
// The arithmetic is that of RFC 8032 §5.1.4 for a = −1 over
// filippo.io/edwards25519's field: extended coordinates (X:Y:Z:T) with
// x = X/Z, y = Y/Z, xy = T/Z; "completed" ones, where x = X/Z and y = Y/T,
// which an addition or a doubling yields before its last multiplications;
// and each multiple in a table kept affine as (y+x, y−x, 2d·x·y).

// Widths of the signed-digit forms: digits are odd, below 2^(w−1) in size.
// The key's tables hold 4 multiples a quarter (1·P, 3·P, 5·P, 7·P), 1 920
// bytes a key; the base point's, made once, 32 a quarter.
const (
	keyWidth  = 4
	baseWidth = 7
	keyMults  = 1 << (keyWidth - 2)
	baseMults = 1 << (baseWidth - 2)
)

// niels is an affine point as (y+x, y−x, 2d·x·y).
type niels struct{ yPlusX, yMinusX, xy2d field.Element }

type (
	projective struct{ X, Y, Z field.Element }
	extended   struct{ X, Y, Z, T field.Element }
	completed  struct{ X, Y, Z, T field.Element }
)

// keyTable holds P, 3P, …, 7P for P = [2^(64i)]A, i = 0 … 3.
type keyTable [4][keyMults]niels

// baseTable is the same for the base point B, with wider digits.
type baseTable [4][baseMults]niels

var (
	curveD2 = func() *field.Element { // 2d, d = −121665/121666 (RFC 8032 §5.1)
		one := new(field.Element).One()
		num := new(field.Element).Mult32(one, 121665)
		num.Negate(num)
		den := new(field.Element).Mult32(one, 121666)
		d := new(field.Element).Multiply(num, den.Invert(den))
		return d.Add(d, d)
	}()
	baseTab = sync.OnceValue(func() *baseTable {
		var t baseTable
		fillTables([4][]niels{t[0][:], t[1][:], t[2][:], t[3][:]}, edwards25519.NewGeneratorPoint())
		return &t
	})
)

// fillTables fills rows[i] with the odd multiples of [2^(64i)]P.
func fillTables(rows [4][]niels, p *edwards25519.Point) {
	n := len(rows[0])
	pts := make([]edwards25519.Point, len(rows)*n)
	q := new(edwards25519.Point).Set(p)
	var twice edwards25519.Point
	for i := range rows {
		if i > 0 {
			for range 64 {
				q.Double(q)
			}
		}
		twice.Double(q)
		pts[i*n].Set(q)
		for m := 1; m < n; m++ {
			pts[i*n+m].Add(&pts[i*n+m-1], &twice)
		}
	}
	// One inversion for all the Z: inv_m = 1/Z_m from the running products.
	zs := make([]field.Element, len(pts))
	acc := new(field.Element).One()
	for m := range pts {
		_, _, z, _ := pts[m].ExtendedCoordinates()
		zs[m].Set(acc)
		acc.Multiply(acc, z)
	}
	acc.Invert(acc) // 1/(Z_0 … Z_last)
	var zinv, x, y field.Element
	for m := len(pts) - 1; m >= 0; m-- {
		X, Y, Z, _ := pts[m].ExtendedCoordinates()
		zinv.Multiply(acc, &zs[m]) // 1/Z_m
		acc.Multiply(acc, Z)       // 1/(Z_0 … Z_(m−1))
		x.Multiply(X, &zinv)
		y.Multiply(Y, &zinv)
		e := &rows[m/n][m%n]
		e.yPlusX.Add(&y, &x)
		e.yMinusX.Subtract(&y, &x)
		e.xy2d.Multiply(&x, &y)
		e.xy2d.Multiply(&e.xy2d, curveD2)
	}
}

// newKeyTable makes the tables of a key that decodes (step 1).
func newKeyTable(key PublicKey) *keyTable {
	a, err := new(edwards25519.Point).SetBytes(key[:])
	if err != nil {
		panic("sig: a key that passed step 1 does not decode: " + err.Error())
	}
	var t keyTable
	fillTables([4][]niels{t[0][:], t[1][:], t[2][:], t[3][:]}, a)
	return &t
}

// signedDigits writes s (32 bytes little-endian, below 2^253) in width-w
// signed digits: Σ out[j]·2^j = s, each digit zero or odd and of size below
// 2^(w−1), and after a nonzero digit the next w−1 are zero.
func signedDigits(out *[256]int8, s *[32]byte, w uint) {
	var k [5]uint64 // one word of headroom for the carry of a negative digit
	for i := range 4 {
		k[i] = binary.LittleEndian.Uint64(s[8*i:])
	}
	*out = [256]int8{}
	mask := uint64(1)<<w - 1
	for j := 0; k != [5]uint64{}; {
		if k[0]&1 == 0 {
			n := uint(63)
			if k[0] != 0 {
				n = uint(bits.TrailingZeros64(k[0]))
			}
			shiftRight(&k, n)
			j += int(n)
			continue
		}
		d := int64(k[0] & mask)
		if d >= 1<<(w-1) {
			d -= 1 << w
		}
		out[j] = int8(d)
		if d > 0 {
			subSmall(&k, uint64(d))
		} else {
			addSmall(&k, uint64(-d))
		}
		shiftRight(&k, w) // the low w bits are now zero
		j += int(w)
	}
}

func shiftRight(k *[5]uint64, n uint) {
	for i := range 4 {
		k[i] = k[i]>>n | k[i+1]<<(64-n)
	}
	k[4] >>= n
}

func subSmall(k *[5]uint64, d uint64) {
	var b uint64
	k[0], b = bits.Sub64(k[0], d, 0)
	for i := 1; i < 5 && b != 0; i++ {
		k[i], b = bits.Sub64(k[i], 0, b)
	}
}

func addSmall(k *[5]uint64, d uint64) {
	var c uint64
	k[0], c = bits.Add64(k[0], d, 0)
	for i := 1; i < 5 && c != 0; i++ {
		k[i], c = bits.Add64(k[i], 0, c)
	}
}

func (p *projective) fromCompleted(c *completed) {
	p.X.Multiply(&c.X, &c.T)
	p.Y.Multiply(&c.Y, &c.Z)
	p.Z.Multiply(&c.Z, &c.T)
}

func (e *extended) fromCompleted(c *completed) {
	e.X.Multiply(&c.X, &c.T)
	e.Y.Multiply(&c.Y, &c.Z)
	e.Z.Multiply(&c.Z, &c.T)
	e.T.Multiply(&c.X, &c.Y)
}

// double sets c = 2p: x = 2XY/(Y² − X²), y = (Y² + X²)/(2Z² − Y² + X²).
func (c *completed) double(p *projective) {
	var xx, yy, zz2, s field.Element
	xx.Square(&p.X)
	yy.Square(&p.Y)
	zz2.Square(&p.Z)
	zz2.Add(&zz2, &zz2)
	s.Add(&p.X, &p.Y)
	s.Square(&s)
	c.Y.Add(&yy, &xx)        // Y² + X²
	c.X.Subtract(&s, &c.Y)   // 2XY
	c.Z.Subtract(&yy, &xx)   // Y² − X²
	c.T.Subtract(&zz2, &c.Z) // 2Z² − Y² + X²
}

// add sets c = e + q, or e − q when neg: the addition law of RFC 8032
// §5.1.4 with q's affine coordinates, negating q by swapping y+x with y−x
// and negating 2d·x·y.
func (c *completed) add(e *extended, q *niels, neg bool) {
	pp, mm := &q.yPlusX, &q.yMinusX
	if neg {
		pp, mm = mm, pp
	}
	var a, b, t, z2 field.Element
	a.Subtract(&e.Y, &e.X)
	a.Multiply(&a, mm)
	b.Add(&e.Y, &e.X)
	b.Multiply(&b, pp)
	t.Multiply(&e.T, &q.xy2d)
	z2.Add(&e.Z, &e.Z)
	c.X.Subtract(&b, &a) // 2(X·y2 + Y·x2)
	c.Y.Add(&b, &a)      // 2(Y·y2 + X·x2)
	if neg {
		c.Z.Subtract(&z2, &t)
		c.T.Add(&z2, &t)
	} else {
		c.Z.Add(&z2, &t)
		c.T.Subtract(&z2, &t)
	}
}

// step adds the digit d of a multiple of the table's point, subtracting it
// instead when sub.
func (c *completed) step(e *extended, row []niels, d int8, sub bool) {
	e.fromCompleted(c)
	if d > 0 {
		c.add(e, &row[d/2], sub)
	} else {
		c.add(e, &row[-d/2], !sub)
	}
}

// combine returns the encoding of [s]B − [k]A, s and k in signed digits of
// baseWidth and keyWidth, A's multiples in kt.
func combine(s, k *[256]int8, kt *keyTable) [32]byte {
	bt := baseTab()
	top := 63
	for ; top >= 0; top-- {
		if s[top]|s[64+top]|s[128+top]|s[192+top]|k[top]|k[64+top]|k[128+top]|k[192+top] != 0 {
			break
		}
	}
	var p projective
	p.Y.One()
	p.Z.One()
	var c completed
	var e extended
	for j := top; j >= 0; j-- {
		c.double(&p)
		for i := range 4 {
			if d := s[64*i+j]; d != 0 {
				c.step(&e, bt[i][:], d, false)
			}
			if d := k[64*i+j]; d != 0 {
				c.step(&e, kt[i][:], d, true)
			}
		}
		p.fromCompleted(&c)
	}
	var zinv, x, y field.Element
	zinv.Invert(&p.Z)
	x.Multiply(&p.X, &zinv)
	y.Multiply(&p.Y, &zinv)
	var out [32]byte
	copy(out[:], y.Bytes())
	out[31] |= byte(x.IsNegative()) << 7
	return out
}

// keyState is what the key cache holds of a key: the outcome of steps 1
// and 2, and, from its second verification on, its tables (a key seen once
// is verified the one-scalar way, so that a stream of fresh keys costs no
// more than it did).
type keyState struct {
	err  error
	seen atomic.Bool
	tab  atomic.Pointer[keyTable]
}

// table returns the key's tables, made at its second verification, or nil.
func (k *keyState) table(key PublicKey) *keyTable {
	if t := k.tab.Load(); t != nil {
		return t
	}
	if !k.seen.Swap(true) {
		return nil
	}
	t := newKeyTable(key) // two callers at once may both make it: the same tables
	k.tab.Store(t)
	return t
}

// equation checks step 6 for a key that passed steps 1 and 2, with S below
// L (step 5): the encoding of [S]B − [k]A equals R, k = SHA-512(R ‖ A ‖ M)
// mod L.
func equation(key PublicKey, kt *keyTable, msg []byte, sig *Signature) bool {
	var sc, k edwards25519.Scalar
	if _, err := sc.SetCanonicalBytes(sig[32:]); err != nil {
		return false // S ≥ L: step 5
	}
	hs := getHasher()
	copy(hs.r[:], sig[:32])
	copy(hs.a[:], key[:])
	hs.sum(&k, hs.r[:], hs.a[:], msg)
	putHasher(hs)
	if kt == nil {
		a, err := new(edwards25519.Point).SetBytes(key[:])
		if err != nil {
			return false
		}
		a.Negate(a)
		r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(&k, a, &sc)
		return [32]byte(r.Bytes()) == [32]byte(sig[:32])
	}
	var sd, kd [256]int8
	sb, kb := [32]byte(sc.Bytes()), [32]byte(k.Bytes())
	signedDigits(&sd, &sb, baseWidth)
	signedDigits(&kd, &kb, keyWidth)
	return combine(&sd, &kd, kt) == [32]byte(sig[:32])
}
