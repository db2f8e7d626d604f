package players

// Issue 29's dashboard items that are not numbers: a poll that keeps what
// the operator opened, focused and scrolled; chart text and scroll hints
// at a width; the glossary and whole digests; and, on a state the demo
// cannot make (its answer patched in the driver), the QoE table's labels,
// "no report", and share bands that show a 10 % share across an interval
// of no decision.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// keepsAcrossPolls opens the timeline's table, scrolls it sideways, scrolls
// the page to it and focuses the first digest's copy button in it, waits
// for three polls, and requires the same table still open, the same button
// focused, the table's box and the page still scrolled (issue 29: "polls
// update in place").
func keepsAcrossPolls(t *testing.T, d *dashDriver, refresh time.Duration) {
	t.Helper()
	var set struct {
		Open, Focused bool
		ScrollLeft    float64
		ScrollY       float64
		Overflows     bool
	}
	d.evalInto(t, `() => {
	  const det = document.querySelector('.room details[data-key="timeline"]');
	  det.open = true;
	  det.__kept = true;
	  const box = det.querySelector('.scroll');
	  box.scrollLeft = 40;
	  const b = det.querySelector('button[data-copy]');
	  b.__kept = true;
	  det.scrollIntoView({block: 'start'});
	  b.focus({preventScroll: true});
	  return {open: det.open, focused: document.activeElement === b, scrollLeft: box.scrollLeft, scrollY: scrollY, overflows: box.scrollWidth > box.clientWidth};
	}`, &set)
	if !set.Open || !set.Focused || set.ScrollY < 100 {
		t.Fatalf("setting up: %+v", set)
	}
	if !set.Overflows || set.ScrollLeft != 40 {
		t.Errorf("the timeline's table does not scroll sideways at this width: %+v", set)
	}
	var at0 string
	d.evalInto(t, `() => document.getElementById('updated').dataset.at`, &at0)
	polls := []string{at0}
	for len(polls) < 4 {
		prev := polls[len(polls)-1]
		d.wait(t, fmt.Sprintf(`() => document.getElementById('updated').dataset.at !== %q`, prev), refresh+5*time.Second)
		var at string
		d.evalInto(t, `() => document.getElementById('updated').dataset.at`, &at)
		polls = append(polls, at)
	}
	var got struct {
		Open, SameDetails, Focused, SameButton bool
		ScrollLeft, ScrollY, Top               float64
	}
	d.evalInto(t, `() => {
	  const det = document.querySelector('.room details[data-key="timeline"]');
	  const b = document.activeElement;
	  return {open: det.open, sameDetails: !!det.__kept, focused: !!(b && b.matches('button[data-copy]') && det.contains(b)), sameButton: !!(b && b.__kept),
	    scrollLeft: det.querySelector('.scroll').scrollLeft, scrollY: scrollY, top: b ? b.getBoundingClientRect().top : -1};
	}`, &got)
	t.Logf("across the polls at %v: %+v (set %+v)", polls[1:], got, set)
	if !got.Open || !got.SameDetails {
		t.Errorf("after three polls the timeline's table is open %v, the same element %v", got.Open, got.SameDetails)
	}
	if !got.Focused || !got.SameButton {
		t.Errorf("after three polls the focus is on the copy button %v, the same one %v", got.Focused, got.SameButton)
	}
	if got.ScrollLeft != set.ScrollLeft {
		t.Errorf("the table's box scrolled %v px, then %v after three polls", set.ScrollLeft, got.ScrollLeft)
	}
	if got.ScrollY < 100 || got.Top < 0 || got.Top > 900 {
		t.Errorf("after three polls the page is scrolled to %v px (from %v) and the focused button at %v px: not in view", got.ScrollY, set.ScrollY, got.Top)
	}
}

// chartText is the smallest chart text as shown, px: its font size times
// its chart's scale.
const chartTextJS = `() => {
  const ts = [...document.querySelectorAll('#board svg.chart text')];
  return {n: ts.length, min: Math.min(...ts.map((e) => parseFloat(getComputedStyle(e).fontSize) * e.getScreenCTM().a))};
}`

