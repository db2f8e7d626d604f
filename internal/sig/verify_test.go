package sig

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
	"github.com/cloudflare/circl/sign/ed25519"

	"github.com/waisteer/waisteer/internal/reason"
)

// TestCurveD2 checks 2d against the decimal value of d in RFC 8032 §5.1.
func TestCurveD2(t *testing.T) {
	d, _ := new(big.Int).SetString("37095705934669439343138083508754565189542113879843219016388785533085940283555", 10)
	want := new(big.Int).Lsh(d, 1)
	want.Mod(want, fieldP)
	if got := leInt(curveD2.Bytes()); got.Cmp(want) != 0 {
		t.Fatalf("2d = %v, want %v", got, want)
	}
}

func leInt(b []byte) *big.Int {
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(be)
}

// TestSignedDigits rebuilds each scalar from its digits in math/big and
// checks the form's rules: each digit zero or odd and below 2^(w−1) in
// size, w−1 zeros after each nonzero one.
func TestSignedDigits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 252), mustInt("27742317777372353535851937790883648493"))
	edges := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(7), big.NewInt(8), big.NewInt(127),
		new(big.Int).Sub(l, big.NewInt(1)), new(big.Int).Lsh(big.NewInt(1), 252),
		new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 253), big.NewInt(1)),
		new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1))}
	for range 2000 {
		var b [32]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[31] &= 0x1f // below 2^253
		edges = append(edges, leInt(b[:]))
	}
	for _, w := range []uint{keyWidth, baseWidth} {
		for _, v := range edges {
			var s [32]byte
			v.FillBytes(s[:])
			for i, j := 0, 31; i < j; i, j = i+1, j-1 {
				s[i], s[j] = s[j], s[i]
			}
			var out [256]int8
			signedDigits(&out, &s, w)
			sum := new(big.Int)
			for j := 255; j >= 0; j-- {
				sum.Lsh(sum, 1)
				sum.Add(sum, big.NewInt(int64(out[j])))
				if d := out[j]; d != 0 {
					if d%2 == 0 || d >= 1<<(w-1) || d <= -(1<<(w-1)) {
						t.Fatalf("w %d, %v: digit %d at %d", w, v, d, j)
					}
					for z := j + 1; z < j+int(w) && z < 256; z++ {
						if out[z] != 0 {
							t.Fatalf("w %d, %v: digits at %d and %d", w, v, j, z)
						}
					}
				}
			}
			if sum.Cmp(v) != 0 {
				t.Fatalf("w %d: digits of %v sum to %v", w, v, sum)
			}
		}
	}
}

func mustInt(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return v
}

// torsion returns the points of order 8, from the small-order table.
func torsion(t testing.TB) []*edwards25519.Point {
	var out []*edwards25519.Point
	for enc := range smallOrder {
		p, err := new(edwards25519.Point).SetBytes(enc[:])
		if err != nil {
			t.Fatal(err)
		}
		if new(edwards25519.Point).Double(new(edwards25519.Point).Double(p)).Equal(edwards25519.NewIdentityPoint()) == 0 {
			out = append(out, p) // [4]P is not the identity: order 8
		}
	}
	if len(out) != 4 {
		t.Fatalf("%d points of order 8", len(out))
	}
	return out
}

func randScalar(rng *rand.ChaCha8) *edwards25519.Scalar {
	var b [64]byte
	rng.Read(b[:])
	s, _ := new(edwards25519.Scalar).SetUniformBytes(b[:])
	return s
}

// TestCombine checks [s]B − [k]A through the tables against the same sum
// by filippo.io/edwards25519's constant-time ScalarMult, for keys of prime
// order and keys with a torsion part, and against a math/big
// double-and-add for a few.
func TestCombine(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{3})
	tor := torsion(t)
	for n := range 300 {
		a := new(edwards25519.Point).ScalarBaseMult(randScalar(rng))
		if n%2 == 1 {
			a.Add(a, tor[n%4])
		}
		s, k := randScalar(rng), randScalar(rng)
		if n == 0 {
			s = edwards25519.NewScalar()
		}
		want := new(edwards25519.Point).ScalarBaseMult(s)
		want.Subtract(want, new(edwards25519.Point).ScalarMult(k, a))
		var sd, kd [256]int8
		sb, kb := [32]byte(s.Bytes()), [32]byte(k.Bytes())
		signedDigits(&sd, &sb, baseWidth)
		signedDigits(&kd, &kb, keyWidth)
		got := combine(&sd, &kd, newKeyTable(PublicKey(a.Bytes())))
		if got != [32]byte(want.Bytes()) {
			t.Fatalf("case %d: %x, want %x", n, got, want.Bytes())
		}
		if n < 3 {
			if ref := bigCombine(t, sb, kb, PublicKey(a.Bytes())); ref != got {
				t.Fatalf("case %d: %x, math/big's %x", n, got, ref)
			}
		}
	}
}

