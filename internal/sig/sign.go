package sig

import (
	"crypto/sha512"
	"hash"
	"sync"

	"filippo.io/edwards25519"
)

// An expandedKey is a private key as RFC 8032 §5.1.5 takes its seed apart:
// the secret scalar s (the hash's first half, pruned), the prefix that
// makes a signature's r (its second half), and the public key A = [s]B;
// and the seed itself, which a key file keeps.
type expandedKey struct {
	seed   [SeedSize]byte
	s      edwards25519.Scalar
	prefix [32]byte
	public PublicKey
}

// expand takes seed apart once, rather than at every signature.
func expand(seed [SeedSize]byte) *expandedKey {
	h := sha512.Sum512(seed[:])
	x := &expandedKey{seed: seed}
	if _, err := x.s.SetBytesWithClamping(h[:32]); err != nil {
		panic("sig: a 32-byte half does not make a scalar: " + err.Error())
	}
	copy(x.prefix[:], h[32:])
	copy(x.public[:], new(edwards25519.Point).ScalarBaseMult(&x.s).Bytes())
	return x
}

// A hasher is a SHA-512, the digest it sums into, and R's encoding and a
// key's (those verify.go hashes), kept for the next signature: bytes
// written or summed through hash.Hash escape, and would be allocated at
// every signature.
type hasher struct {
	h hash.Hash
	d [sha512.Size]byte
	r [32]byte
	a [32]byte
}

// hashers keeps the hashers of signatures that have ended, at most
// keptHashers of them: as many as sign at once, after a burst. A list under
// a lock rather than a sync.Pool, which drops some of what it is given
// under the race detector and at each collection, so that the test that
// a signature allocates nothing holds in every build.
var hashers struct {
	sync.Mutex
	free []*hasher
}

const keptHashers = 64

func getHasher() *hasher {
	hashers.Lock()
	defer hashers.Unlock()
	if n := len(hashers.free); n > 0 {
		hs := hashers.free[n-1]
		hashers.free = hashers.free[:n-1]
		return hs
	}
	return &hasher{h: sha512.New()}
}

func putHasher(hs *hasher) {
	clear(hs.r[:])
	hashers.Lock()
	defer hashers.Unlock()
	if len(hashers.free) < keptHashers {
		hashers.free = append(hashers.free, hs)
	}
}

// sum is SHA-512 over the parts, in order, as a scalar modulo L (RFC 8032
// §5.1.6 steps 2 and 4: the 64-byte digest read little-endian).
func (hs *hasher) sum(dst *edwards25519.Scalar, parts ...[]byte) {
	hs.h.Reset()
	for _, p := range parts {
		hs.h.Write(p)
	}
	hs.h.Sum(hs.d[:0])
	if _, err := dst.SetUniformBytes(hs.d[:]); err != nil {
		panic("sig: a 64-byte digest does not make a scalar: " + err.Error())
	}
	clear(hs.d[:]) // step 2's digest is the nonce: not left in the list of hashers
}

// sign is RFC 8032 §5.1.6 for msg.
func (x *expandedKey) sign(msg []byte) Signature {
	hs := getHasher()
	defer putHasher(hs)
	var r, k, s edwards25519.Scalar
	hs.sum(&r, x.prefix[:], msg) // step 2: r = SHA-512(prefix ‖ M)
	var R edwards25519.Point
	R.ScalarBaseMult(&r) // step 3: R = [r]B, encoded once
	copy(hs.r[:], R.Bytes())
	hs.sum(&k, hs.r[:], x.public[:], msg) // step 4: k = SHA-512(R ‖ A ‖ M)
	s.MultiplyAdd(&k, &x.s, &r)           // step 5: S = (r + k·s) mod L
	var out Signature                     // step 6: R ‖ S
	copy(out[:32], hs.r[:])
	copy(out[32:], s.Bytes())
	return out
}
