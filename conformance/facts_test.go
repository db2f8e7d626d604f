package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// TestFactsByHand: facts of accepted vectors worked out by hand from the
// text, not from the code: J and D from the scenario's per-period figures
// over the window's five periods (§5.1, §5.3), the manifest byte for byte
// (§8.1), the record's URI (§8.4), the HLS tag (§8.2) and the DASH element
// (§8.3).
func TestFactsByHand(t *testing.T) {
	f := committed(t)

	// Three pathways, one class: per period a spends 30 000 000 + 15 000 000
	// µJ, b 20 000 000 + 10 000 000 and c 40 000 000 + 20 000 000; each edge
	// hop sends 10^9 media bytes. The window [3P, 8P) holds five periods.
	v := vectorNamed(t, f, "three pathways, one class")
	d := digestOf(v.Decision)
	want := &verify.Facts{
		Digest: d, Priority: []string{"b", "a", "c"}, TTL: 300, Reason: "rank",
		Pathways: []verify.PathwayFacts{
			{ID: "a", Status: "figure", Class: 2, Joules: "225000000", Delivery: "5000000000", Limits: verify.Limits{Latency: true, Quality: true, Capacity: true}},
			{ID: "b", Status: "figure", Class: 2, Joules: "150000000", Delivery: "5000000000", Limits: verify.Limits{Latency: true, Quality: true, Capacity: true}},
			{ID: "c", Status: "figure", Class: 2, Joules: "300000000", Delivery: "5000000000", Limits: verify.Limits{Latency: true, Quality: true, Capacity: true}},
		},
		Manifest: `{"VERSION":1,"TTL":300,"RELOAD-URI":"https://steer.example/v1/steer?wai_session=010000000000000000000000000000` + `5a",` +
			`"PATHWAY-PRIORITY":["b","a","c"],"science.transaction.wai-decision":"https://steer.example/v1/decisions/` + d + `"}`,
		RecordURI:   "https://steer.example/v1/decisions/" + d,
		HLSTag:      `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer",PATHWAY-ID="a"`,
		DASHElement: `<ContentSteering defaultServiceLocation="a" queryBeforeStart="false">https://steer.example/v1/steer</ContentSteering>`,
	}
	if diffs := compareFacts(v.Facts, want); diffs != nil {
		t.Errorf("%s:\n%s", v.Name, strings.Join(diffs, "\n"))
	}
	if string(v.Manifest) != want.Manifest {
		t.Errorf("%s: the manifest served is not §8.1's", v.Name)
	}

	// Clones: every clone in the policy's order, HOST then PARAMS, a `,`
	// between them only when both are written (§8.1).
	v = vectorNamed(t, f, "pathway clones")
	d = digestOf(v.Decision)
	if got, want := v.Facts.Manifest, `{"VERSION":1,"TTL":300,"RELOAD-URI":"https://steer.example/v1/steer?wai_session=080000000000000000000000000000`+`5a",`+
		`"PATHWAY-PRIORITY":["a-clone","b","a","b-host","c","c-params"],"PATHWAY-CLONES":[`+
		`{"BASE-ID":"a","ID":"a-clone","URI-REPLACEMENT":{"HOST":"edge2.example","PARAMS":{"cdn":"two","tok":"x%20y"}}},`+
		`{"BASE-ID":"b","ID":"b-host","URI-REPLACEMENT":{"HOST":"edge3.example"}},`+
		`{"BASE-ID":"c","ID":"c-params","URI-REPLACEMENT":{"PARAMS":{"via":"c"}}}],`+
		`"science.transaction.wai-decision":"https://steer.example/v1/decisions/`+d+`"}`; got != want {
		t.Errorf("clones: manifest\n%s\nby hand\n%s", got, want)
	}

	// DASH: queryBeforeStart, an & of the server URI written &amp; in the
	// element and as it is in the tag; a reload URI with a ? takes &.
	v = vectorNamed(t, f, "DASH")
	d = digestOf(v.Decision)
	if got := v.Facts.DASHElement; got != `<ContentSteering defaultServiceLocation="a" queryBeforeStart="true">https://steer.example/v1/steer?room=1&amp;x=2</ContentSteering>` {
		t.Errorf("DASH: element %s", got)
	}
	if got := v.Facts.HLSTag; got != `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer?room=1&x=2",PATHWAY-ID="a"` {
		t.Errorf("DASH: tag %s", got)
	}
	if got := v.Facts.Manifest; !strings.HasPrefix(got, `{"VERSION":1,"TTL":300,"RELOAD-URI":"https://steer.example/v1/steer?room=1&wai_session=0c0000000000000000000000000000`+`5a","PATHWAY-PRIORITY":["b","a","c"],`) {
		t.Errorf("DASH: manifest %s", got)
	}

	// The per-second basis: D is subscriber_us[F..7] of the edge hops, F = 1:
	// a (50 + 90) × 10^6 µs per period, b (10 + 20) × 10^6, c 60 × 10^6.
	v = vectorNamed(t, f, "per-second basis")
	for i, jd := range [][2]string{{"225000000", "700000000"}, {"150000000", "150000000"}, {"300000000", "300000000"}} {
		p := v.Facts.Pathways[i]
		if p.Joules != jd[0] || p.Delivery != jd[1] {
			t.Errorf("per-second basis: pathway %s J %s D %s, by hand %s %s", p.ID, p.Joules, p.Delivery, jd[0], jd[1])
		}
	}

	// Ids: the initial pathway is index 1, cdn_b.2 (§8.2, §8.3).
	v = vectorNamed(t, f, "ids of every allowed character, Estimator figures, DASH")
	if got := v.Facts.HLSTag; got != `#EXT-X-CONTENT-STEERING:SERVER-URI="https://steer.example/v1/steer?room=ids&v=2",PATHWAY-ID="cdn_b.2"` {
		t.Errorf("ids: tag %s", got)
	}
	if got := v.Facts.DASHElement; got != `<ContentSteering defaultServiceLocation="cdn_b.2" queryBeforeStart="false">https://steer.example/v1/steer?room=ids&amp;v=2</ContentSteering>` {
		t.Errorf("ids: element %s", got)
	}

	// Every accepted vector: the digest is SHA-256 of the decision's bytes
	// before sig, the record's URI and the manifest name it (§8.4).
	for _, v := range f.Vectors {
		if v.Outcome != Accept {
			continue
		}
		d := digestOf(v.Decision)
		if v.Facts.Digest != d || !strings.HasSuffix(v.Facts.RecordURI, d) || !strings.HasSuffix(v.Facts.Manifest, "/"+d+`"}`) {
			t.Errorf("%s: digest %s, record URI %s; SHA-256 gives %s", v.Name, v.Facts.Digest, v.Facts.RecordURI, d)
		}
		if v.Manifest != nil && string(v.Manifest) != v.Facts.Manifest {
			t.Errorf("%s: the manifest served is not the one the facts state", v.Name)
		}
	}
}