// bigCombine is [s]B − [k]A by double-and-add in math/big (sig_test's point).
func bigCombine(t *testing.T, s, k [32]byte, a PublicKey) [32]byte {
	bEnc := [32]byte(edwards25519.NewGeneratorPoint().Bytes())
	mul := func(e [32]byte, p point) point {
		acc := point{big.NewInt(0), big.NewInt(1)}
		for i := 255; i >= 0; i-- {
			acc = acc.add(acc)
			if e[i/8]>>(i%8)&1 == 1 {
				acc = acc.add(p)
			}
		}
		return acc
	}
	sb := mul(s, decodePoint(t, bEnc))
	ka := mul(k, decodePoint(t, a))
	ka.x.Sub(fieldP, ka.x)
	ka.x.Mod(ka.x, fieldP)
	r := sb.add(ka)
	var out [32]byte
	r.y.FillBytes(out[:])
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	out[31] |= byte(r.x.Bit(0)) << 7
	return out
}

// reference is the strict rule with steps 3, 5 and 6 left to circl, as sig
// verified before its tables: steps 1 and 2 on the key, 4 on R.
func reference(key PublicKey, msg []byte, s Signature) reason.Code {
	if err := checkKey(key); err != nil {
		return reason.Of(err)
	}
	if smallOrder[[32]byte(s[:32])] || !ed25519.Verify(key[:], msg, s[:]) {
		return reason.BadSignature
	}
	return ""
}

// signWith signs msg with the scalar a for the key enc, R = [r]B + rt:
// RFC 8032 §5.1.6 with its parts chosen, to make signatures whose key or R
// has a torsion part.
func signWith(a, r *edwards25519.Scalar, rt *edwards25519.Point, enc PublicKey, msg []byte) Signature {
	R := new(edwards25519.Point).ScalarBaseMult(r)
	if rt != nil {
		R.Add(R, rt)
	}
	h := sha512.New()
	h.Write(R.Bytes())
	h.Write(enc[:])
	h.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	S := new(edwards25519.Scalar).MultiplyAdd(k, a, r)
	var out Signature
	copy(out[:32], R.Bytes())
	copy(out[32:], S.Bytes())
	return out
}

// verdicts checks one case every way sig verifies: the one-scalar way, the
// tables', and VerifyRaw three times (a fresh key's first verification, its
// second, which makes the tables, and a later one), each against reference.
func verdicts(t testing.TB, key PublicKey, msg []byte, s Signature) reason.Code {
	want := reference(key, msg, s)
	if want != reason.BadKey {
		got := func(kt *keyTable) reason.Code {
			if smallOrder[[32]byte(s[:32])] || !equation(key, kt, msg, &s) {
				return reason.BadSignature
			}
			return ""
		}
		if g := got(nil); g != want {
			t.Fatalf("key %s sig %s: one scalar %q, circl %q", key, s, g, want)
		}
		if g := got(newKeyTable(key)); g != want {
			t.Fatalf("key %s sig %s: tables %q, circl %q", key, s, g, want)
		}
	}
	for i := range 3 {
		if g := reason.Of(VerifyRaw(key, msg, s)); g != want {
			t.Fatalf("key %s sig %s: VerifyRaw's %d %q, circl %q", key, s, i+1, g, want)
		}
	}
	return want
}

