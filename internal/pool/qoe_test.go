package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/report/qoe"
)

// TestQoEDefaults: [steering.qoe] with only a fraction reads the seed's
// 60 s window, 30 sessions, a margin of 0.2, a 60 s hold, a probe share of
// 0.2 and a 30 s short TTL; with a pool TTL below 30 s, the short TTL is the pool's.
func TestQoEDefaults(t *testing.T) {
	_, v := decodeFile(t, "[steering]\n[steering.qoe]\nfraction = 0.5\n")
	c, ps := Read(v.Steering, false)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	want := QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Fraction: 0.5, Margin: 0.2, Hold: time.Minute, ProbeShare: 0.2}, ShortTTL: 30}
	if c.QoE == nil || *c.QoE != want {
		t.Fatalf("read %+v, want %+v", c.QoE, want)
	}
	_, v = decodeFile(t, "[steering]\nttl_s = 20\n[steering.qoe]\nlowest_bps = 800000\n")
	c, ps = Read(v.Steering, false)
	if len(ps) > 0 || c.QoE.ShortTTL != 20 || c.QoE.Lowest != 800_000 {
		t.Fatalf("read %+v, %v", c.QoE, ps)
	}
	if a, err := c.Aggregator(); a != nil || err != nil {
		t.Errorf("a pool with the per-client rule alone has an aggregator %v, %v", a, err)
	}
}

// partitioned is order with the pathways of bad moved behind the others,
// each part in its order: the issue's "moves behind the other healthy
// pathways", written out by hand.
func partitioned(order []string, bad ...string) []string {
	var good, tail []string
	for _, id := range order {
		if slices.Contains(bad, id) {
			tail = append(tail, id)
		} else {
			good = append(good, id)
		}
	}
	return append(good, tail...)
}

// TestSetBehind: a cohort's QoE moves put its degraded pathways behind the
// other listed edges, with the short TTL, for that cohort's sessions only;
// another cohort's sessions keep their order and the TTL; a move survives
// a change of health; clearing the moves gives every order back.
func TestSetBehind(t *testing.T) {
	c := config("a", 1, "b", 1, "c", 1, "d", 0)
	c.CohortHeader = "X-Region"
	c.QoE = &QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Fraction: 0.5, Margin: 0.2, Hold: time.Minute}, ShortTTL: 30}
	p := newPool(t, c)
	req := func(s Session, cohort string) (manifest, string) {
		r := &Request{RawQuery: "session=" + s.String(), Cohort: cohort, Base: "https://steer.example"}
		b, _, _ := p.Steer(nil, r)
		m := decode(t, b)
		if m.TTL != r.TTL {
			t.Fatalf("the manifest states TTL %d, the request was told %d", m.TTL, r.TTL)
		}
		return m, cohort
	}
	const n = 200
	before := map[string][][]string{}
	for _, cohort := range []string{"fra", "par", ""} {
		for i := range n {
			m, _ := req(refSession(t, testKey, uint64(i), 0), cohort)
			if m.TTL != 300 {
				t.Fatalf("TTL %d before any move", m.TTL)
			}
			before[cohort] = append(before[cohort], m.Priority)
		}
	}
	p.SetBehind(map[string]qoe.Moved{"fra": {Behind: []string{"a", "zz"}}})
	check := func(what string, cohort string, ttl int, bad ...string) {
		t.Helper()
		for i := range n {
			m, _ := req(refSession(t, testKey, uint64(i), 0), cohort)
			want := partitioned(before[cohort][i], bad...)
			if !slices.Equal(m.Priority, want) || m.TTL != ttl {
				t.Fatalf("%s: cohort %q session %d: %q TTL %d, want %q TTL %d", what, cohort, i, m.Priority, m.TTL, want, ttl)
			}
		}
	}
	check("a behind for fra", "fra", 30, "a")
	check("par untouched", "par", 300)
	check("no cohort untouched", "", 300)

	// Health rebuilds the state; the move is kept. With b down, the
	// orders are the ones before less b.
	p.SetUp("b", false)
	for i := range n {
		m, _ := req(refSession(t, testKey, uint64(i), 0), "fra")
		want := partitioned(without(before["fra"][i], "b"), "a")
		if !slices.Equal(m.Priority, want) || m.TTL != 30 {
			t.Fatalf("after b down: %q TTL %d, want %q", m.Priority, m.TTL, want)
		}
	}
	p.SetUp("b", true)

	// The sessions without a cohort are the cohort "".
	p.SetBehind(map[string]qoe.Moved{"": {Behind: []string{"b", "c"}}})
	check("b and c behind for no cohort", "", 30, "b", "c")
	check("fra back", "fra", 300)

	// Every listed edge degraded: the order stays as it was.
	p.SetBehind(map[string]qoe.Moved{"par": {Behind: []string{"a", "b", "c", "d"}}})
	check("all behind", "par", 30)
	p.SetBehind(nil)
	check("cleared", "par", 300)

	// Probing: a is behind but for the probe share (0.2 of the sessions:
	// those whose first byte is below 51.2, by the qoe package's text),
	// whose orders keep it where it was; b stays behind for every session.
	p.SetBehind(map[string]qoe.Moved{"fra": {Behind: []string{"a", "b"}, Probing: []string{"a"}}})
	probed := 0
	for i := range n {
		s := refSession(t, testKey, uint64(i), 0)
		m, _ := req(s, "fra")
		want := partitioned(before["fra"][i], "a", "b")
		if s[0] <= 51 {
			want = partitioned(before["fra"][i], "b")
			probed++
		}
		if !slices.Equal(m.Priority, want) || m.TTL != 30 {
			t.Fatalf("probing a: session %d (first byte %d): %q TTL %d, want %q", i, s[0], m.Priority, m.TTL, want)
		}
	}
	if probed < n/10 || probed > n*3/10 {
		t.Errorf("%d of %d sessions probed, want about a fifth", probed, n)
	}
}

