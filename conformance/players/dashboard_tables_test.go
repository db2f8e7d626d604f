package players

// Issue 29's dashboard items, read in the browser: every table's numbers
// against the GET /v1/dashboard answer the page drew them from, written
// here from the JSON's definitions (not by the page's code); a poll that
// keeps what the operator opened, focused and scrolled; chart text and
// scroll hints at a width.

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pageState is what the tables are checked against: GET /v1/dashboard's
// answer, in the fields the tables show.
type pageState struct {
	At      time.Time `json:"at"`
	SampleS float64   `json:"sample_s"`
	Rooms   []struct {
		Status struct {
			Room     string    `json:"room"`
			Window   [2]uint64 `json:"window"`
			Pathways []struct {
				ID       string             `json:"id"`
				Status   string             `json:"status"`
				Class    int                `json:"class"`
				Joules   string             `json:"joules"`
				Delivery string             `json:"delivery"`
				Rank     int                `json:"rank"`
				Records  int                `json:"records"`
				Limits   map[string]bool    `json:"limits"`
				Load     *uint32            `json:"load"`
				First    uint64             `json:"first"`
				Health   *struct{ Up bool } `json:"health"`
			} `json:"pathways"`
			Decisions struct {
				Total    uint64            `json:"total"`
				ByReason map[string]uint64 `json:"by_reason"`
			} `json:"decisions"`
			Records struct {
				Accepted  uint64            `json:"accepted"`
				Duplicate uint64            `json:"duplicate"`
				OffPolicy uint64            `json:"off_policy"`
				FromPeers uint64            `json:"from_peers"`
				Refused   map[string]uint64 `json:"refused"`
				InIndex   uint64            `json:"in_index"`
			} `json:"records"`
		} `json:"status"`
		Unit string `json:"unit"`
		Hops []struct {
			Pathway string `json:"pathway"`
			Hop     string `json:"hop"`
			Records []struct {
				Start, End uint64
				Class      string
			} `json:"records"`
			Gaps [][2]uint64 `json:"gaps"`
		} `json:"hops"`
		History []struct {
			At    time.Time         `json:"at"`
			First map[string]uint64 `json:"first"`
			Load  map[string]uint32 `json:"load"`
		} `json:"history"`
	} `json:"rooms"`
	Pools []struct {
		View struct {
			Pool  string `json:"pool"`
			Edges []struct {
				Pathway, Host    string
				Weight           uint64
				Checked, Drained bool
				First, Sessions  uint64
				Headroom         float64
				Health           struct {
					Up        bool
					Failures  uint64
					LastCheck *time.Time `json:"last_check"`
					LastError string     `json:"last_error"`
					LastMs    float64    `json:"last_ms"`
				}
			} `json:"edges"`
			Changes []struct {
				At                    time.Time
				Pathway, What, Detail string
			} `json:"changes"`
		} `json:"view"`
		History []struct {
			At    time.Time `json:"at"`
			Edges map[string]struct {
				Up, Drained     bool
				First, Sessions uint64
				CheckMs         float64 `json:"check_ms"`
			} `json:"edges"`
		} `json:"history"`
	} `json:"pools"`
}

// pageTable is one table as the page shows it.
type pageTable struct {
	Kind, Room, Pool, Caption string
	Head                      []string
	Rows                      [][]string
}

const readTablesJS = `() => ({
  at: document.getElementById('updated').dataset.at,
  tables: [...document.querySelectorAll('#board table[data-table]')].filter((t) => !t.closest('#inspector')).map((t) => {
    const room = t.closest('[data-room]'), pool = t.closest('[data-pool]');
    return {kind: t.dataset.table, room: room ? room.dataset.room : '', pool: pool ? pool.dataset.pool : '',
      caption: t.caption ? t.caption.textContent : '',
      head: [...t.tHead.rows[0].cells].map((c) => c.textContent),
      rows: [...t.tBodies[0].rows].map((r) => [...r.cells].map((c) => c.textContent))};
  }),
})`

