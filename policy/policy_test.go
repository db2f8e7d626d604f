package policy

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// signerKey is the fixed key the tests sign with.
func signerKey(b byte) sig.PrivateKey {
	var seed [32]byte
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return sig.NewPrivateKey(seed)
}

// hopKey is a distinct hop key for each n; §3.3 asks nothing of a hop key but
// that it appear once.
func hopKey(n int) sig.PublicKey {
	var k sig.PublicKey
	sum := sha256.Sum256([]byte(fmt.Sprintf("hop %d", n)))
	copy(k[:], sum[:])
	return k
}

// three is a valid policy of three pathways: two of the content description
// and a clone of the first with a host and two params.
func three() *Policy {
	p := &Policy{
		PeriodUs:         2_000_000,
		WindowUs:         60_000_000,
		LagUs:            500_000,
		Basis:            PerByte,
		Floor:            1,
		LatencyCeilingMs: 3000,
		MinBufferMs:      4000,
		HysteresisPPM:    50_000,
		TTLs:             30,
		MinTTLs:          5,
		Flags:            FlagQueryBeforeStart,
		Initial:          0,
		Tiers:            []uint64{800_000, 2_500_000, 6_000_000},
		ServerURI:        "https://steer.example.com/v1/steer?room=abc",
		ReloadURI:        "https://steer.example.com/v1/steer",
		DecisionURI:      "https://steer.example.com/v1/decision/",
		Pathways: []Pathway{
			{ID: "cdn-a", Base: NoBase, TopTier: 2, LatencyMs: 800, Capacity: Unlimited, MinSharePPM: 50_000,
				Hops: []Hop{{hopKey(0), Edge}, {hopKey(1), Interior}}},
			{ID: "cdn-b", Base: NoBase, TopTier: 2, LatencyMs: 1200, Capacity: 5000, MinSharePPM: 50_000,
				Hops: []Hop{{hopKey(2), Edge}}},
			{ID: "cdn-a.eu", Base: 0, Host: "eu.cdn-a.example.net",
				Params:  []Param{{"region", "eu-west"}, {"token", "a%2Fb"}},
				TopTier: 1, LatencyMs: 900, Capacity: Unlimited,
				Hops: []Hop{{hopKey(3), Edge}}},
		},
	}
	p.Room[0], p.Room[31] = 0xaa, 0x55
	return p
}

// many is a valid policy of n pathways, every fifth a clone of the one
// before it.
func many(n int) *Policy {
	p := three()
	p.Pathways = nil
	for i := range n {
		w := Pathway{ID: fmt.Sprintf("p%02d", i), Base: NoBase, TopTier: 2, LatencyMs: uint32(100 + i),
			Capacity: Unlimited, MinSharePPM: 1000,
			Hops: []Hop{{hopKey(2 * i), Edge}, {hopKey(2*i + 1), Interior}}}
		if i%5 == 4 {
			w.Base = uint8(i - 1)
			w.Host = fmt.Sprintf("h%d.example.net", i)
		}
		p.Pathways = append(p.Pathways, w)
	}
	return p
}

func signed(t testing.TB, p *Policy) []byte {
	t.Helper()
	b, err := Sign(p, signerKey(1))
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return b
}

// same compares the fields of two policies, not what Parse and Sign keep.
func same(a, b *Policy) bool {
	x, y := *a, *b
	x.raw, y.raw = nil, nil
	x.digest, y.digest = sig.Hash{}, sig.Hash{}
	return reflect.DeepEqual(x, y)
}

