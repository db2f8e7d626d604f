package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/verify"
)

func vectorNamed(t *testing.T, f *File, name string) *Vector {
	t.Helper()
	for i := range f.Vectors {
		if f.Vectors[i].Name == name {
			return &f.Vectors[i]
		}
	}
	t.Fatalf("no vector %q", name)
	return nil
}

// digestOf is SHA-256 over a decision's bytes before sig (§7.3), computed
// here from the file's bytes.
func digestOf(decision []byte) string {
	h := sha256.Sum256(decision[:len(decision)-64])
	return hex.EncodeToString(h[:])
}

// sessionOf is the session a decision states, read by hand from its bytes at
// §7.1's place: after magic (4), version (1), room (32), signer (32), policy
// (32) and t (8).
func sessionOf(decision []byte) string { return hex.EncodeToString(decision[109:125]) }

// drawOf is §6.3's draw, computed here from the bytes: the first four bytes
// of SHA-256("wai:steering-draw" ‖ 0x01 ‖ policy digest ‖ session) as a
// little-endian u32 (§2), mod 1 000 000; the policy's digest is SHA-256 over
// its bytes before sig (§3.4).
func drawOf(policy, decision []byte) uint32 {
	pd := sha256.Sum256(policy[:len(policy)-64])
	h := sha256.New()
	h.Write([]byte("wai:steering-draw\x01"))
	h.Write(pd[:])
	h.Write(decision[109:125])
	return binary.LittleEndian.Uint32(h.Sum(nil)[:4]) % 1_000_000
}

// outputs are what §8 writes from a policy's URIs, by hand: the RELOAD-URI
// up to the session (§8.1: the reload_uri, then `&` when it holds a `?` and
// `?` otherwise, then `wai_session=`), the decision URI's prefix (§8.4), the
// HLS tag (§8.2) and the DASH element (§8.3: each `&` written `&amp;`,
// COMPANION §6).
type outputs struct {
	reload, decisions, hls, dash string
}

// defaultOutputs: server_uri and reload_uri https://steer.example/v1/steer
// (no `?`, so `?wai_session=`), decision_uri
// https://steer.example/v1/decisions/, initial pathway a, flags 0.
var defaultOutputs = outputs{
	reload:    "https://steer.example/v1/steer?wai_session=",
	decisions: "https://steer.example/v1/decisions/",
	hls:       `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer",PATHWAY-ID="a"`,
	dash:      `<ContentSteering defaultServiceLocation="a" queryBeforeStart="false">https://steer.example/v1/steer</ContentSteering>`,
}

// byHand is one accepted vector's facts (§9.3) worked out by hand.
type byHand struct {
	// session is the decision's session in hexadecimal; "" for a session
	// the case found by its band, when the draw must fall in band [lo, hi).
	session  string
	band     [2]uint32
	priority []string
	ttl      uint32
	reason   string
	pathways []verify.PathwayFacts
	out      outputs
	clones   string // the PATHWAY-CLONES member with its comma; "" for none
}

// sess is the hexadecimal of the corpus's session(b): b, fourteen zero
// bytes, 0x5a.
func sess(b string) string { return b + strings.Repeat("00", 14) + "5a" }

// The limits of §6.1, as a pathway's facts write them.
var (
	within    = verify.Limits{Latency: true, Quality: true, Capacity: true}
	slow      = verify.Limits{Quality: true, Capacity: true} // latency_ms above latency_ceiling_ms
	atItsFull = verify.Limits{Latency: true, Quality: true}  // load = capacity, not the client's pathway
)

func fig(id string, class int, joules, delivery string, l verify.Limits) verify.PathwayFacts {
	return verify.PathwayFacts{ID: id, Status: "figure", Class: class, Joules: joules, Delivery: delivery, Limits: l}
}

// none is a pathway with no figure: its class, J and D are stated as 0
// (§5.4, §7.2).
func none(id, status string, l verify.Limits) verify.PathwayFacts {
	return verify.PathwayFacts{ID: id, Status: status, Joules: "0", Delivery: "0", Limits: l}
}