// extraByHand is what each vector of Extra is built to show: the reason of
// §6.4 and the priority of §6.5.
var extraByHand = map[string]struct{ reason, priority string }{
	"base of the refused vectors":                        {"rank", "[b a c]"}, // b's figure lowest (§6.2)
	"no manifest given":                                  {"rank", "[b a c]"},
	"records in reverse order, beside records not named": {"rank", "[b a c]"},
	"a record given twice, the first used":               {"rank", "[b a c]"},
	// No key log: no hop signs, so no figure; the client on b stays, b
	// having a's rank 4 (§6.4 step 5); then the others by id.
	"room with no origin: no figure, client held":           {"hold", "[b a c]"},
	"room with no origin: a key log head given is not read": {"hold", "[b a c]"},
	// All three Estimator: cdn_b.2's figure is lowest, and beats edge.c's
	// (the client's) by more than the margin.
	"ids of every allowed character, Estimator figures, DASH": {"rank", "[cdn_b.2 CDN-A edge.c]"},
}

// TestExtraByHand: the accepted vectors beyond §11's list give the reason
// and priority they were built for.
func TestExtraByHand(t *testing.T) {
	cases := Extra()
	if len(cases) != len(extraByHand) {
		t.Errorf("%d extra cases, %d worked out by hand", len(cases), len(extraByHand))
	}
	for _, c := range cases {
		facts, err := verify.Verify(c.Input())
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		want, ok := extraByHand[c.Name]
		if got := fmt.Sprint(facts.Priority); !ok || facts.Reason != want.reason || got != want.priority {
			t.Errorf("%s: reason %s, priority %s; by hand %s, %s", c.Name, facts.Reason, got, want.reason, want.priority)
		}
	}
}