func wantCode(t *testing.T, err error, code reason.Code) {
	t.Helper()
	if reason.Of(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	var e *reason.Error
	if _, ok := err.(*reason.Error); !ok {
		t.Fatalf("error %T is not a *reason.Error: %v", err, e)
	}
}

// §3.1, §3.2: Parse and Append are inverses, both ways.
func TestRoundTrip_3_1(t *testing.T) {
	simple := three()
	simple.Pathways = simple.Pathways[:2]
	for name, p := range map[string]*Policy{"three": three(), "no clone": simple, "32": many(32)} {
		t.Run(name, func(t *testing.T) {
			b := signed(t, p)
			q, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !same(p, q) {
				t.Errorf("Parse(Append(p)) != p:\n%+v\n%+v", p, q)
			}
			if got := Append(nil, q); !bytes.Equal(got, b) {
				t.Errorf("Append(Parse(b)) != b")
			}
			if !bytes.Equal(q.Bytes(), b) || !bytes.Equal(p.Bytes(), b) {
				t.Errorf("Bytes() is not the bytes read and signed")
			}
			hand := *q
			hand.raw = nil
			if !bytes.Equal(hand.Bytes(), b) || hand.Digest() != q.Digest() {
				t.Errorf("a policy built by hand gives other bytes or digest")
			}
		})
	}
}

// The package doc's example of the layout (§3.1, §3.2) is 252 bytes.
func TestDocExample_3_1(t *testing.T) {
	p := &Policy{PeriodUs: 1, WindowUs: 1, Basis: PerByte, TTLs: 1, MinTTLs: 1,
		Tiers: []uint64{1_000_000}, ServerURI: "s", ReloadURI: "r", DecisionURI: "d",
		Pathways: []Pathway{{ID: "a", Base: NoBase, Hops: []Hop{{hopKey(0), Edge}}}}}
	b := signed(t, p)
	if len(b) != 252 {
		t.Errorf("the doc's example is %d bytes, not 252", len(b))
	}
	if _, err := Parse(b); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

// §3.4: the digest is SHA-256 over the bytes before sig; the signature is by
// signer over "wai:steering-policy", 0x01 and those bytes.
func TestDigestAndSignature_3_4(t *testing.T) {
	p := three()
	b := signed(t, p)
	if want := sig.Hash(sha256.Sum256(b[:len(b)-64])); p.Digest() != want {
		t.Errorf("Sign's digest %s, want %s", p.Digest(), want)
	}
	q, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.Digest() != p.Digest() {
		t.Errorf("Parse's digest %s, Sign's %s", q.Digest(), p.Digest())
	}
	if q.Signer != signerKey(1).Public() {
		t.Errorf("signer is not the signing key")
	}
	if err := q.VerifySignature(); err != nil {
		t.Errorf("VerifySignature: %v", err)
	}
	msg := append([]byte("wai:steering-policy\x01"), b[:len(b)-64]...)
	if len("wai:steering-policy\x01") != 20 {
		t.Fatal("the domain and 0x01 are 20 bytes (§3.4)")
	}
	if err := sig.VerifyRaw(q.Signer, msg, q.Sig); err != nil {
		t.Errorf("the signature is not over the domain, 0x01 and the body: %v", err)
	}
}

// §3.4: a key that fails step 1 or 2 is bad_key, a signature that fails a
// later step bad_signature.
func TestVerifySignature_3_4(t *testing.T) {
	b := signed(t, three())
	const signerAt = 4 + 1 + 32
	mutate := func(t *testing.T, f func(c []byte)) *Policy {
		t.Helper()
		c := bytes.Clone(b)
		f(c)
		p, err := Parse(c)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		return p
	}
	t.Run("bad_key: y not below p", func(t *testing.T) {
		p := mutate(t, func(c []byte) {
			copy(c[signerAt:], bytes.Repeat([]byte{0xff}, 31))
			c[signerAt+31] = 0x7f
		})
		wantCode(t, p.VerifySignature(), reason.BadKey)
	})
	t.Run("bad_key: small order", func(t *testing.T) {
		p := mutate(t, func(c []byte) {
			copy(c[signerAt:], make([]byte, 32))
			c[signerAt] = 1 // the identity
		})
		wantCode(t, p.VerifySignature(), reason.BadKey)
	})
	t.Run("bad_signature: a bit of S", func(t *testing.T) {
		p := mutate(t, func(c []byte) { c[len(c)-10] ^= 1 })
		wantCode(t, p.VerifySignature(), reason.BadSignature)
	})
	t.Run("bad_signature: a byte of the body", func(t *testing.T) {
		p := mutate(t, func(c []byte) { c[signerAt+32+16] ^= 1 }) // lag_us, which no rule bounds
		wantCode(t, p.VerifySignature(), reason.BadSignature)
	})
	t.Run("bad_signature: another key's", func(t *testing.T) {
		p := mutate(t, func(c []byte) { k := signerKey(9).Public(); copy(c[signerAt:], k[:]) })
		wantCode(t, p.VerifySignature(), reason.BadSignature)
	})
	t.Run("bad_signature: another domain", func(t *testing.T) {
		k := signerKey(1)
		s := k.Sign(sig.DomainDecision, b[:len(b)-64])
		p := mutate(t, func(c []byte) { copy(c[len(c)-64:], s[:]) })
		wantCode(t, p.VerifySignature(), reason.BadSignature)
	})
}

// COMPANION §1: checks 1 to 3 in order, then truncated and malformed.
func TestReading_COMPANION_1(t *testing.T) {
	b := signed(t, three())
	cases := []struct {
		name string
		in   []byte
		want reason.Code
	}{
		{"empty", nil, reason.Truncated},
		{"3 bytes, wrong magic", []byte("WSX"), reason.Truncated},
		{"wrong magic", []byte("WSD1\x01"), reason.Malformed},
		{"wrong magic, wrong version", []byte("WSPX\x02"), reason.Malformed},
		{"magic alone", []byte("WSP1"), reason.Truncated},
		{"version 0", append([]byte("WSP1\x00"), b[5:]...), reason.UnknownVersion},
		{"version 2", append([]byte("WSP1\x02"), b[5:]...), reason.UnknownVersion},
		{"version 2 alone", []byte("WSP1\x02"), reason.UnknownVersion},
		{"a byte after sig", append(bytes.Clone(b), 0), reason.Malformed},
		{"sig short by one", b[:len(b)-1], reason.Truncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.in)
			wantCode(t, err, c.want)
		})
	}
	// Check 4: every strict prefix past the version ends before a field.
	for n := 5; n < len(b); n++ {
		if _, err := Parse(b[:n]); reason.Of(err) != reason.Truncated {
			t.Fatalf("prefix of %d bytes: %v, want truncated", n, err)
		}
	}
}