// The default scenario's figures (internal/scenario DefaultPathways): per
// period a's edge hop spends 30 000 000 µJ and its interior hop 15 000 000,
// b's 20 000 000 and 10 000 000, c's 40 000 000 and 20 000 000, all
// ModelBased (class 2); each edge hop sends 10^9 media bytes, which basis 1
// counts as D (§5.3). P is 60 s, L 10 s, and the cases decide at t0 = 8P +
// 10 s, so b = ⌊(t0 − L)/P⌋P = 8P (§5.1). With W = 5P the window [3P, 8P)
// holds five periods: J_a = 5 × 45 000 000 = 225 000 000, J_b = 5 × 30 000 000
// = 150 000 000, J_c = 5 × 60 000 000 = 300 000 000, D = 5 × 10^9 for each;
// with W = 2P (refusalSpec) it is [6P, 8P) and two periods: 90 000 000,
// 60 000 000, 120 000 000 and D = 2 × 10^9. The tiers are 500 000, 1 500 000
// and 4 000 000 b/s, F = 1, min_buffer_ms 4000, h = 50 000 ppm, ttl_s 300,
// min_ttl_s 30; every pathway has top_tier 2, latency 100 ms (ceiling 500),
// no capacity limit and no minimum share, unless a case says otherwise.
var (
	a5 = fig("a", 2, "225000000", "5000000000", within)
	b5 = fig("b", 2, "150000000", "5000000000", within)
	c5 = fig("c", 2, "300000000", "5000000000", within)
	a2 = fig("a", 2, "90000000", "2000000000", within)
	b2 = fig("b", 2, "60000000", "2000000000", within)
	c2 = fig("c", 2, "120000000", "2000000000", within)
)

func ps(p ...verify.PathwayFacts) []verify.PathwayFacts { return p }
func ids(id ...string) []string                         { return id }