// checkWidth, at the page's width now: chart text at least 11 px, and a
// scroll hint shown for each table that scrolls and for none that does not.
func checkWidth(t *testing.T, d *dashDriver, vw int) {
	t.Helper()
	var ct struct {
		N   int
		Min float64
	}
	d.evalInto(t, chartTextJS, &ct)
	t.Logf("at %d px: %d chart labels, the smallest %.1f px", vw, ct.N, ct.Min)
	if ct.N < 10 || ct.Min < 11 {
		t.Errorf("at %d px: %d chart labels, the smallest %.2f px; want at least 11", vw, ct.N, ct.Min)
	}
	var hints []struct {
		Table           string
		Scrolls, Hinted bool
	}
	d.evalInto(t, `() => [...document.querySelectorAll('#board .tablebox')].filter((b) => b.offsetParent).map((b) => {
	  const sc = b.querySelector('.scroll');
	  return {table: b.querySelector('table').dataset.table, scrolls: sc.scrollWidth > sc.clientWidth + 1, hinted: !b.querySelector('.scroll-hint').hidden};
	})`, &hints)
	n := 0
	for _, h := range hints {
		if h.Scrolls != h.Hinted {
			t.Errorf("at %d px the table %s scrolls %v, and says so %v", vw, h.Table, h.Scrolls, h.Hinted)
		}
		if h.Scrolls {
			n++
		}
	}
	t.Logf("at %d px %d of %d tables shown scroll sideways", vw, n, len(hints))
	if vw == 375 && n == 0 {
		t.Errorf("at 375 px no table scrolls sideways: the hints are not tried")
	}
}

// checkTerms: each term issue 29 names has its line in the page's
// glossary; every digest on the board is shown whole (64 hexadecimal
// digits), and a click on a digest's "to inspector" puts it, whole, in the
// inspector's input.
func checkTerms(t *testing.T, d *dashDriver) {
	t.Helper()
	var terms []string
	d.evalInto(t, `() => [...document.querySelectorAll('#glossary dt')].map((e) => e.textContent + ': ' + e.nextElementSibling.textContent)`, &terms)
	for _, w := range []string{"§5.1", "§9.1", "draw", "headroom", "evidence stale", "figure J / D", "p10/p50/p90"} {
		if !slices.ContainsFunc(terms, func(s string) bool {
			term, line, _ := strings.Cut(s, ": ")
			return strings.Contains(term, w) && len(line) > 20
		}) {
			t.Errorf("the glossary has no line on %q: %q", w, terms)
		}
	}
	var digests []string
	d.evalInto(t, `() => [...document.querySelectorAll('#board .digest code')].map((e) => e.textContent)`, &digests)
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, x := range digests {
		if !hex64.MatchString(x) {
			t.Errorf("a digest shown as %q, not whole", x)
		}
	}
	if len(digests) < 3 {
		t.Errorf("%d digests on the board; the room's, its policy's and the hops' keys at least", len(digests))
	}
	var room string
	d.evalInto(t, `() => document.querySelector('.room').dataset.room`, &room)
	d.do(t, "click", map[string]any{"sel": ".room .digest button[data-inspect]"})
	var in struct {
		Value   string
		Focused bool
	}
	d.evalInto(t, `() => ({value: document.getElementById('inspect-input').value, focused: document.activeElement.id === 'inspect-input'})`, &in)
	if in.Value != room || !in.Focused || !hex64.MatchString(room) {
		t.Errorf("after a click on the room digest's \"to inspector\": the input holds %q (focused %v); the room is %q", in.Value, in.Focused, room)
	}
	d.do(t, "eval", map[string]any{"fn": `() => { document.getElementById('inspect-input').value = ''; return null }`})
}

// patchJS changes the server's answer (in the driver) to a state the demo
// cannot make: the room's history gives its first pathway 1 of 10
// decisions, then an interval of no decision, then 1 of 10 again; the
// pool has a QoE view with a cell whose sessions reported a throughput and
// no buffer, and a move, and so has the room (a block the page puts before
// the room's timeline).
const patchJS = `(st) => {
  const r = st.rooms[0], ids = r.status.pathways.map((p) => p.id), t0 = Date.parse(st.at);
  r.history = [[0, 0], [1, 9], [1, 9], [2, 18]].map(([a, b], i) => ({at: new Date(t0 - (3 - i) * 5000).toISOString(), by_reason: {},
    first: Object.fromEntries(ids.map((id, k) => [id, k === 0 ? a : k === 1 ? b : 0])), load: {}, refused: 0}));
  const e = st.pools[0].view.edges.map((x) => x.pathway);
  st.pools[0].view.qoe = {settings: {window_s: 30, min_sessions: 3, floor_bps: 0, fraction: 0.5, margin: 0.1, hold_s: 60, probe_share: 0.1},
    cells: [{pathway: e[0], cohort: 'all', sessions: 4, with_throughput: 4, throughput_bps: [1500000, 2500000, 12000000], with_buffer: 0, buffer_ms: [0, 0, 0], state: 'ok', last_move: null, clients: 4}],
    moves: [{at: st.at, pathway: e[1], cohort: 'all', to: 'behind', median_bps: 1000000, best_bps: 2500000, sessions: 3, reason: 'its median is below half the best'}], ignored: {}};
  r.status.qoe = st.pools[0].view.qoe;
  return st;
}`