// COMPANION §1 check 4: a length or count that announces more bytes than
// remain is truncated; one that announces fewer leaves bytes (check 5).
func TestCounts_COMPANION_1(t *testing.T) {
	p := three()
	b := signed(t, p)
	const tiersAt = 117
	uriAt := tiersAt + 1 + 8*len(p.Tiers)
	pathwaysAt := uriAt + 6 + len(p.ServerURI) + len(p.ReloadURI) + len(p.DecisionURI)
	idAt := pathwaysAt + 1
	for _, c := range []struct {
		name string
		at   int
		add  int
		want reason.Code
	}{
		{"tiers count 255", tiersAt, 252, reason.Truncated},
		{"server_uri length above 65280", uriAt + 1, 255, reason.Truncated},
		{"pathways count +1", pathwaysAt, 1, reason.Truncated},
		{"pathways count -1", pathwaysAt, -1, reason.Malformed},
		{"id length 255", idAt, 250, reason.Truncated},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := bytes.Clone(b)
			m[c.at] = byte(int(m[c.at]) + c.add)
			_, err := Parse(m)
			wantCode(t, err, c.want)
		})
	}
	// The offsets above are right: the id's length byte is that of "cdn-a".
	if b[idAt] != 5 || b[tiersAt] != 3 || int(b[uriAt]) != len(p.ServerURI) || b[pathwaysAt] != 3 {
		t.Fatalf("offsets of the layout are off: %d %d %d %d", b[idAt], b[tiersAt], b[uriAt], b[pathwaysAt])
	}
}

// rule is one mutation of a valid policy that breaks one rule of §3.3.
type rule struct {
	name  string
	edit  func(p *Policy)
	code  reason.Code
	field string
}

func inv(name, field string, edit func(p *Policy)) rule {
	return rule{name, edit, reason.PolicyInvalid, field}
}