// acceptedByHand holds the facts of every accepted vector of the corpus.
// Where no step of §6.4 before it applies, the reason is rank (step 6) and
// the first pathway w, the first of §6.2's order within the limits; the
// priority is then §6.5's: the first, the others within the limits in the
// order, then the rest in the order.
var acceptedByHand = map[string]byHand{
	// All class 2 and D equal, so §6.2 step 2 orders by J: b < a < c. No
	// report (c unknown), no band: rank, b. TTL ttl_s.
	"three pathways, one class": {session: sess("01"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a5, b5, c5), out: defaultOutputs},
	// a's hops CalibratedInstrument (5, rank 0), c's OnChipCounter (4, rank
	// 1), b ModelBased (2, rank 2): §6.2 step 1 orders a, c, b though b's J
	// is lowest.
	"mixed classes, ordered by class": {session: sess("02"), priority: ids("a", "c", "b"), ttl: 300, reason: "rank",
		pathways: ps(fig("a", 5, "225000000", "5000000000", within), b5, fig("c", 4, "300000000", "5000000000", within)),
		out:      defaultOutputs},
	// b's interior hop unmetered: status unmetered (§5.3 step 2), J and D
	// stated 0 though its edge hop's 1 000 µJ a period is the cheapest; rank
	// 4 puts it after a < c (225 000 000 < 300 000 000).
	"unmetered hop ranked after figures": {session: sess("03"), priority: ids("a", "c", "b"), ttl: 300, reason: "rank",
		pathways: ps(a5, none("b", "unmetered", within), c5), out: defaultOutputs},
	// b's edge hop has no record of period 6: not covered, stale (§5.2).
	"stale evidence": {session: sess("04"), priority: ids("a", "c", "b"), ttl: 300, reason: "rank",
		pathways: ps(a5, none("b", "stale", within), c5), out: defaultOutputs},
	// c = c, T = 1 600 000: the sustainable tier is 1 (1 500 000 ≤ T <
	// 4 000 000), at most F = 1, so at its floor; B absent, so step 1 does
	// not apply and step 2 holds c (floor). Then b, a in the order. TTL
	// min_ttl_s.
	"client at its floor held": {session: sess("05"), priority: ids("c", "b", "a"), ttl: 30, reason: "floor",
		pathways: ps(a5, b5, c5), out: defaultOutputs},
	// c = c, B = 1 000 < min_buffer_ms 4 000: step 1 holds c (buffer).
	"client with a short buffer held": {session: sess("06"), priority: ids("c", "b", "a"), ttl: 30, reason: "buffer",
		pathways: ps(a5, b5, c5), out: defaultOutputs},
	// Two pathways, b's records 99% of a's: J_b = 5 × (29 700 000 +
	// 14 850 000) = 222 750 000 < J_a = 225 000 000, so w = b. c = a, T =
	// 9 000 000 (tier 2 > F), B = 20 000: steps 1 to 4 do not apply. Step 5:
	// b beats a only if J_b × D_a × 1 050 000 < J_a × D_b × 1 000 000, and
	// 222 750 000 × 1 050 000 = 233 887 500 000 000 is not below
	// 225 000 000 × 1 000 000: hold a. TTL ttl_s.
	"hysteresis holds": {session: sess("07"), priority: ids("a", "b"), ttl: 300, reason: "hold",
		pathways: ps(a5, fig("b", 2, "222750000", "5000000000", within)), out: defaultOutputs},
	// A period later the window is [4P, 9P), and from period 8 b's records
	// are half a's: J_b = 4 × 44 550 000 + (15 000 000 + 7 500 000) =
	// 200 700 000; 200 700 000 × 1 050 000 = 210 735 000 000 000 <
	// 225 000 000 000 000, so b beats a: rank, b.
	"hysteresis moves a period later": {session: sess("07"), priority: ids("b", "a"), ttl: 300, reason: "rank",
		pathways: ps(a5, fig("b", 2, "200700000", "5000000000", within)), out: defaultOutputs},
	// Each clone has one edge hop (10^9 bytes a period): a-clone 10 000 000
	// µJ a period, b-host 50 000 000, c-params 60 000 000, so J = 50 000 000,
	// 250 000 000, 300 000 000. By J: a-clone, b, a, b-host, then c and
	// c-params tie at 300 000 000 and §6.2 step 3 puts "c" before
	// "c-params". PATHWAY-CLONES lists every clone in the policy's order,
	// HOST then PARAMS, a `,` between them only when both are written
	// (§8.1).
	"pathway clones": {session: sess("08"), priority: ids("a-clone", "b", "a", "b-host", "c", "c-params"), ttl: 300, reason: "rank",
		pathways: ps(a5, b5, c5,
			fig("a-clone", 2, "50000000", "5000000000", within),
			fig("b-host", 2, "250000000", "5000000000", within),
			fig("c-params", 2, "300000000", "5000000000", within)),
		out: defaultOutputs,
		clones: `"PATHWAY-CLONES":[` +
			`{"BASE-ID":"a","ID":"a-clone","URI-REPLACEMENT":{"HOST":"edge2.example","PARAMS":{"cdn":"two","tok":"x%20y"}}},` +
			`{"BASE-ID":"b","ID":"b-host","URI-REPLACEMENT":{"HOST":"edge3.example"}},` +
			`{"BASE-ID":"c","ID":"c-params","URI-REPLACEMENT":{"PARAMS":{"via":"c"}}}],`},
	// a's interior hop unmetered; min shares a 100 000, b 0, c 300 000, so
	// the bands are a [0, 100 000), b empty, c [100 000, 400 000) (§6.3). A
	// draw in c's band: step 4 places c (share), then b, then a (no figure).
	"session placed by its band": {band: [2]uint32{100_000, 400_000}, priority: ids("c", "b", "a"), ttl: 300, reason: "share",
		pathways: ps(none("a", "unmetered", within), b5, c5), out: defaultOutputs},
	// The same policy, a draw in no band (at or above 400 000): rank, b; a
	// has no figure and comes last.
	"session outside the bands, unmetered last": {band: [2]uint32{400_000, 1_000_000}, priority: ids("b", "c", "a"), ttl: 300, reason: "rank",
		pathways: ps(none("a", "unmetered", within), b5, c5), out: defaultOutputs},
	// Loads 12, 40, 3; b's capacity 40: its load is not below it and b is
	// not c (no report), so capacity fails; c's latency 800 ms is above the
	// ceiling. The order is b, a, c, and a is the first within the limits:
	// rank, a; no other is within, so then b, c in the order.
	"pathway at its capacity and one past the latency ceiling": {session: sess("09"), priority: ids("a", "b", "c"), ttl: 300, reason: "rank",
		pathways: ps(a5, fig("b", 2, "150000000", "5000000000", atItsFull), fig("c", 2, "300000000", "5000000000", slow)),
		out:      defaultOutputs},
	// The same with c = b, T = 9 000 000, B = 20 000: b is c and its load 40
	// ≤ 40, so within (§6.1). w = b = c: step 5 does not apply; rank, b;
	// then a (within), then c.
	"client on the pathway at its capacity": {session: sess("0a"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a5, b5, fig("c", 2, "300000000", "5000000000", slow)), out: defaultOutputs},
	// Basis 2: D is subscriber_us[1..7] of the edge hops (F = 1), a period:
	// a 50 000 000 + 90 000 000, b 10 000 000 + 20 000 000, c 60 000 000; ×5:
	// 700 000 000, 150 000 000, 300 000 000. a's J/D is lowest; J_b × D_c =
	// 150 000 000 × 300 000 000 = J_c × D_b, so §6.2 step 3: b before c.
	"per-second basis": {session: sess("0b"), priority: ids("a", "b", "c"), ttl: 300, reason: "rank",
		pathways: ps(fig("a", 2, "225000000", "700000000", within), fig("b", 2, "150000000", "150000000", within),
			fig("c", 2, "300000000", "300000000", within)),
		out: defaultOutputs},
	// c = b, T = 5 000 000 (tier 2 > F): w = b = c, rank. server_uri
	// https://steer.example/v1/steer?room=1&x=2 (its & written &amp; in the
	// element), queryBeforeStart true (flags 1); reload_uri
	// https://steer.example/v1/steer?room=1 holds a ?, so &wai_session=.
	"DASH": {session: sess("0c"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a5, b5, c5),
		out: outputs{
			reload:    "https://steer.example/v1/steer?room=1&wai_session=",
			decisions: defaultOutputs.decisions,
			hls:       `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer?room=1&x=2",PATHWAY-ID="a"`,
			dash:      `<ContentSteering defaultServiceLocation="a" queryBeforeStart="true">https://steer.example/v1/steer?room=1&amp;x=2</ContentSteering>`,
		}},
	// Every latency 900 ms: none within the limits. c = c, B and T absent:
	// steps 1 and 2 do not apply; step 3 keeps c (none), then b, a in the
	// order. TTL min_ttl_s.
	"no pathway within the limits": {session: sess("0d"), priority: ids("c", "b", "a"), ttl: 30, reason: "none",
		pathways: ps(fig("a", 2, "225000000", "5000000000", slow), fig("b", 2, "150000000", "5000000000", slow),
			fig("c", 2, "300000000", "5000000000", slow)),
		out: defaultOutputs},
	// b's interior hop OnChipCounter beside its ModelBased edge hop: mixed
	// (§5.3 step 3), no figure.
	"hops of two classes in one pathway": {session: sess("0e"), priority: ids("a", "c", "b"), ttl: 300, reason: "rank",
		pathways: ps(a5, none("b", "mixed", within), c5), out: defaultOutputs},
	// b's edge hop sends no media bytes: D = 0, empty (§5.3 step 4).
	"empty pathway": {session: sess("0f"), priority: ids("a", "c", "b"), ttl: 300, reason: "rank",
		pathways: ps(a5, none("b", "empty", within), c5), out: defaultOutputs},

	// W = 2P: rank, b (60 000 000 lowest).
	"base of the refused vectors": {session: sess("40"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a2, b2, c2), out: defaultOutputs},
	"no manifest given": {session: sess("40"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a2, b2, c2), out: defaultOutputs},
	"records in reverse order, beside records not named": {session: sess("40"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a2, b2, c2), out: defaultOutputs},
	"a record given twice, the first used": {session: sess("40"), priority: ids("b", "a", "c"), ttl: 300, reason: "rank",
		pathways: ps(a2, b2, c2), out: defaultOutputs},
	// No key log: no record is named and every hop is uncovered, so every
	// pathway is stale, rank 4. c = b; w = a (by id); b is not w, has its
	// rank, and that rank is 4: hold b (step 5). Then a, c by id.
	"room with no origin: no figure, client held": {session: sess("50"), priority: ids("b", "a", "c"), ttl: 300, reason: "hold",
		pathways: ps(none("a", "stale", within), none("b", "stale", within), none("c", "stale", within)), out: defaultOutputs},
	"room with no origin: a key log head given is not read": {session: sess("50"), priority: ids("b", "a", "c"), ttl: 300, reason: "hold",
		pathways: ps(none("a", "stale", within), none("b", "stale", within), none("c", "stale", within)), out: defaultOutputs},
	// W = 2P; a's interior hop unmetered, b's OnChipCounter beside
	// ModelBased: c alone has a figure (J = 2 × 60 000 000). c = b, B = 1 000
	// < 4 000: step 1 holds b (buffer) though it has no figure; then c, then
	// a (rank 4, by id). TTL min_ttl_s.
	"client with a short buffer held on a pathway with no figure": {session: sess("41"), priority: ids("b", "c", "a"), ttl: 30, reason: "buffer",
		pathways: ps(none("a", "unmetered", within), none("b", "mixed", within), c2), out: defaultOutputs},
	// The default figures under ids CDN-A, cdn_b.2, edge.c, all Estimator
	// (3). c = edge.c, T = 6 000 000 (tier 2 > F); w = cdn_b.2, which beats
	// edge.c: 150 000 000 × 1 050 000 < 300 000 000 × 1 000 000 (D equal):
	// rank. initial is 1, cdn_b.2; server_uri ...?room=ids&v=2, reload_uri
	// ...?room=ids (so &wai_session=).
	"ids of every allowed character, Estimator figures, DASH": {session: sess("10"), priority: ids("cdn_b.2", "CDN-A", "edge.c"), ttl: 300, reason: "rank",
		pathways: ps(fig("CDN-A", 3, "225000000", "5000000000", within), fig("cdn_b.2", 3, "150000000", "5000000000", within),
			fig("edge.c", 3, "300000000", "5000000000", within)),
		out: outputs{
			reload:    "https://steer.example/v1/steer?room=ids&wai_session=",
			decisions: defaultOutputs.decisions,
			hls:       `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer?room=ids&v=2",PATHWAY-ID="cdn_b.2"`,
			dash:      `<ContentSteering defaultServiceLocation="cdn_b.2" queryBeforeStart="false">https://steer.example/v1/steer?room=ids&amp;v=2</ContentSteering>`,
		}},
}

