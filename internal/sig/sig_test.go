package sig

import (
	"bytes"
	stded25519 "crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/cloudflare/circl/sign/ed25519"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/shared"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStrictExpected runs every case of shared/testdata/ed25519 with the
// outcome COMPANION §2's strict rule gives it.
func TestStrictExpected(t *testing.T) {
	raw, err := os.ReadFile(shared.Path(t, "testdata", "ed25519", "strict-expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Source string `json:"source"`
		ID     int    `json:"id"`
		Msg    string `json:"msg"`
		Pub    string `json:"pub"`
		Sig    string `json:"sig"`
		Expect string `json:"expect"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 163 {
		t.Fatalf("%d cases, want 163", len(cases))
	}
	counts := map[string]int{}
	for _, c := range cases {
		pub, s, msg := unhex(t, c.Pub), unhex(t, c.Sig), unhex(t, c.Msg)
		got := "ok"
		switch {
		case len(pub) != PublicKeySize:
			got = string(reason.BadKey)
		case len(s) != SignatureSize:
			if err := CheckKey(PublicKey(pub)); err != nil {
				got = string(reason.Of(err))
			} else {
				got = string(reason.BadSignature)
			}
		default:
			if err := VerifyRaw(PublicKey(pub), msg, Signature(s)); err != nil {
				got = string(reason.Of(err))
			}
		}
		if got != c.Expect {
			t.Errorf("%s %d: got %s, want %s", c.Source, c.ID, got, c.Expect)
		}
		counts[c.Expect]++
	}
	if counts["bad_key"] == 0 || counts["ok"] == 0 || counts["bad_signature"] == 0 {
		t.Errorf("suite lacks an outcome: %v", counts)
	}
}

// TestRFC8032 signs and verifies RFC 8032 §7.1 TEST 1 to 3 and TEST SHA(abc).
func TestRFC8032(t *testing.T) {
	for _, v := range []struct{ seed, pub, msg, sig string }{
		{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
		{"833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
			"ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
			"ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
			"dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"},
	} {
		var seed [SeedSize]byte
		copy(seed[:], unhex(t, v.seed))
		k := NewPrivateKey(seed)
		if got := k.Public().String(); got != v.pub {
			t.Errorf("public key %s, want %s", got, v.pub)
		}
		msg := unhex(t, v.msg)
		s := k.SignRaw(msg)
		if got := s.String(); got != v.sig {
			t.Errorf("signature %s, want %s", got, v.sig)
		}
		if err := VerifyRaw(k.Public(), msg, s); err != nil {
			t.Errorf("verify: %v", err)
		}
		s[0] ^= 1
		if reason.Of(VerifyRaw(k.Public(), msg, s)) != reason.BadSignature {
			t.Errorf("a changed signature verified")
		}
	}
}

// TestSignMatchesLibraries: RFC 8032 §5.1.6 makes a signature a function of
// the key and the message, so SignRaw (sign.go) must give the bytes of both
// crypto/ed25519 and circl for every key and length, and both must accept
// them.
func TestSignMatchesLibraries(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		var seed [SeedSize]byte
		for j := range seed {
			seed[j] = byte(r.Uint32())
		}
		msg := make([]byte, i*61)
		for j := range msg {
			msg[j] = byte(r.Uint32())
		}
		signMatches(t, seed, msg)
	}
}

// signMatches checks SignRaw against crypto/ed25519 and circl for one seed
// and message.
func signMatches(t *testing.T, seed [SeedSize]byte, msg []byte) {
	t.Helper()
	k := NewPrivateKey(seed)
	got := k.SignRaw(msg)
	if want := stded25519.Sign(stded25519.NewKeyFromSeed(seed[:]), msg); !bytes.Equal(got[:], want) {
		t.Fatalf("seed %x, %d bytes: signature %s, crypto/ed25519's %x", seed, len(msg), got, want)
	}
	if want := ed25519.Sign(ed25519.NewKeyFromSeed(seed[:]), msg); !bytes.Equal(got[:], want) {
		t.Fatalf("seed %x, %d bytes: signature %s, circl's %x", seed, len(msg), got, want)
	}
	pub := k.Public()
	if !ed25519.Verify(pub[:], msg, got[:]) || !stded25519.Verify(pub[:], msg, got[:]) {
		t.Fatalf("a library refuses the signature of seed %x", seed)
	}
}

// FuzzSignMatches is TestSignMatchesLibraries on the fuzzer's seeds and
// messages.
func FuzzSignMatches(f *testing.F) {
	f.Add(make([]byte, SeedSize), []byte{})
	f.Add(bytes.Repeat([]byte{0xff}, SeedSize), bytes.Repeat([]byte("wai"), 500))
	f.Fuzz(func(t *testing.T, s, msg []byte) {
		var seed [SeedSize]byte
		copy(seed[:], s)
		signMatches(t, seed, msg)
	})
}

// TestSignAllocates: a signature allocates nothing (sign.go's hashers), on
// the server's path that signs every decision.
func TestSignAllocates(t *testing.T) {
	k := NewPrivateKey([SeedSize]byte{3})
	msg := make([]byte, 1302)
	k.SignRaw(msg) // the list's first hasher
	if n := testing.AllocsPerRun(100, func() { k.SignRaw(msg) }); n != 0 {
		t.Errorf("SignRaw allocates %v times a signature, want 0", n)
	}
}

// TestSignConcurrent: keys signing on many goroutines at once, each with
// hashers another signature used before, give crypto/ed25519's bytes.
func TestSignConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			seed := [SeedSize]byte{byte(g)}
			k, sk := NewPrivateKey(seed), stded25519.NewKeyFromSeed(seed[:])
			for i := range 100 {
				msg := bytes.Repeat([]byte{byte(i)}, 100+i*13)
				if got := k.SignRaw(msg); !bytes.Equal(got[:], stded25519.Sign(sk, msg)) {
					errs <- fmt.Errorf("goroutine %d, message %d: signature %s differs from crypto/ed25519's", g, i, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSignZeroKey: the zero PrivateKey does not sign.
func TestSignZeroKey(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("the zero key signed")
		}
	}()
	PrivateKey{}.SignRaw([]byte("m"))
}

// TestDomainSeparation: a signature under one domain of COMPANION §2 does not
// verify under another, and Message lays out domain ‖ 0x01 ‖ body.
func TestDomainSeparation(t *testing.T) {
	k := NewPrivateKey([SeedSize]byte{7})
	body := []byte("body")
	s := k.Sign(DomainPolicy, body)
	if err := Verify(k.Public(), DomainPolicy, body, s); err != nil {
		t.Fatal(err)
	}
	if reason.Of(Verify(k.Public(), DomainDecision, body, s)) != reason.BadSignature {
		t.Error("a policy signature verified as a decision's")
	}
	if got := string(Message(DomainPolicy, body)); got != "wai:steering-policy\x01body" {
		t.Errorf("message %q", got)
	}
	if len(DomainPolicy)+1 != 20 || len(DomainDecision)+1 != 22 {
		t.Error("domain lengths differ from extension §3.4 and §7.3")
	}
}

// edwards point arithmetic in math/big, for checking the small-order table.
type point struct{ x, y *big.Int }

func (p point) add(q point) point {
	m := func(a, b *big.Int) *big.Int { r := new(big.Int).Mul(a, b); return r.Mod(r, fieldP) }
	x1y2, y1x2 := m(p.x, q.y), m(p.y, q.x)
	y1y2, x1x2 := m(p.y, q.y), m(p.x, q.x)
	dxy := m(curveD, m(x1x2, y1y2))
	one := big.NewInt(1)
	xn := new(big.Int).Add(x1y2, y1x2)
	xd := new(big.Int).Add(one, dxy)
	yn := new(big.Int).Add(y1y2, x1x2)
	yd := new(big.Int).Sub(one, dxy)
	xd.Mod(xd, fieldP)
	yd.Mod(yd, fieldP)
	return point{m(xn, new(big.Int).ModInverse(xd, fieldP)), m(yn, new(big.Int).ModInverse(yd, fieldP))}
}

func decodePoint(t *testing.T, enc [32]byte) point {
	var le [32]byte
	for i := range enc {
		le[31-i] = enc[i]
	}
	sign := le[0] >> 7
	le[0] &= 0x7f
	y := new(big.Int).SetBytes(le[:])
	y2 := new(big.Int).Mul(y, y)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	v := new(big.Int).Mul(curveD, y2)
	v.Add(v, big.NewInt(1))
	x2 := new(big.Int).Mul(u, new(big.Int).ModInverse(v.Mod(v, fieldP), fieldP))
	x := new(big.Int).ModSqrt(x2.Mod(x2, fieldP), fieldP)
	if x == nil {
		t.Fatalf("%x does not decode", enc)
	}
	if uint(x.Bit(0)) != uint(sign) {
		x.Sub(fieldP, x)
		x.Mod(x, fieldP)
	}
	return point{x, y}
}

// TestSmallOrderTable recomputes [8]P for each entry of the table: each
// decodes canonically, is of small order, and the eight are distinct points,
// which is all the torsion subgroup has.
func TestSmallOrderTable(t *testing.T) {
	if len(smallOrder) != 8 {
		t.Fatalf("%d entries", len(smallOrder))
	}
	seen := map[string]bool{}
	for enc := range smallOrder {
		if !decodes(enc) {
			t.Errorf("%x: not canonical", enc)
			continue
		}
		p := decodePoint(t, enc)
		q := p
		for range 3 {
			q = q.add(q)
		}
		if q.x.Sign() != 0 || q.y.Cmp(big.NewInt(1)) != 0 {
			t.Errorf("%x: [8]P is not the identity", enc)
		}
		seen[p.x.String()+","+p.y.String()] = true
	}
	if len(seen) != 8 {
		t.Errorf("%d distinct points", len(seen))
	}
	// A generic key is not in the table and passes.
	if err := CheckKey(NewPrivateKey([SeedSize]byte{1}).Public()); err != nil {
		t.Error(err)
	}
}

// TestNonCanonicalKey: y ≥ p is bad_key (step 1), even where y − p would be
// a point.
func TestNonCanonicalKey(t *testing.T) {
	// y = p + 1 ≡ 1: the identity, written non-canonically.
	k, _ := ParsePublicKey("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
	if reason.Of(CheckKey(k)) != reason.BadKey {
		t.Error("non-canonical key accepted")
	}
	// x = 0 with the sign bit set.
	k, _ = ParsePublicKey("0100000000000000000000000000000000000000000000000000000000000080")
	if reason.Of(CheckKey(k)) != reason.BadKey {
		t.Error("-0 key accepted")
	}
}

func TestPrivateKeyFile(t *testing.T) {
	k := NewPrivateKey([SeedSize]byte{3, 4})
	back, err := ParsePrivateKey(MarshalPrivateKey(k))
	if err != nil || back.Public() != k.Public() {
		t.Fatal("private key file does not round-trip", err)
	}
	if _, err := ParsePrivateKey([]byte("zz")); err == nil {
		t.Error("garbage read as a key")
	}
}

var benchSink error

// BenchmarkVerify compares the strict rule, on a key it has verified before
// (with its tables) and the one-scalar way it verifies a key seen once, with
// circl's own Verify and crypto/ed25519's on the same message (issue 2;
// issue 30: a record's check is mostly its signature's).
func BenchmarkVerify(b *testing.B) {
	k := NewPrivateKey([SeedSize]byte{9})
	msg := make([]byte, 400)
	s := k.SignRaw(msg)
	pub := k.Public()
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = VerifyRaw(pub, msg, s)
		}
	})
	b.Run("strict-one-scalar", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !equation(pub, nil, msg, &s) {
				b.Fatal("no")
			}
		}
	})
	b.Run("crypto-ed25519", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !stded25519.Verify(pub[:], msg, s[:]) {
				b.Fatal("no")
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !ed25519.Verify(pub[:], msg, s[:]) {
				b.Fatal("no")
			}
		}
	})
	b.Run("strict-uncached-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = checkKey(pub)
		}
	})
}

var signSink byte

// BenchmarkSign compares SignRaw with crypto/ed25519's and circl's Sign on
// messages of a decision's sizes for 3 and 32 pathways (waisteer bench):
// the reason SignRaw goes through neither.
func BenchmarkSign(b *testing.B) {
	seed := [SeedSize]byte{9}
	k, ck, sk := NewPrivateKey(seed), ed25519.NewKeyFromSeed(seed[:]), stded25519.NewKeyFromSeed(seed[:])
	for _, n := range []int{1302, 11771} {
		msg := make([]byte, n)
		b.Run(fmt.Sprintf("SignRaw/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := k.SignRaw(msg)
				signSink = s[0]
			}
		})
		b.Run(fmt.Sprintf("crypto-ed25519/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				signSink = stded25519.Sign(sk, msg)[0]
			}
		})
		b.Run(fmt.Sprintf("circl/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				signSink = ed25519.Sign(ck, msg)[0]
			}
		})
	}
}