var rules = []rule{
	// §3.3: a clone whose base is not the index of a pathway before it.
	{"clone_unknown: base is its own index", func(p *Policy) { p.Pathways[2].Base = 2 }, reason.CloneUnknown, "pathways[2].base"},
	{"clone_unknown: base after it", func(p *Policy) { p.Pathways[1].Base = 2 }, reason.CloneUnknown, "pathways[1].base"},
	{"clone_unknown: base past the pathways", func(p *Policy) { p.Pathways[2].Base = 254 }, reason.CloneUnknown, "pathways[2].base"},
	// clone_unknown comes before policy_invalid.
	{"clone_unknown before policy_invalid", func(p *Policy) { p.PeriodUs = 0; p.Pathways[2].Base = 7 }, reason.CloneUnknown, "pathways[2].base"},

	// Bullet 1: period_us > 0; window_us a multiple of it above 0.
	inv("period_us is 0", "period_us", func(p *Policy) { p.PeriodUs = 0 }),
	inv("window_us is 0", "window_us", func(p *Policy) { p.WindowUs = 0 }),
	inv("window_us not a multiple", "window_us", func(p *Policy) { p.WindowUs = 61_000_000 }),
	inv("window_us below period_us", "window_us", func(p *Policy) { p.WindowUs = 1_000_000 }),

	// Bullet 2: basis; ttls; hysteresis; flags.
	inv("basis 0", "basis", func(p *Policy) { p.Basis = 0 }),
	inv("basis 3", "basis", func(p *Policy) { p.Basis = 3 }),
	inv("min_ttl_s 0", "min_ttl_s", func(p *Policy) { p.MinTTLs = 0 }),
	inv("min_ttl_s above ttl_s", "min_ttl_s", func(p *Policy) { p.MinTTLs = 31 }),
	inv("ttl_s 0", "min_ttl_s", func(p *Policy) { p.TTLs = 0 }),
	inv("hysteresis_ppm above 1 000 000", "hysteresis_ppm", func(p *Policy) { p.HysteresisPPM = 1_000_001 }),
	inv("flags 2", "flags", func(p *Policy) { p.Flags = 2 }),
	inv("flags 0x81", "flags", func(p *Policy) { p.Flags = 0x81 }),

	// Bullet 3: tiers.
	inv("no tiers", "tiers", func(p *Policy) { p.Tiers = nil; p.Floor = 0 }),
	inv("9 tiers", "tiers", func(p *Policy) { p.Tiers = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9} }),
	inv("a bitrate of 0", "tiers[0]", func(p *Policy) { p.Tiers[0] = 0 }),
	inv("two equal bitrates", "tiers[2]", func(p *Policy) { p.Tiers[2] = p.Tiers[1] }),
	inv("descending bitrates", "tiers[1]", func(p *Policy) { p.Tiers[1] = 1 }),
	inv("floor = n", "floor", func(p *Policy) { p.Floor = 3 }),

	// Bullet 4: URIs.
	inv("empty server_uri", "server_uri", func(p *Policy) { p.ServerURI = "" }),
	inv("reload_uri of 2049 bytes", "reload_uri", func(p *Policy) { p.ReloadURI = "https://x/" + strings.Repeat("a", 2039) }),
	inv("'#' in decision_uri", "decision_uri", func(p *Policy) { p.DecisionURI = "https://x/d#" }),
	inv("'%' with one digit", "server_uri", func(p *Policy) { p.ServerURI = "https://x/%4" }),
	inv("'%' with a non-digit", "reload_uri", func(p *Policy) { p.ReloadURI = "https://x/%4g" }),
	inv("'%' at the end", "decision_uri", func(p *Policy) { p.DecisionURI = "https://x/%" }),
	inv("a space", "server_uri", func(p *Policy) { p.ServerURI = "https://x/a b" }),
	inv("a quote", "server_uri", func(p *Policy) { p.ServerURI = `https://x/"` }),
	inv("a non-ASCII byte", "reload_uri", func(p *Policy) { p.ReloadURI = "https://x/é" }),
	inv("a backslash", "decision_uri", func(p *Policy) { p.DecisionURI = `https://x\y` }),

	// Bullet 5: pathways and ids.
	inv("no pathways", "pathways", func(p *Policy) { p.Pathways = nil }),
	inv("33 pathways", "pathways", func(p *Policy) { *p = *many(33) }),
	inv("an empty id", "pathways[1].id", func(p *Policy) { p.Pathways[1].ID = "" }),
	inv("an id of 65 bytes", "pathways[1].id", func(p *Policy) { p.Pathways[1].ID = strings.Repeat("a", 65) }),
	inv("an id with a space", "pathways[1].id", func(p *Policy) { p.Pathways[1].ID = "a b" }),
	inv("an id with '~'", "pathways[0].id", func(p *Policy) { p.Pathways[0].ID = "a~b" }),
	inv("two equal ids", "pathways[2].id", func(p *Policy) { p.Pathways[2].ID = "cdn-a" }),

	// Bullet 6: initial.
	inv("initial past the pathways", "initial", func(p *Policy) { p.Initial = 3 }),
	inv("initial a clone", "initial", func(p *Policy) { p.Initial = 2 }),

	// Bullet 7: host and params.
	inv("a host on a pathway that is not a clone", "pathways[1].host", func(p *Policy) { p.Pathways[1].Host = "b.example" }),
	inv("params on a pathway that is not a clone", "pathways[0].params", func(p *Policy) { p.Pathways[0].Params = []Param{{"a", "b"}} }),
	inv("a clone's host with '_'", "pathways[2].host", func(p *Policy) { p.Pathways[2].Host = "eu_1.example" }),
	inv("a clone's host with ':'", "pathways[2].host", func(p *Policy) { p.Pathways[2].Host = "eu.example:8443" }),
	inv("a clone's host of 256 bytes", "pathways[2].host", func(p *Policy) { p.Pathways[2].Host = strings.Repeat("h", 256) }),
	inv("an empty param name", "pathways[2].params[0].name", func(p *Policy) { p.Pathways[2].Params[0].Name = "" }),
	inv("a param name of 65 bytes", "pathways[2].params[1].name", func(p *Policy) { p.Pathways[2].Params[1].Name = "t" + strings.Repeat("o", 64) }),
	inv("a param name with '='", "pathways[2].params[0].name", func(p *Policy) { p.Pathways[2].Params[0].Name = "a=b" }),
	inv("a param name with a bad '%'", "pathways[2].params[0].name", func(p *Policy) { p.Pathways[2].Params[0].Name = "a%2" }),
	inv("a param value of 256 bytes", "pathways[2].params[0].value", func(p *Policy) { p.Pathways[2].Params[0].Value = strings.Repeat("v", 256) }),
	inv("a param value with '&'", "pathways[2].params[0].value", func(p *Policy) { p.Pathways[2].Params[0].Value = "a&b" }),
	inv("a param value with '/'", "pathways[2].params[1].value", func(p *Policy) { p.Pathways[2].Params[1].Value = "a/b" }),
	inv("a param value with a bad '%'", "pathways[2].params[1].value", func(p *Policy) { p.Pathways[2].Params[1].Value = "%zz" }),
	inv("param names descending", "pathways[2].params[1].name", func(p *Policy) { p.Pathways[2].Params[1].Name = "a" }),
	inv("param names equal", "pathways[2].params[1].name", func(p *Policy) { p.Pathways[2].Params[1].Name = "region" }),
	inv("param names in upper before lower case", "pathways[2].params[1].name", func(p *Policy) {
		p.Pathways[2].Params = []Param{{"b", ""}, {"B", ""}}
	}),

	// Bullet 8: top_tier, hops and places.
	inv("top_tier = n", "pathways[1].top_tier", func(p *Policy) { p.Pathways[1].TopTier = 3 }),
	inv("no hop", "pathways[1].hops", func(p *Policy) { p.Pathways[1].Hops = nil }),
	inv("no edge hop", "pathways[0].hops", func(p *Policy) { p.Pathways[0].Hops[0].Place = Interior }),
	inv("place 0", "pathways[0].hops[1].place", func(p *Policy) { p.Pathways[0].Hops[1].Place = 0 }),
	inv("place 3", "pathways[0].hops[1].place", func(p *Policy) { p.Pathways[0].Hops[1].Place = 3 }),
	inv("a hop key twice in one pathway", "pathways[0].hops[1].key", func(p *Policy) { p.Pathways[0].Hops[1].Key = hopKey(0) }),
	inv("a hop key in two pathways", "pathways[2].hops[0].key", func(p *Policy) { p.Pathways[2].Hops[0].Key = hopKey(1) }),

	// Bullet 9: the sum of the minimum shares.
	inv("min shares summing to 1 000 001", "pathways[2].min_share_ppm", func(p *Policy) { p.Pathways[2].MinSharePPM = 900_001 }),
	// 2^32 − 1 + 1 wraps to 0 in a u32: the sum is exact.
	inv("min shares summing past 2^32", "pathways[0].min_share_ppm", func(p *Policy) {
		p.Pathways[0].MinSharePPM = 1<<32 - 1
		p.Pathways[1].MinSharePPM = 1
		p.Pathways[2].MinSharePPM = 0
	}),
	inv("32 min shares of 2^32 − 1", "pathways[0].min_share_ppm", func(p *Policy) {
		*p = *many(32)
		for i := range p.Pathways {
			p.Pathways[i].MinSharePPM = 1<<32 - 1
		}
	}),
}