// checkPatched (issue 29): on patchJS's state, the tables hold its numbers
// (the QoE cell's buffer "no report", not 0 / 0 / 0), a table open before
// a block appears above it stays open, the QoE columns say
// p10 / p50 / p90 as report/qoe computes them, and the shares chart draws
// the first pathway's 10 % as a band a tenth of the chart high in the
// intervals on both sides of the one of no decision, which is a grey
// column, with no dot.
func checkPatched(t *testing.T, d *dashDriver, loc *time.Location, refresh time.Duration, shot string) {
	t.Helper()
	// The room's timeline table open, before a QoE view appears above it.
	d.do(t, "eval", map[string]any{"fn": `() => { const det = document.querySelector('.room details[data-key="timeline"]'); det.open = true; det.__before = true; return null }`})
	d.do(t, "patch", map[string]any{"fn": patchJS})
	d.wait(t, `() => document.querySelector('.pool table[data-table="qoe-cells"]') && document.querySelector('.room table[data-table="qoe-cells"]')`, refresh+5*time.Second)
	var kept struct{ Open, Same bool }
	d.evalInto(t, `() => { const det = document.querySelector('.room details[data-key="timeline"]'); return {open: det.open, same: !!det.__before} }`, &kept)
	if !kept.Open || !kept.Same {
		t.Errorf("a QoE view appeared above the room's timeline: its table open %v, the same element %v", kept.Open, kept.Same)
	}
	t.Logf("on a patched answer: %v", checkTables(t, d, loc))
	var head []string
	d.evalInto(t, `() => [...document.querySelector('.pool table[data-table="qoe-cells"]').tHead.rows[0].cells].map((c) => c.textContent)`, &head)
	for _, w := range []string{"throughput p10 / p50 / p90 (bit/s)", "buffer p10 / p50 / p90 (ms)"} {
		if !slices.Contains(head, w) {
			t.Errorf("the QoE cells' columns %q, without %q", head, w)
		}
	}
	var rects []struct {
		Cls  string
		X, H float64
	}
	var dots int
	d.evalInto(t, `() => [...document.querySelectorAll('.room figure.shares svg rect')].map((r) => ({cls: r.getAttribute('class'), x: +r.getAttribute('x'), h: +r.getAttribute('height')}))`, &rects)
	d.evalInto(t, `() => document.querySelectorAll('.room figure.shares svg circle, .room figure.shares svg polyline').length`, &dots)
	var empty, first []struct{ X, H float64 }
	for _, r := range rects {
		switch r.Cls {
		case "empty":
			empty = append(empty, struct{ X, H float64 }{r.X, r.H})
		case "c0":
			first = append(first, struct{ X, H float64 }{r.X, r.H})
		}
	}
	t.Logf("the shares chart: %d rects, the empty interval %v, the first pathway's bands %v", len(rects), empty, first)
	if len(empty) != 1 || len(first) != 2 || dots != 0 {
		t.Fatalf("the shares chart has %d empty columns, %d bands of the first pathway and %d dots or lines; want 1, 2 and 0", len(empty), len(first), dots)
	}
	for _, f := range first {
		if share := f.H / empty[0].H; share < 0.095 || share > 0.105 {
			t.Errorf("the first pathway's band is %.3f of the chart's height; its share is 0.1", share)
		}
	}
	if !(first[0].X < empty[0].X && empty[0].X < first[1].X) {
		t.Errorf("the bands at x %v and %v do not stand on both sides of the empty interval at %v", first[0].X, first[1].X, empty[0].X)
	}
	d.shot(t, shot, ".room figure.shares", false)
	d.do(t, "unpatch", nil)
	d.wait(t, `() => !document.querySelector('.pool table[data-table="qoe-cells"]')`, refresh+5*time.Second)
}
