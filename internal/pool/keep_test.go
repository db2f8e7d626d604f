package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/report/qoe"
)

// TestFirstAnswerKeepsReported: a session's first answer keeps first the
// pathway its player reports being on while that edge is listed, the other
// edges after it in the session's own order, with a TTL of at most
// KeepTTL; the session's next answer is its own order with the pool's TTL.
// Issue 28 ("hls.js through the front"): hls.js 1.7.4 stalls for good
// when its first steering answer moves it to another pathway while a
// fragment is loading (its stream controller drops the fragment against
// the new pathway's level, whose playlist is not loaded yet, and stays in
// FRAG_LOADING; conformance/players/README.md), and its first request
// reports, in _HLS_pathway, the pathway its playlist named.
func TestFirstAnswerKeepsReported(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 1, "c", 1))
	moved := 0
	for i := range 300 {
		// The session's own order: its answer once the session is kept.
		s := refSession(t, testKey, uint64(i), 0)
		own, _, _ := steer(t, p, "session="+s.String())
		if own.TTL != 300 {
			t.Fatalf("a kept session's TTL %d, want the pool's 300", own.TTL)
		}
		for _, id := range own.Priority {
			// A first request carries no session: the pool mints one, so
			// the order is the new session's, read from its next answer.
			r := &Request{RawQuery: "_HLS_pathway=" + id + "&_HLS_throughput=500000", Base: "https://steer.example", Reported: id}
			b, first, ns := p.Steer(nil, r)
			m := decode(t, b)
			next, _, _ := steer(t, p, "session="+ns.String()+"&_HLS_pathway="+id)
			want := append([]string{id}, slices.DeleteFunc(slices.Clone(next.Priority), func(x string) bool { return x == id })...)
			if !slices.Equal(m.Priority, want) || p.Config().Edges[first].Pathway != id {
				t.Fatalf("first answer reporting %s: %q (first %d), want %q (the session's order %q)", id, m.Priority, first, want, next.Priority)
			}
			wantTTL := 300
			if next.Priority[0] != id {
				wantTTL = KeepTTL
				moved++
			}
			if m.TTL != wantTTL || r.TTL != wantTTL {
				t.Fatalf("first answer reporting %s (the session's first %s): TTL %d (Request %d), want %d", id, next.Priority[0], m.TTL, r.TTL, wantTTL)
			}
			// Later answers: the session's own order, even reporting another.
			later := &Request{RawQuery: "session=" + ns.String() + "&_HLS_pathway=" + id, Base: "https://steer.example", Reported: id}
			b, _, _ = p.Steer(nil, later)
			if m := decode(t, b); !slices.Equal(m.Priority, next.Priority) || m.TTL != 300 {
				t.Fatalf("a later answer reporting %s: %q TTL %d, want the session's %q TTL 300", id, m.Priority, m.TTL, next.Priority)
			}
		}
	}
	if moved < 300 {
		t.Errorf("only %d first answers kept a pathway that was not the session's first", moved)
	}
}

