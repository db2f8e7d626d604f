// Package sig signs and verifies the project's signed structures with Ed25519
// (RFC 8032) under the strict rule of COMPANION §2, and names the domain each
// structure is signed in.
//
// Strictness is pinned here, not left to a library: crypto/ed25519 and circl
// check S < L and the cofactorless equation (steps 5 and 6) but accept
// small-order keys and R values and cannot tell a bad key from a bad
// signature. Verify runs steps 1 and 2 on the key (bad_key), refuses a
// small-order R (step 4), and then checks S < L and the equation itself
// (verify.go), comparing the encoding of [S]B − [k]A with R's bytes: an R
// that does not decode canonically (step 3) can never equal that canonical
// encoding. A key verified before has tables of its multiples that halve the
// equation's cost; the tests check every verdict against circl's.
//
// Signing follows RFC 8032 §5.1.6 step by step over filippo.io/edwards25519
// (sign.go), the standard library's own group arithmetic published as a
// module: crypto/ed25519 encodes R twice a signature, and each encoding
// inverts a field element, a seventh of a signature's time, on the
// server's path that signs every decision. Signatures are deterministic,
// so the bytes are crypto/ed25519's and circl's; the tests check all three
// on the same keys and messages. The libraries hold a private key the same
// way, seed then public key; a PrivateKey keeps the seed's hash taken apart
// instead, made once.
package sig

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/waisteer/waisteer/internal/reason"
)

// Sizes of the fixed-length values.
const (
	PublicKeySize = 32
	SignatureSize = 64
	HashSize      = 32
	SeedSize      = 32
)

// Hash is a SHA-256 digest.
type Hash [HashSize]byte

// PublicKey is an Ed25519 public key as it appears on the wire.
type PublicKey [PublicKeySize]byte

// Signature is an Ed25519 signature R ‖ S.
type Signature [SignatureSize]byte

func (h Hash) String() string      { return hex.EncodeToString(h[:]) }
func (k PublicKey) String() string { return hex.EncodeToString(k[:]) }
func (s Signature) String() string { return hex.EncodeToString(s[:]) }

// Domain is the string a structure is signed under (COMPANION §2).
type Domain string

// The domains of COMPANION §2.
const (
	DomainPolicy   Domain = "wai:steering-policy"
	DomainDecision Domain = "wai:steering-decision"
	DomainRecord   Domain = "wai:hop-record"
	DomainRoom     Domain = "wai:room-descriptor"
	DomainKeyLog   Domain = "wai:key-log-head"
	// DomainDraw is not a signature domain: it separates the draw's hash
	// (extension §6.3).
	DomainDraw Domain = "wai:steering-draw"
)

// Message returns the bytes a structure's signature covers: the domain, the
// byte 0x01, then body.
func Message(d Domain, body []byte) []byte {
	m := make([]byte, 0, len(d)+1+len(body))
	m = append(m, d...)
	m = append(m, 1)
	return append(m, body...)
}

// Digest is SHA-256 over b.
func Digest(b []byte) Hash { return sha256.Sum256(b) }

// PrivateKey signs. It is made from a 32-byte seed (RFC 8032 §5.1.5).
type PrivateKey struct {
	x *expandedKey // the seed and its hash, taken apart (sign.go); nil: no key
}

// NewPrivateKey returns the key of a 32-byte seed.
func NewPrivateKey(seed [SeedSize]byte) PrivateKey {
	return PrivateKey{x: expand(seed)}
}

// GenerateKey makes a key from rand (crypto/rand when nil).
func GenerateKey(r io.Reader) (PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	var seed [SeedSize]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return PrivateKey{}, err
	}
	return NewPrivateKey(seed), nil
}

// Public is the key's public half.
func (p PrivateKey) Public() PublicKey { return p.x.public }

// Seed is the key's 32-byte seed.
func (p PrivateKey) Seed() [SeedSize]byte { return p.x.seed }

// IsZero reports whether p holds no key.
func (p PrivateKey) IsZero() bool { return p.x == nil }

// SignRaw signs msg as it is. It panics on the zero PrivateKey.
func (p PrivateKey) SignRaw(msg []byte) Signature {
	if p.x == nil {
		panic("sig: signing with no key")
	}
	return p.x.sign(msg)
}

// Sign signs body under domain d (COMPANION §2).
func (p PrivateKey) Sign(d Domain, body []byte) Signature {
	return p.SignRaw(Message(d, body))
}

// Verify checks sig by key over body under domain d by the strict rule.
func Verify(key PublicKey, d Domain, body []byte, sig Signature) error {
	return VerifyRaw(key, Message(d, body), sig)
}

// VerifyRaw checks sig by key over msg by the six steps of COMPANION §2,
// returning bad_key or bad_signature.
func VerifyRaw(key PublicKey, msg []byte, sig Signature) error {
	ks, err := keyStateOf(key)
	if err != nil {
		return err
	}
	if smallOrder[[32]byte(sig[:32])] { // step 4
		return reason.New(reason.BadSignature, "R is a point of small order")
	}
	var kt *keyTable
	if ks != nil {
		kt = ks.table(key)
	}
	if !equation(key, kt, msg, &sig) { // steps 3, 5 and 6
		return reason.New(reason.BadSignature, "signature does not verify")
	}
	return nil
}

