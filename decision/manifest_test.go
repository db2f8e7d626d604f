package decision

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// The expected strings below are written by hand from §8's wording, not by
// the code under test.

const (
	testSessionHex = "00112233445566778899aabbccddeeff"
	testDigestHex  = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
)

func testSession() report.Session {
	var s report.Session
	hex.Decode(s[:], []byte(testSessionHex))
	return s
}

func testDigest() sig.Hash {
	var h sig.Hash
	hex.Decode(h[:], []byte(testDigestHex))
	return h
}

// plainPolicy has three pathways and no clone.
func plainPolicy() *policy.Policy {
	return &policy.Policy{
		TTLs: 300, MinTTLs: 10, Initial: 1,
		ServerURI:   "https://steer.example/s?room=1&x=2",
		ReloadURI:   "https://steer.example/r",
		DecisionURI: "https://steer.example/d/",
		Pathways: []policy.Pathway{
			{ID: "cdn-a", Base: policy.NoBase},
			{ID: "cdn-b", Base: policy.NoBase},
			{ID: "cdn.c_1", Base: policy.NoBase},
		},
	}
}

// clonePolicy has two pathways of the content description and one clone
// of each kind: HOST only, PARAMS only, both, and neither; its reload_uri
// holds a `?`.
func clonePolicy() *policy.Policy {
	return &policy.Policy{
		TTLs: 60, MinTTLs: 5, Initial: 0, Flags: policy.FlagQueryBeforeStart,
		ServerURI:   "https://s.example/steer",
		ReloadURI:   "https://s.example/steer?room=abc",
		DecisionURI: "https://s.example/decision/",
		Pathways: []policy.Pathway{
			{ID: "alpha", Base: policy.NoBase},
			{ID: "beta", Base: policy.NoBase},
			{ID: "alpha-h", Base: 0, Host: "h1.example.net"},
			{ID: "beta-p", Base: 1, Params: []policy.Param{{Name: "k", Value: "v1"}, {Name: "token", Value: "a%2Fb"}}},
			{ID: "alpha-hp", Base: 0, Host: "h2.example.net", Params: []policy.Param{{Name: "a", Value: ""}, {Name: "b", Value: "x"}}},
			{ID: "beta-n", Base: 1},
		},
	}
}

func writeManifest(p *policy.Policy, ttl uint32, priority []uint8) string {
	return string(NewManifestWriter(p).Append(nil, ttl, testSession(), priority, testDigest()))
}

// §8.1: no clone, so no PATHWAY-CLONES member; a reload_uri with no `?`
// takes `?`.
func TestManifestNoClones_8_1(t *testing.T) {
	got := writeManifest(plainPolicy(), 300, []uint8{2, 0, 1})
	want := `{"VERSION":1,"TTL":300,` +
		`"RELOAD-URI":"https://steer.example/r?wai_session=00112233445566778899aabbccddeeff",` +
		`"PATHWAY-PRIORITY":["cdn.c_1","cdn-a","cdn-b"],` +
		`"science.transaction.wai-decision":"https://steer.example/d/000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}`
	if got != want {
		t.Fatalf("manifest\n%s\nwant\n%s", got, want)
	}
}

// §8.1: every clone in the policy's order, each with its replacement; a
// reload_uri with a `?` takes `&`.
func TestManifestClones_8_1(t *testing.T) {
	got := writeManifest(clonePolicy(), 7, []uint8{3, 0, 5, 1, 4, 2})
	want := `{"VERSION":1,"TTL":7,` +
		`"RELOAD-URI":"https://s.example/steer?room=abc&wai_session=00112233445566778899aabbccddeeff",` +
		`"PATHWAY-PRIORITY":["beta-p","alpha","beta-n","beta","alpha-hp","alpha-h"],` +
		`"PATHWAY-CLONES":[` +
		`{"BASE-ID":"alpha","ID":"alpha-h","URI-REPLACEMENT":{"HOST":"h1.example.net"}},` +
		`{"BASE-ID":"beta","ID":"beta-p","URI-REPLACEMENT":{"PARAMS":{"k":"v1","token":"a%2Fb"}}},` +
		`{"BASE-ID":"alpha","ID":"alpha-hp","URI-REPLACEMENT":{"HOST":"h2.example.net","PARAMS":{"a":"","b":"x"}}},` +
		`{"BASE-ID":"beta","ID":"beta-n","URI-REPLACEMENT":{}}` +
		`],` +
		`"science.transaction.wai-decision":"https://s.example/decision/000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}`
	if got != want {
		t.Fatalf("manifest\n%s\nwant\n%s", got, want)
	}
}