// §3.3: each rule, broken alone by mutating a valid policy, refuses the
// policy with its own code, from Parse and from Check, and names its field.
func TestRules_3_3(t *testing.T) {
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			p := three()
			r.edit(p)
			err := Check(p)
			wantCode(t, err, r.code)
			if bs := Breaches(p); bs[0].Field != r.field {
				t.Errorf("first breach at %s (%s), want %s", bs[0].Field, bs[0].Rule, r.field)
			}
			if !strings.HasPrefix(err.(*reason.Error).Detail, r.field+" ") {
				t.Errorf("detail %q does not name %s", err.(*reason.Error).Detail, r.field)
			}
			if !strings.Contains(err.Error(), "§3.3") {
				t.Errorf("detail %q does not cite §3.3", err)
			}
			// Sign refuses what Check refuses.
			if _, err := Sign(p, signerKey(1)); reason.Of(err) != r.code {
				t.Errorf("Sign: %v", err)
			}
			// Parse refuses the bytes, where the value can be written.
			if fits(p) {
				_, err := Parse(Append(nil, p))
				wantCode(t, err, r.code)
				if !strings.HasPrefix(err.(*reason.Error).Detail, r.field+" ") {
					t.Errorf("Parse's detail %q does not name %s", err.(*reason.Error).Detail, r.field)
				}
			}
		})
	}
}