// TestAway: the per-client rule's request (Request.Away) puts the client's
// pathway behind the others and gives the short TTL; an unknown pathway,
// or a pool without QoE, changes nothing.
func TestAway(t *testing.T) {
	c := config("a", 1, "b", 1, "c", 1)
	c.QoE = &QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Hold: time.Minute, Margin: 0.2}, ShortTTL: 15, Lowest: 800_000}
	p := newPool(t, c)
	plain := newPool(t, config("a", 1, "b", 1, "c", 1))
	for i := range 300 {
		s := refSession(t, testKey, uint64(i), 0)
		q := "session=" + s.String()
		b, _, _ := p.Steer(nil, &Request{RawQuery: q, Base: "https://steer.example"})
		base := decode(t, b).Priority
		away := base[0]
		r := &Request{RawQuery: q, Base: "https://steer.example", Away: away}
		b, _, _ = p.Steer(nil, r)
		m := decode(t, b)
		if want := append(slices.Clone(base[1:]), away); !slices.Equal(m.Priority, want) || m.TTL != 15 || r.TTL != 15 {
			t.Fatalf("away from %s: %q TTL %d, want %q TTL 15", away, m.Priority, m.TTL, want)
		}
		b, _, _ = p.Steer(nil, &Request{RawQuery: q, Base: "https://steer.example", Away: "zz"})
		if m := decode(t, b); !slices.Equal(m.Priority, base) || m.TTL != 300 {
			t.Fatalf("away from an unknown pathway: %q TTL %d", m.Priority, m.TTL)
		}
		b, _, _ = plain.Steer(nil, &Request{RawQuery: q, Base: "https://steer.example", Away: away})
		if m := decode(t, b); !slices.Equal(m.Priority, base) || m.TTL != 300 {
			t.Fatalf("a pool without QoE moved: %q TTL %d", m.Priority, m.TTL)
		}
	}
}