// manifestByHand is §8.1's manifest: members in its order, no white space,
// the ids in the priority's order in double quotes, PATHWAY-CLONES only
// when the policy has a clone.
func manifestByHand(h byHand, session, digest string) string {
	return `{"VERSION":1,"TTL":` + itoa(h.ttl) + `,"RELOAD-URI":"` + h.out.reload + session + `",` +
		`"PATHWAY-PRIORITY":["` + strings.Join(h.priority, `","`) + `"],` + h.clones +
		`"science.transaction.wai-decision":"` + h.out.decisions + digest + `"}`
}

// itoa writes v in decimal digits with no leading zero (§8.1's <ttl>).
func itoa(v uint32) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		if v /= 10; v == 0 {
			return string(b)
		}
	}
}

// wantFacts is the facts by hand of vector v.
func wantFacts(t *testing.T, v *Vector, h byHand) *verify.Facts {
	t.Helper()
	digest := digestOf(v.Decision)
	session := h.session
	if session == "" {
		// Found by its band: the draw, computed here, is in it.
		session = sessionOf(v.Decision)
		if d := drawOf(v.Policy, v.Decision); d < h.band[0] || d >= h.band[1] {
			t.Errorf("%q: the draw %d is not in [%d, %d)", v.Name, d, h.band[0], h.band[1])
		}
	}
	return &verify.Facts{
		Digest: digest, Priority: h.priority, TTL: h.ttl, Reason: h.reason, Pathways: h.pathways,
		Manifest:  manifestByHand(h, session, digest),
		RecordURI: h.out.decisions + digest,
		HLSTag:    h.out.hls, DASHElement: h.out.dash,
	}
}