// TestFirstAnswerKeepsOnlyListed: a reported pathway that is down, or not
// an edge of the pool, changes nothing; a pool whose ttl_s is below
// KeepTTL keeps its own; the per-client rule's move (Away) still puts the
// reported pathway behind.
func TestFirstAnswerKeepsOnlyListed(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 1, "c", 1))
	p.SetUp("a", false)
	for range 100 {
		for _, id := range []string{"a", "zz"} {
			b, _, s := p.Steer(nil, &Request{Base: "https://steer.example", Reported: id})
			m := decode(t, b)
			next, _, _ := steer(t, p, "session="+s.String())
			if !slices.Equal(m.Priority, next.Priority) || m.TTL != 300 || slices.Contains(m.Priority, "a") {
				t.Fatalf("reporting %s (down or unknown): %q TTL %d, want the session's %q TTL 300", id, m.Priority, m.TTL, next.Priority)
			}
		}
	}

	c := config("a", 1, "b", 1, "c", 1)
	c.TTL = 4
	short := newPool(t, c)
	for range 100 {
		b, _, _ := short.Steer(nil, &Request{Base: "https://steer.example", Reported: "c"})
		if m := decode(t, b); m.Priority[0] != "c" || m.TTL != 4 {
			t.Fatalf("ttl_s 4, reporting c: %q TTL %d, want c first, TTL 4", m.Priority, m.TTL)
		}
	}

	c = config("a", 1, "b", 1, "c", 1)
	c.QoE = &QoE{Config: qoe.Config{Window: time.Minute, MinSessions: 30, Hold: time.Minute, Margin: 0.2}, ShortTTL: 5, Lowest: 800_000}
	q := newPool(t, c)
	for range 100 {
		b, _, _ := q.Steer(nil, &Request{Base: "https://steer.example", Reported: "b", Away: "b"})
		if m := decode(t, b); m.Priority[2] != "b" || m.TTL != 5 {
			t.Fatalf("reporting b, moved off it: %q TTL %d, want b last, TTL 5", m.Priority, m.TTL)
		}
	}
}

// TestFirstAnswerKeepsBase: a pool whose edges are all clones of
// clone_from (the station seed's "."; the front's tag names it as
// PATHWAY-ID) keeps a new session that reports clone_from on it: the
// manifest names it first, then the session's order of the edges, with a
// TTL of at most KeepTTL; Steer's first is the first edge. A reported
// pathway that is neither an edge nor clone_from changes nothing, and
// clone_from that is an edge is kept as an edge. Issue 28: hls.js through
// a station's front starts on clone_from and stalls when its first answer
// moves it while it loads (TestFirstAnswerKeepsReported).
func TestFirstAnswerKeepsBase(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 1, "c", 1)) // clone_from "."
	for range 100 {
		b, first, s := p.Steer(nil, &Request{Base: "https://steer.example", Reported: "."})
		m := decode(t, b)
		own, _, _ := steer(t, p, "session="+s.String())
		want := append([]string{"."}, own.Priority...)
		if !slices.Equal(m.Priority, want) || m.TTL != KeepTTL || p.Config().Edges[first].Pathway != own.Priority[0] {
			t.Fatalf("reporting clone_from: %q TTL %d (first %d), want %q TTL %d", m.Priority, m.TTL, first, want, KeepTTL)
		}
		if len(m.Clones) != 3 {
			t.Fatalf("%d clones, want the 3 edges'", len(m.Clones))
		}
		later, _, _ := p.Steer(nil, &Request{RawQuery: "session=" + s.String(), Base: "https://steer.example", Reported: "."})
		if lm := decode(t, later); !slices.Equal(lm.Priority, own.Priority) || lm.TTL != 300 {
			t.Fatalf("a later answer reporting clone_from: %q TTL %d, want %q TTL 300", lm.Priority, lm.TTL, own.Priority)
		}
		b, _, s = p.Steer(nil, &Request{Base: "https://steer.example", Reported: "elsewhere"})
		own, _, _ = steer(t, p, "session="+s.String())
		if m := decode(t, b); !slices.Equal(m.Priority, own.Priority) || m.TTL != 300 {
			t.Fatalf("reporting a pathway of neither: %q TTL %d, want %q TTL 300", m.Priority, m.TTL, own.Priority)
		}
	}
	c := config("a", 1, "b", 1_000_000)
	c.CloneFrom, c.Edges[0].Host = "a", "" // the declared pathway is an edge: kept as an edge, named once
	q := newPool(t, c)
	for range 100 {
		b, _, _ := q.Steer(nil, &Request{Base: "https://steer.example", Reported: "a"})
		if m := decode(t, b); !slices.Equal(m.Priority, []string{"a", "b"}) || m.TTL != KeepTTL {
			t.Fatalf("clone_from an edge, reported: %q TTL %d, want [a b] TTL %d", m.Priority, m.TTL, KeepTTL)
		}
	}
}