// CheckKey runs steps 1 and 2 of COMPANION §2 on key.
func CheckKey(key PublicKey) error {
	_, err := keyStateOf(key)
	return err
}

// keyStateOf runs steps 1 and 2 on key, or finds their outcome in the
// cache. The state is nil when the key is not cached: the cache is full.
func keyStateOf(key PublicKey) (*keyState, error) {
	if v, ok := keyCache.Load(key); ok {
		ks := v.(*keyState)
		return ks, ks.err
	}
	err := checkKey(key)
	if keyCacheSize.Add(1) > keyCacheMax {
		return nil, err
	}
	v, _ := keyCache.LoadOrStore(key, &keyState{err: err})
	return v.(*keyState), err
}

// The outcome of steps 1 and 2 depends on the key alone, and a server sees
// the same few keys (hops, signers) again and again. The cache is bounded so
// that a stream of fresh keys cannot grow it: at most keyCacheMax keys, each
// with its tables once verified twice (about 2 KiB), 32 MiB in all.
var (
	keyCache     sync.Map
	keyCacheSize atomic.Int64
)

const keyCacheMax = 1 << 14

var (
	fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// d = -121665/121666 mod p
	curveD = func() *big.Int {
		inv := new(big.Int).ModInverse(big.NewInt(121666), fieldP)
		d := new(big.Int).Mul(big.NewInt(-121665), inv)
		return d.Mod(d, fieldP)
	}()
)

// decodes reports whether enc is a canonical encoding of a curve point
// (step 1): y < p, x² = (y² − 1)/(d·y² + 1) has a root, and x = 0 does not
// come with the sign bit set.
func decodes(enc [32]byte) bool {
	var le [32]byte
	for i := range enc {
		le[31-i] = enc[i]
	}
	sign := le[0]&0x80 != 0
	le[0] &= 0x7f
	y := new(big.Int).SetBytes(le[:])
	if y.Cmp(fieldP) >= 0 {
		return false
	}
	y2 := new(big.Int).Mul(y, y)
	y2.Mod(y2, fieldP)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	u.Mod(u, fieldP)
	if u.Sign() == 0 { // x = 0
		return !sign
	}
	v := new(big.Int).Mul(curveD, y2)
	v.Add(v, big.NewInt(1))
	v.Mod(v, fieldP)
	// v is never 0: −1/d is not a square mod p.
	x2 := new(big.Int).ModInverse(v, fieldP)
	x2.Mul(x2, u)
	x2.Mod(x2, fieldP)
	return big.Jacobi(x2, fieldP) == 1
}

func checkKey(key PublicKey) error {
	if !decodes(key) {
		return reason.New(reason.BadKey, "key %s does not decode to a curve point", key)
	}
	if smallOrder[key] {
		return reason.New(reason.BadKey, "key %s is a point of small order", key)
	}
	return nil
}

// smallOrder holds the canonical encodings of the eight points of order
// dividing 8. Steps 1 and 3 admit only canonical encodings, and x = 0 with
// the sign bit set is refused there, so a point that passes them is of small
// order exactly when its encoding is one of these (sig_test recomputes [8]P
// for each).
var smallOrder = func() map[[32]byte]bool {
	m := make(map[[32]byte]bool)
	for _, h := range []string{
		"0100000000000000000000000000000000000000000000000000000000000000", // identity
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
		"0000000000000000000000000000000000000000000000000000000000000000", // order 4
		"0000000000000000000000000000000000000000000000000000000000000080", // order 4
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8
	} {
		var k [32]byte
		hex.Decode(k[:], []byte(h))
		m[k] = true
	}
	return m
}()

// ParsePublicKey reads 64 hexadecimal digits.
func ParsePublicKey(s string) (PublicKey, error) {
	var k PublicKey
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != PublicKeySize {
		return k, fmt.Errorf("a public key is 64 hexadecimal digits, not %q", s)
	}
	copy(k[:], b)
	return k, nil
}

// ParseHash reads 64 hexadecimal digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != HashSize {
		return h, fmt.Errorf("a digest is 64 hexadecimal digits, not %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// MarshalPrivateKey writes a private key file: the seed as 64 lowercase
// hexadecimal digits and a newline.
func MarshalPrivateKey(p PrivateKey) []byte {
	s := p.Seed()
	return []byte(hex.EncodeToString(s[:]) + "\n")
}

// ParsePrivateKey reads what MarshalPrivateKey writes.
func ParsePrivateKey(b []byte) (PrivateKey, error) {
	s := strings.TrimSpace(string(b))
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != SeedSize {
		return PrivateKey{}, errors.New("a private key file holds a 32-byte seed as 64 hexadecimal digits")
	}
	var seed [SeedSize]byte
	copy(seed[:], raw)
	return NewPrivateKey(seed), nil
}