// fits reports whether every length of p fits its field, so that Append
// writes p itself.
func fits(p *Policy) bool {
	for _, w := range p.Pathways {
		if len(w.Host) > 255 || len(w.ID) > 255 {
			return false
		}
		for _, q := range w.Params {
			if len(q.Value) > 255 || len(q.Name) > 255 {
				return false
			}
		}
	}
	return true
}

// §3.3: what the rules allow at their edges reads.
func TestRulesAllow_3_3(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *Policy)
	}{
		{"window_us = period_us", func(p *Policy) { p.WindowUs = p.PeriodUs }},
		{"lag_us 0", func(p *Policy) { p.LagUs = 0 }},
		{"basis 2", func(p *Policy) { p.Basis = PerSecond }},
		{"min_ttl_s = ttl_s = 1", func(p *Policy) { p.TTLs, p.MinTTLs = 1, 1 }},
		{"hysteresis_ppm 1 000 000", func(p *Policy) { p.HysteresisPPM = 1_000_000 }},
		{"flags 0", func(p *Policy) { p.Flags = 0 }},
		{"8 tiers", func(p *Policy) { p.Tiers = []uint64{1, 2, 3, 4, 5, 6, 7, 1<<64 - 1} }},
		{"floor n − 1", func(p *Policy) { p.Floor = 2 }},
		{"URI of 2048 bytes", func(p *Policy) { p.ServerURI = "https://x/" + strings.Repeat("a", 2038) }},
		{"URI of 1 byte", func(p *Policy) { p.ReloadURI = "/" }},
		{"every reserved character but '#'", func(p *Policy) { p.DecisionURI = "https://u@x:1/p;q?a=b&c=d!$'()*+,[]" }},
		{"percent-encodings in both cases", func(p *Policy) { p.ReloadURI = "https://x/%2f%2F%23~" }},
		{"32 pathways", func(p *Policy) { *p = *many(32) }},
		{"an id of 64 bytes of every kind", func(p *Policy) {
			p.Pathways[1].ID = "AZaz09.-_" + strings.Repeat("x", 55)
		}},
		{"a clone with neither host nor params", func(p *Policy) { p.Pathways[2].Host, p.Pathways[2].Params = "", nil }},
		{"a clone of a clone", func(p *Policy) {
			p.Pathways = append(p.Pathways, Pathway{ID: "c", Base: 2, TopTier: 0, Hops: []Hop{{hopKey(9), Edge}}})
		}},
		{"initial the second pathway", func(p *Policy) { p.Initial = 1 }},
		{"a clone's host of 255 bytes", func(p *Policy) { p.Pathways[2].Host = strings.Repeat("h", 255) }},
		{"params of 64 and 255 bytes, empty value", func(p *Policy) {
			p.Pathways[2].Params = []Param{{"B", ""}, {"a%20" + strings.Repeat("z", 60), strings.Repeat("~", 255)}}
		}},
		{"min shares summing to 1 000 000", func(p *Policy) { p.Pathways[2].MinSharePPM = 900_000 }},
		{"capacity 0", func(p *Policy) { p.Pathways[1].Capacity = 0 }},
		{"interior hops before the edge", func(p *Policy) {
			p.Pathways[0].Hops[0], p.Pathways[0].Hops[1] = p.Pathways[0].Hops[1], p.Pathways[0].Hops[0]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := three()
			c.edit(p)
			b := signed(t, p)
			q, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !same(p, q) || !bytes.Equal(Append(nil, q), b) {
				t.Errorf("round trip differs")
			}
		})
	}
}