// §8.1: one clone of each kind alone.
func TestManifestOneClone_8_1(t *testing.T) {
	const head = `{"VERSION":1,"TTL":1,"RELOAD-URI":"https://r.example/?a=b&wai_session=00112233445566778899aabbccddeeff",` +
		`"PATHWAY-PRIORITY":["o","c"],"PATHWAY-CLONES":[`
	const end = `],"science.transaction.wai-decision":"https://d.example/x?d=` + testDigestHex + `"}`
	cases := []struct {
		name  string
		clone policy.Pathway
		want  string
	}{
		{"HOST only", policy.Pathway{ID: "c", Base: 0, Host: "edge-2.example"},
			`{"BASE-ID":"o","ID":"c","URI-REPLACEMENT":{"HOST":"edge-2.example"}}`},
		{"PARAMS only", policy.Pathway{ID: "c", Base: 0, Params: []policy.Param{{Name: "cdn", Value: "2"}}},
			`{"BASE-ID":"o","ID":"c","URI-REPLACEMENT":{"PARAMS":{"cdn":"2"}}}`},
		{"both", policy.Pathway{ID: "c", Base: 0, Host: "E.example", Params: []policy.Param{{Name: "A", Value: "%41"}, {Name: "z", Value: "~._-"}}},
			`{"BASE-ID":"o","ID":"c","URI-REPLACEMENT":{"HOST":"E.example","PARAMS":{"A":"%41","z":"~._-"}}}`},
		{"neither", policy.Pathway{ID: "c", Base: 0},
			`{"BASE-ID":"o","ID":"c","URI-REPLACEMENT":{}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &policy.Policy{
				ReloadURI:   "https://r.example/?a=b",
				DecisionURI: "https://d.example/x?d=",
				Pathways:    []policy.Pathway{{ID: "o", Base: policy.NoBase}, c.clone},
			}
			got := writeManifest(p, 1, []uint8{0, 1})
			if want := head + c.want + end; got != want {
				t.Fatalf("manifest\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// §8.1: the convenience Manifest writes what the writer writes from the
// decision's ttl, session and priority.
func TestManifestOfDecision_8_1(t *testing.T) {
	d := validDecision()
	d.Session = testSession()
	d.TTL = 300
	d.Priority = []uint8{2, 0, 1}
	got := string(Manifest(plainPolicy(), d, testDigest()))
	if want := writeManifest(plainPolicy(), 300, []uint8{2, 0, 1}); got != want {
		t.Fatalf("Manifest\n%s\nwant\n%s", got, want)
	}
}

// §8.1: the manifest appends to what dst holds, allocates nothing given
// MaxSize of room, and never needs more than MaxSize.
func TestManifestAppend_8_1(t *testing.T) {
	w := NewManifestWriter(clonePolicy())
	pr := []uint8{0, 1, 2, 3, 4, 5}
	buf := make([]byte, 0, w.MaxSize())
	if n := testing.AllocsPerRun(100, func() {
		buf = w.Append(buf[:0], 1<<32-1, testSession(), pr, testDigest())
	}); n != 0 {
		t.Errorf("Append: %v allocations, want 0", n)
	}
	if len(buf) > w.MaxSize() {
		t.Errorf("manifest of %d bytes, MaxSize %d", len(buf), w.MaxSize())
	}
	if !strings.HasPrefix(string(buf), `{"VERSION":1,"TTL":4294967295,"RELOAD-URI":`) {
		t.Errorf("manifest begins %.50s", buf)
	}
	got := w.Append([]byte("xy"), 1, testSession(), pr, testDigest())
	if !bytes.Equal(got[2:], w.Append(nil, 1, testSession(), pr, testDigest())) || string(got[:2]) != "xy" {
		t.Error("Append does not append to dst")
	}
}

// §8.2: the HLS tag.
func TestHLSTag_8_2(t *testing.T) {
	for _, c := range []struct {
		p    *policy.Policy
		want string
	}{
		{plainPolicy(), `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/s?room=1&x=2",PATHWAY-ID="cdn-b"`},
		{clonePolicy(), `#EXT-X-CONTENT-STEERING:SERVER-URI="https://s.example/steer",PATHWAY-ID="alpha"`},
	} {
		if got := HLSTag(c.p); got != c.want {
			t.Errorf("HLSTag\n%s\nwant\n%s", got, c.want)
		}
	}
}

// §8.3, COMPANION §6: the DASH element, queryBeforeStart from flags bit 0,
// each `&` written `&amp;`.
func TestDASHElement_8_3(t *testing.T) {
	p := plainPolicy()
	want := `<ContentSteering defaultServiceLocation="cdn-b" queryBeforeStart="false">https://steer.example/s?room=1&amp;x=2</ContentSteering>`
	if got := DASHElement(p); got != want {
		t.Errorf("flag clear\n%s\nwant\n%s", got, want)
	}
	p.Flags = policy.FlagQueryBeforeStart
	p.ServerURI = "https://steer.example/s?a=1&b=2&c=%26"
	want = `<ContentSteering defaultServiceLocation="cdn-b" queryBeforeStart="true">https://steer.example/s?a=1&amp;b=2&amp;c=%26</ContentSteering>`
	if got := DASHElement(p); got != want {
		t.Errorf("flag set\n%s\nwant\n%s", got, want)
	}
	want = `<ContentSteering defaultServiceLocation="alpha" queryBeforeStart="true">https://s.example/steer</ContentSteering>`
	if got := DASHElement(clonePolicy()); got != want {
		t.Errorf("no &\n%s\nwant\n%s", got, want)
	}
}

// §8.4: the record's URI.
func TestRecordURI_8_4(t *testing.T) {
	want := "https://steer.example/d/" + testDigestHex
	if got := RecordURI(plainPolicy(), testDigest()); got != want {
		t.Errorf("RecordURI = %s, want %s", got, want)
	}
}

// Characters §3.3 allows.
const (
	idChars         = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_"
	hostChars       = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-."
	unreservedChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	uriChars        = unreservedChars + ":/?[]@!$&'()*+,;="
	hexDigits       = "0123456789abcdefABCDEF"
)

func randString(rng *rand.Rand, chars string, min, max int, percent bool) string {
	n := min + rng.IntN(max-min+1)
	var b strings.Builder
	for b.Len() < n {
		if percent && rng.IntN(8) == 0 {
			b.WriteByte('%')
			b.WriteByte(hexDigits[rng.IntN(len(hexDigits))])
			b.WriteByte(hexDigits[rng.IntN(len(hexDigits))])
			continue
		}
		b.WriteByte(chars[rng.IntN(len(chars))])
	}
	return b.String()
}

// randomPolicy is a policy whose strings keep §3.3's character rules.
func randomPolicy(rng *rand.Rand) *policy.Policy {
	p := &policy.Policy{
		ServerURI:   randString(rng, uriChars, 1, 80, true),
		ReloadURI:   randString(rng, uriChars, 1, 80, true),
		DecisionURI: randString(rng, uriChars, 1, 80, true),
		Flags:       uint8(rng.IntN(2)),
	}
	n := 1 + rng.IntN(32)
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		id := randString(rng, idChars, 1, 64, false)
		if ids[id] {
			i--
			continue
		}
		ids[id] = true
		pw := policy.Pathway{ID: id, Base: policy.NoBase}
		if i > 0 && rng.IntN(2) == 0 {
			pw.Base = uint8(rng.IntN(i))
			if rng.IntN(2) == 0 {
				pw.Host = randString(rng, hostChars, 1, 255, false)
			}
			if rng.IntN(2) == 0 {
				names := map[string]bool{}
				for range 1 + rng.IntN(5) {
					names[randString(rng, unreservedChars, 1, 64, true)] = true
				}
				for _, name := range slices.Sorted(maps.Keys(names)) { // §3.3: ascending
					pw.Params = append(pw.Params, policy.Param{Name: name, Value: randString(rng, unreservedChars, 0, 255, true)})
				}
			}
		}
		p.Pathways = append(p.Pathways, pw)
	}
	return p
}

// §8.1 writes JSON (RFC 8259): for random policies that keep §3.3's
// character rules and random decisions, the manifest is valid JSON, and
// reading it gives back each value written.
func TestManifestIsJSON_8_1(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	type replacement struct {
		HOST   *string
		PARAMS map[string]string
	}
	type clone struct {
		BaseID      string      `json:"BASE-ID"`
		ID          string      `json:"ID"`
		Replacement replacement `json:"URI-REPLACEMENT"`
	}
	type manifest struct {
		VERSION  int
		TTL      uint32
		Reload   string   `json:"RELOAD-URI"`
		Priority []string `json:"PATHWAY-PRIORITY"`
		Clones   []clone  `json:"PATHWAY-CLONES"`
		Decision string   `json:"science.transaction.wai-decision"`
	}
	for i := range 2000 {
		p := randomPolicy(rng)
		ttl := 1 + rng.Uint32()
		var session report.Session
		var digest sig.Hash
		for j := range session {
			session[j] = byte(rng.UintN(256))
		}
		for j := range digest {
			digest[j] = byte(rng.UintN(256))
		}
		priority := make([]uint8, len(p.Pathways))
		for j, k := range rng.Perm(len(p.Pathways)) {
			priority[j] = uint8(k)
		}
		b := NewManifestWriter(p).Append(nil, ttl, session, priority, digest)
		if !json.Valid(b) {
			t.Fatalf("case %d: not JSON: %s", i, b)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(b, &members); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var m manifest
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("case %d: %v: %s", i, err, b)
		}

		sep := "?"
		if strings.Contains(p.ReloadURI, "?") {
			sep = "&"
		}
		want := manifest{
			VERSION:  1,
			TTL:      ttl,
			Reload:   p.ReloadURI + sep + "wai_session=" + hex.EncodeToString(session[:]),
			Decision: p.DecisionURI + hex.EncodeToString(digest[:]),
		}
		for _, k := range priority {
			want.Priority = append(want.Priority, p.Pathways[k].ID)
		}
		for _, pw := range p.Pathways {
			if !pw.IsClone() {
				continue
			}
			c := clone{BaseID: p.Pathways[pw.Base].ID, ID: pw.ID}
			if pw.Host != "" {
				c.Replacement.HOST = &pw.Host
			}
			for _, q := range pw.Params {
				if c.Replacement.PARAMS == nil {
					c.Replacement.PARAMS = map[string]string{}
				}
				c.Replacement.PARAMS[q.Name] = q.Value
			}
			want.Clones = append(want.Clones, c)
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("case %d: read back\n%+v\nwant\n%+v", i, m, want)
		}
		if _, has := members["PATHWAY-CLONES"]; has != (len(want.Clones) > 0) {
			t.Fatalf("case %d: PATHWAY-CLONES present %v with %d clones", i, has, len(want.Clones))
		}
		if wantN := 5 + min(len(want.Clones), 1); len(members) != wantN {
			t.Fatalf("case %d: %d members, want %d", i, len(members), wantN)
		}
	}
}

func BenchmarkManifest(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	big := randomPolicy(rng)
	for len(big.Pathways) < 32 {
		big = randomPolicy(rng)
	}
	for _, c := range []struct {
		name string
		p    *policy.Policy
	}{
		{"3 pathways", plainPolicy()},
		{"6 with 4 clones", clonePolicy()},
		{fmt.Sprintf("32 with %d clones", countClones(big)), big},
	} {
		w := NewManifestWriter(c.p)
		priority := make([]uint8, len(c.p.Pathways))
		for i := range priority {
			priority[i] = uint8(len(priority) - 1 - i)
		}
		buf := make([]byte, 0, w.MaxSize())
		session, digest := testSession(), testDigest()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = w.Append(buf[:0], 300, session, priority, digest)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func countClones(p *policy.Policy) int {
	n := 0
	for i := range p.Pathways {
		if p.Pathways[i].IsClone() {
			n++
		}
	}
	return n
}