// TestFactsByHand: every accepted vector of the corpus states the facts of
// §9.3 worked out by hand from its scenario and the text (acceptedByHand),
// not read back from the verifier: the digest computed here from the
// decision's bytes (§7.3), the priority, TTL and reason (§6.4, §6.5), each
// pathway's status, class, J, D and limits (§5, §6.1), the manifest byte for
// byte (§8.1), the record's URI (§8.4), the HLS tag (§8.2) and the DASH
// element (§8.3). An accepted vector with no hand-written facts fails, so
// none can be added unchecked.
func TestFactsByHand(t *testing.T) {
	f := committed(t)
	seen := map[string]bool{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		if v.Outcome != Accept {
			continue
		}
		seen[v.Name] = true
		h, ok := acceptedByHand[v.Name]
		if !ok {
			t.Errorf("%q: accepted, with no facts worked out by hand", v.Name)
			continue
		}
		want := wantFacts(t, v, h)
		if diffs := compareFacts(v.Facts, want); diffs != nil {
			t.Errorf("%q, by hand:\n%s", v.Name, strings.Join(diffs, "\n"))
		}
		// The manifest served, when one is, is §8.1's (step 7).
		if v.Manifest != nil && string(v.Manifest) != want.Manifest {
			t.Errorf("%q: the manifest served is not the one by hand", v.Name)
		}
	}
	for name := range acceptedByHand {
		if !seen[name] {
			t.Errorf("%q: worked out by hand, not an accepted vector of the corpus", name)
		}
	}
}