// Breaches lists every rule broken, clone_unknown first.
func TestBreachesAll_3_3(t *testing.T) {
	p := three()
	p.Flags = 4
	p.Pathways[1].ID = "x y"
	p.Pathways[2].Base = 2
	bs := Breaches(p)
	var got []string
	for _, b := range bs {
		got = append(got, string(b.Code)+" "+b.Field)
	}
	want := []string{"clone_unknown pathways[2].base", "policy_invalid flags", "policy_invalid pathways[1].id"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if Breaches(three()) != nil {
		t.Errorf("a valid policy breaks a rule")
	}
}

func TestIndexAndIDs_3_2(t *testing.T) {
	p := three()
	if i, ok := p.Index("cdn-a.eu"); !ok || i != 2 {
		t.Errorf("Index(cdn-a.eu) = %d, %v", i, ok)
	}
	if _, ok := p.Index("cdn-c"); ok {
		t.Errorf("Index found a pathway the policy does not have")
	}
	if got := p.IDs(); !reflect.DeepEqual(got, []string{"cdn-a", "cdn-b", "cdn-a.eu"}) {
		t.Errorf("IDs() = %q", got)
	}
	if !p.Clones() {
		t.Errorf("Clones() is false with a clone")
	}
	p.Pathways = p.Pathways[:2]
	if p.Clones() {
		t.Errorf("Clones() is true with none")
	}
}

// Sign refuses to sign with no key, and leaves the policy unsigned.
func TestSignNoKey_3_4(t *testing.T) {
	if _, err := Sign(three(), sig.PrivateKey{}); err == nil {
		t.Errorf("Sign signed with no key")
	}
}

func FuzzParse(f *testing.F) {
	simple := three()
	simple.Pathways = simple.Pathways[:2]
	for _, p := range []*Policy{three(), simple, many(6), many(32)} {
		f.Add(signed(f, p))
	}
	b := signed(f, three())
	f.Add(b[:len(b)-1])
	f.Add(append(bytes.Clone(b), 0))
	f.Add([]byte("WSP1\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Parse(in)
		if err != nil {
			var e *reason.Error
			if _, ok := err.(*reason.Error); !ok {
				t.Fatalf("error %T is not a *reason.Error: %v", err, e)
			}
			return
		}
		if out := Append(nil, p); !bytes.Equal(out, in) {
			t.Fatalf("Append(Parse(b)) != b")
		}
		if !bytes.Equal(p.Bytes(), in) || p.Digest() != sig.Digest(in[:len(in)-64]) {
			t.Fatalf("Bytes or Digest is not the input's")
		}
		q, err := Parse(Append(nil, p))
		if err != nil || !same(p, q) {
			t.Fatalf("Parse(Append(p)) != p: %v", err)
		}
		if err := Check(p); err != nil {
			t.Fatalf("Parse accepted what Check refuses: %v", err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{3, 32} {
		p := many(n)
		if n == 3 {
			p = three()
		}
		in := signed(b, p)
		b.Run(fmt.Sprintf("%d pathways", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := Parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDigest(b *testing.B) {
	p, err := Parse(signed(b, many(32)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Digest()
	}
}