// TestVerifyMatchesCircl compares the verdicts with circl's on honest
// signatures, altered ones, and signatures by keys or with R of mixed order,
// of which the cofactorless equation holds for some: [S]B − [k]A = R − [k]T
// for a key A = [a]B + T, T of order 8, so exactly when 8 divides k.
func TestVerifyMatchesCircl(t *testing.T) {
	src := rand.NewChaCha8([32]byte{4})
	rng := rand.New(src)
	tor := torsion(t)
	count := map[string]int{}
	for n := range 400 {
		a := randScalar(src)
		A := new(edwards25519.Point).ScalarBaseMult(a)
		kind := "honest"
		var rt *edwards25519.Point
		switch n % 4 {
		case 1:
			A.Add(A, tor[n/4%4])
			kind = "mixed key"
		case 2:
			rt = tor[n/4%4]
			kind = "mixed R"
		case 3:
			A.Add(A, tor[n/4%4])
			rt = tor[(n/4+1)%4]
			kind = "mixed both"
		}
		key := PublicKey(A.Bytes())
		msg := make([]byte, n%300)
		src.Read(msg)
		s := signWith(a, randScalar(src), rt, key, msg)
		v := verdicts(t, key, msg, s)
		count[fmt.Sprintf("%s %q", kind, v)]++
		alt := s
		alt[rng.IntN(64)] ^= 1 << rng.IntN(8)
		verdicts(t, key, msg, alt)
		if len(msg) > 0 {
			m2 := append([]byte(nil), msg...)
			m2[0] ^= 1
			verdicts(t, key, m2, s)
		}
		// S + L, when it fits: the same point, refused by step 5.
		sl := new(big.Int).Add(leInt(s[32:]), mustInt("7237005577332262213973186563042994240857116359379907606001950938285454250989"))
		if sl.BitLen() <= 256 {
			hi := s
			b := sl.FillBytes(make([]byte, 32))
			for i := range 32 {
				hi[32+i] = b[31-i]
			}
			if verdicts(t, key, msg, hi) != reason.BadSignature {
				t.Fatalf("S + L accepted")
			}
		}
	}
	// Every kind both verifies and fails: the differences are exercised.
	for _, kind := range []string{"mixed key", "mixed both"} {
		if count[kind+` ""`] == 0 || count[kind+` "bad_signature"`] == 0 {
			t.Errorf("%s: %v", kind, count)
		}
	}
	if count[`honest ""`] != 100 || count[`mixed R "bad_signature"`] != 100 {
		t.Errorf("verdicts %v", count)
	}
}

// FuzzVerify compares VerifyRaw's verdicts, both ways, with circl's.
func FuzzVerify(f *testing.F) {
	k := NewPrivateKey([SeedSize]byte{5})
	msg := []byte("wai")
	s := k.SignRaw(msg)
	pub := k.Public()
	f.Add(pub[:], msg, s[:])
	mixed, _ := hex.DecodeString("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")
	f.Add(mixed, msg, s[:])
	f.Fuzz(func(t *testing.T, key, msg, s []byte) {
		if len(key) != PublicKeySize || len(s) != SignatureSize {
			return
		}
		verdicts(t, PublicKey(key), msg, Signature(s))
	})
}

// FuzzVerifyMixed builds the signature from its parts, as
// TestVerifyMatchesCircl does, and alters one bit of it or of the message.
func FuzzVerifyMixed(f *testing.F) {
	f.Add([]byte("secret scalar"), []byte("nonce"), uint8(0), uint8(0), []byte("wai"), uint16(0))
	f.Add([]byte("secret scalar"), []byte("nonce"), uint8(1), uint8(0), []byte("wai"), uint16(0))
	f.Add([]byte("secret scalar"), []byte("nonce"), uint8(2), uint8(3), []byte("wai"), uint16(17))
	f.Fuzz(func(t *testing.T, aSeed, rSeed []byte, keyTor, rTor uint8, msg []byte, flip uint16) {
		tor := torsion(t)
		scalar := func(b []byte) *edwards25519.Scalar {
			h := sha512.Sum512(b)
			s, _ := new(edwards25519.Scalar).SetUniformBytes(h[:])
			return s
		}
		a, r := scalar(aSeed), scalar(rSeed)
		A := new(edwards25519.Point).ScalarBaseMult(a)
		if keyTor%5 != 0 {
			A.Add(A, tor[keyTor%5-1])
		}
		var rt *edwards25519.Point
		if rTor%5 != 0 {
			rt = tor[rTor%5-1]
		}
		key := PublicKey(A.Bytes())
		s := signWith(a, r, rt, key, msg)
		switch bit := int(flip) - 1; {
		case bit < 0:
		case bit < 512:
			s[bit/8] ^= 1 << (bit % 8)
		case len(msg) > 0:
			msg[(bit-512)/8%len(msg)] ^= 1 << (bit % 8)
		}
		verdicts(t, key, msg, s)
	})
}

// TestVerifyConcurrent verifies a fresh key from several goroutines at once,
// which make its tables at the same time (run under -race).
func TestVerifyConcurrent(t *testing.T) {
	k := NewPrivateKey([SeedSize]byte{6, 6})
	msg := []byte("concurrent")
	s := k.SignRaw(msg)
	bad := s
	bad[40] ^= 1
	done := make(chan error, 8)
	for range 8 {
		go func() {
			for range 5 {
				if err := VerifyRaw(k.Public(), msg, s); err != nil {
					done <- err
					return
				}
				if reason.Of(VerifyRaw(k.Public(), msg, bad)) != reason.BadSignature {
					done <- fmt.Errorf("altered signature accepted")
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkKeyTable is what a key's second verification costs beyond the
// others: its tables.
func BenchmarkKeyTable(b *testing.B) {
	pub := NewPrivateKey([SeedSize]byte{9}).Public()
	b.ReportAllocs()
	for b.Loop() {
		newKeyTable(pub)
	}
}