// TestFactsByHandCatch: the comparison TestFactsByHand makes fails when one
// fact differs from the hand's, for each fact (a test that could not fail
// would check nothing).
func TestFactsByHandCatch(t *testing.T) {
	v := vectorNamed(t, committed(t), "pathway clones")
	want := *wantFacts(t, v, acceptedByHand[v.Name])
	if diffs := compareFacts(v.Facts, &want); diffs != nil {
		t.Fatalf("the vector itself differs: %v", diffs)
	}
	edits := map[string]func(x *verify.Facts){
		"digest":   func(x *verify.Facts) { x.Digest = digestOf(bytes.Repeat([]byte{1}, 100)) },
		"priority": func(x *verify.Facts) { x.Priority = slices.Clone(x.Priority); slices.Reverse(x.Priority) },
		"ttl":      func(x *verify.Facts) { x.TTL = 30 },
		"reason":   func(x *verify.Facts) { x.Reason = "hold" },
		"joules": func(x *verify.Facts) {
			x.Pathways = slices.Clone(x.Pathways)
			x.Pathways[3].Joules = "50000001"
		},
		"limits": func(x *verify.Facts) {
			x.Pathways = slices.Clone(x.Pathways)
			x.Pathways[0].Limits.Capacity = false
		},
		"manifest":     func(x *verify.Facts) { x.Manifest = strings.Replace(x.Manifest, `"HOST"`, `"host"`, 1) },
		"record_uri":   func(x *verify.Facts) { x.RecordURI += "/" },
		"hls_tag":      func(x *verify.Facts) { x.HLSTag = strings.Replace(x.HLSTag, `"a"`, `"b"`, 1) },
		"dash_element": func(x *verify.Facts) { x.DASHElement = strings.Replace(x.DASHElement, "false", "true", 1) },
	}
	for what, edit := range edits {
		w := want
		edit(&w)
		if compareFacts(v.Facts, &w) == nil {
			t.Errorf("a changed %s goes unnoticed", what)
		}
	}
}