// group writes n with a comma between each three digits.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func groupDigits(s string) string {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil { // beyond 64 bits: by hand
		out := ""
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				out += ","
			}
			out += string(c)
		}
		return out
	}
	return group(n)
}

// readNum reads a number the page wrote with separators.
func readNum(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return v, err == nil
}

// checkTables reads every table of the page and the answer it was drawn
// from, and holds each cell against that answer (issue 29: "every chart's
// table holds its numbers"). It fails on a table it has no reading for.
func checkTables(t *testing.T, d *dashDriver, loc *time.Location) map[string]int {
	t.Helper()
	var page struct {
		At     string
		Tables []pageTable
	}
	d.evalInto(t, readTablesJS, &page)
	var st pageState
	found := false
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var bodies []string
		b, _ := json.Marshal(d.do(t, "states", nil))
		json.Unmarshal(b, &bodies)
		for _, body := range bodies {
			var head struct{ At string }
			if json.Unmarshal([]byte(body), &head) == nil && head.At == page.At {
				if err := json.Unmarshal([]byte(body), &st); err != nil {
					t.Fatalf("the answer the page drew: %v", err)
				}
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no answer of GET /v1/dashboard at %s, which the page shows", page.At)
	}
	clock := func(at time.Time) string {
		return at.UTC().Format("15:04:05") + " UTC (local " + at.In(loc).Format("15:04:05") + ")"
	}
	roomClock := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	span := func(a, b uint64) string {
		x, y := roomClock(a), roomClock(b)
		return fmt.Sprintf("%s–%s UTC (local %s–%s)", x.UTC().Format("15:04:05"), y.UTC().Format("15:04:05"), x.In(loc).Format("15:04:05"), y.In(loc).Format("15:04:05"))
	}
	orUnknown := func(v *uint32) string {
		if v == nil {
			return "unknown"
		}
		return group(uint64(*v))
	}
	want := map[string][][]string{} // by kind and card: the cells, "≈x" for a number to within 0.06
	key := func(kind, card string) string { return kind + " " + card }
	for _, rd := range st.Rooms {
		s := rd.Status
		var rows [][]string
		classes := map[int]string{2: "ModelBased", 3: "Estimator", 4: "OnChipCounter", 5: "CalibratedInstrument"}
		for _, p := range s.Pathways {
			health := "no check"
			if p.Health != nil {
				health = map[bool]string{true: "up", false: "down"}[p.Health.Up]
			}
			class, figure := "none", "no figure"
			if p.Class != 0 {
				class = strconv.Itoa(p.Class) + " " + classes[p.Class]
			}
			if p.Status == "figure" {
				j, _ := strconv.ParseFloat(p.Joules, 64)
				dd, _ := strconv.ParseFloat(p.Delivery, 64)
				figure = "^" + groupDigits(p.Joules) + " / " + groupDigits(p.Delivery) + " (≈ ≈" + strconv.FormatFloat(j/dd, 'f', -1, 64) + ")"
			}
			var out []string
			for k, ok := range p.Limits {
				if !ok {
					out = append(out, k)
				}
			}
			sort.Strings(out)
			limits := "within all"
			if len(out) > 0 {
				limits = "outside: " + strings.Join(out, ", ")
			}
			rows = append(rows, []string{p.ID, health, p.Status, class, figure, strconv.Itoa(p.Rank), limits, orUnknown(p.Load), group(p.First), group(uint64(p.Records))})
		}
		want[key("pathways", s.Room)] = rows
		rows = nil
		for _, k := range sortedKeys(s.Decisions.ByReason) {
			rows = append(rows, []string{k, group(s.Decisions.ByReason[k])})
		}
		want[key("reasons", s.Room)] = rows
		r := s.Records
		want[key("records", s.Room)] = [][]string{{"accepted", group(r.Accepted)}, {"duplicate", group(r.Duplicate)},
			{"off policy", group(r.OffPolicy)}, {"from peers", group(r.FromPeers)}, {"in the index", group(r.InIndex)}}
		rows = nil
		for _, k := range sortedKeys(r.Refused) {
			rows = append(rows, []string{k, group(r.Refused[k])})
		}
		want[key("refused", s.Room)] = rows
		rows = nil
		for _, hp := range rd.Hops {
			var periods, gaps []string
			for _, rc := range hp.Records {
				periods = append(periods, span(rc.Start, rc.End)+" "+rc.Class)
			}
			for _, g := range hp.Gaps {
				gaps = append(gaps, span(g[0], g[1]))
			}
			rows = append(rows, []string{hp.Pathway, "^" + hp.Hop + " copy", group(uint64(len(hp.Records))), orNone(periods), orNone(gaps)})
		}
		want[key("timeline", s.Room)] = rows
		var ids []string
		for _, p := range s.Pathways {
			ids = append(ids, p.ID)
		}
		var firsts []map[string]uint64
		var loads []map[string]*uint32
		var ats []time.Time
		for _, h := range rd.History {
			firsts = append(firsts, h.First)
			l := map[string]*uint32{}
			for id, n := range h.Load {
				l[id] = &n
			}
			loads = append(loads, l)
			ats = append(ats, h.At)
		}
		want[key("room-shares", s.Room)] = sharesRows(ids, ats, firsts, loads, clock)
	}
	for _, pd := range st.Pools {
		v := pd.View
		name := v.Pool
		if name == "" {
			name = "[steering]"
		}
		var rows [][]string
		var ids []string
		for _, e := range v.Edges {
			ids = append(ids, e.Pathway)
			health := "not checked"
			if e.Checked {
				health = map[bool]string{true: "up", false: "down"}[e.Health.Up]
			}
			lastErr, ms, at := e.Health.LastError, "no check yet", "no check yet"
			if lastErr == "" {
				lastErr = "none"
			}
			if e.Health.LastCheck != nil {
				ms, at = "≈"+strconv.FormatFloat(e.Health.LastMs, 'f', -1, 64), clock(*e.Health.LastCheck)
			}
			rows = append(rows, []string{e.Pathway, e.Host, health, group(e.Health.Failures), lastErr, ms, at, group(e.Weight),
				map[bool]string{true: "yes", false: "no"}[e.Drained], group(e.First), group(e.Sessions), "≈" + strconv.FormatFloat(e.Headroom, 'f', -1, 64)})
		}
		want[key("edges", name)] = rows
		rows = nil
		var firsts []map[string]uint64
		var loads []map[string]*uint32
		var ats []time.Time
		for _, h := range pd.History {
			row := []string{clock(h.At)}
			f, l := map[string]uint64{}, map[string]*uint32{}
			for _, id := range ids {
				e, ok := h.Edges[id]
				if !ok {
					row = append(row, "no sample", "—", "—")
					continue
				}
				health := map[bool]string{true: "up", false: "down"}[e.Up]
				if e.Drained {
					health = "drained"
				}
				row = append(row, health, "≈"+strconv.FormatFloat(e.CheckMs, 'f', -1, 64), group(e.Sessions))
				f[id] = e.First
				n := uint32(e.Sessions)
				l[id] = &n
			}
			rows = append([][]string{row}, rows...)
			firsts, loads, ats = append(firsts, f), append(loads, l), append(ats, h.At)
		}
		want[key("health", name)] = rows
		want[key("pool-shares", name)] = sharesRows(ids, ats, firsts, loads, clock)
		rows = nil
		changes := v.Changes[max(0, len(v.Changes)-12):]
		for i := len(changes) - 1; i >= 0; i-- {
			c := changes[i]
			rows = append(rows, []string{clock(c.At), c.Pathway, c.What, c.Detail})
		}
		want[key("changes", name)] = rows
	}

	seen := map[string]int{}
	for _, tb := range page.Tables {
		k := key(tb.Kind, tb.Room+tb.Pool)
		seen[k]++
		rows, ok := want[k]
		if !ok {
			t.Errorf("the page has a table %q (%s) this test has no reading for", tb.Kind, tb.Caption)
			continue
		}
		if tb.Kind == "reasons" && !strings.Contains(tb.Caption, "(total "+group(st.Rooms[0].Status.Decisions.Total)+")") {
			t.Errorf("the decisions' caption %q, the answer's total %d", tb.Caption, st.Rooms[0].Status.Decisions.Total)
		}
		if len(tb.Rows) != len(rows) {
			t.Errorf("table %s: %d rows, the answer %d", k, len(tb.Rows), len(rows))
			continue
		}
		for i, row := range rows {
			if len(tb.Rows[i]) != len(row) || len(tb.Head) != len(row) {
				t.Errorf("table %s row %d: %d cells under %d headers, want %d: %q", k, i, len(tb.Rows[i]), len(tb.Head), len(row), tb.Rows[i])
				continue
			}
			for j, w := range row {
				if !cellMatches(tb.Rows[i][j], w) {
					t.Errorf("table %s row %d column %q: the page shows %q, the answer %q", k, i, tb.Head[j], tb.Rows[i][j], w)
				}
			}
		}
	}
	for k, rows := range want {
		if len(rows) > 0 && seen[k] != 1 {
			t.Errorf("table %s: on the page %d times; the answer has %d rows for it", k, seen[k], len(rows))
		}
	}
	return seen
}

// cellMatches: w exactly; with "^" a prefix; with "≈" a number within
// 0.06 % or 0.0006 (the page rounds to three places); with "%" a count
// and its share, to one place.
func cellMatches(got, w string) bool {
	switch {
	case strings.HasPrefix(w, "%"):
		// A share: "count (p %)", p to one place.
		n, p, _ := strings.Cut(strings.TrimPrefix(w, "%"), " ")
		m := shareCell.FindStringSubmatch(got)
		if m == nil {
			return false
		}
		x, _ := strconv.ParseFloat(p, 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		return m[1] == n && math.Abs(x-y) <= 0.051
	case strings.HasPrefix(w, "≈"):
		x, ok1 := readNum(got)
		y, ok2 := readNum(strings.TrimPrefix(w, "≈"))
		return ok1 && ok2 && math.Abs(x-y) <= max(0.0006, 0.0006*math.Abs(y))
	case strings.HasPrefix(w, "^") && strings.Contains(w, "≈"):
		// A figure: "J / D (≈ q)", q to four places.
		pre, q, _ := strings.Cut(strings.TrimPrefix(w, "^"), "≈ ≈")
		rest, ok := strings.CutPrefix(got, pre)
		x, ok1 := readNum(strings.TrimSuffix(rest, ")"))
		y, _ := strconv.ParseFloat(strings.TrimSuffix(q, ")"), 64)
		return ok && ok1 && math.Abs(x-y) <= 0.0006*y
	case strings.HasPrefix(w, "^"):
		return strings.HasPrefix(got, strings.TrimPrefix(w, "^"))
	}
	return got == w
}

var shareCell = regexp.MustCompile(`^([0-9,]+) \(([0-9.]+) %\)$`)

// sharesRows is a shares table, latest interval first: each interval's
// count of firsts (the difference of two samples' counts, which only
// grow), and per id its count with its share of the interval's, and the
// load at the interval's end.
func sharesRows(ids []string, ats []time.Time, firsts []map[string]uint64, loads []map[string]*uint32, clock func(time.Time) string) [][]string {
	var rows [][]string
	for i := 1; i < len(ats); i++ {
		var total uint64
		d := map[string]uint64{}
		for _, id := range ids {
			if firsts[i][id] > firsts[i-1][id] {
				d[id] = firsts[i][id] - firsts[i-1][id]
			}
			total += d[id]
		}
		row := []string{clock(ats[i]), group(total)}
		for _, id := range ids {
			if total == 0 {
				row = append(row, "0")
			} else {
				row = append(row, fmt.Sprintf("%%%s %.4f", group(d[id]), 100*float64(d[id])/float64(total)))
			}
		}
		for _, id := range ids {
			if l := loads[i][id]; l != nil {
				row = append(row, group(uint64(*l)))
			} else {
				row = append(row, "unknown")
			}
		}
		rows = append([][]string{row}, rows...)
	}
	return rows
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, "; ")
}

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
