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
			QoE *qoeState `json:"qoe"`
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
			QoE *qoeState `json:"qoe"`
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

// qoeState is a QoE view (internal/view.QoEView), in the fields shown.
type qoeState struct {
	Settings struct {
		WindowS float64 `json:"window_s"`
	} `json:"settings"`
	Cells []struct {
		Pathway, Cohort, State string
		Sessions               uint64
		WithThroughput         uint64     `json:"with_throughput"`
		Throughput             [3]uint64  `json:"throughput_bps"`
		WithBuffer             uint64     `json:"with_buffer"`
		Buffer                 [3]uint64  `json:"buffer_ms"`
		LastMove               *time.Time `json:"last_move"`
	} `json:"cells"`
	Moves []struct {
		At                          time.Time
		Pathway, Cohort, To, Reason string
		Median                      uint64 `json:"median_bps"`
		Best                        uint64 `json:"best_bps"`
		Sessions                    uint64
	} `json:"moves"`
}

// qoeRows are a QoE view's two tables: its cells, with the quantiles over
// the sessions that reported each or "no report" where none did, and its
// moves, latest first.
func qoeRows(q *qoeState, clock func(time.Time) string) (cells, moves [][]string) {
	q3 := func(n uint64, xs [3]uint64) string {
		if n == 0 {
			return "no report"
		}
		return fmt.Sprintf("%s / %s / %s (%s reported)", group(xs[0]), group(xs[1]), group(xs[2]), group(n))
	}
	for _, c := range q.Cells {
		last := "none"
		if c.LastMove != nil {
			last = clock(*c.LastMove)
		}
		cells = append(cells, []string{c.Pathway, c.Cohort, group(c.Sessions), c.State, q3(c.WithThroughput, c.Throughput), q3(c.WithBuffer, c.Buffer), last})
	}
	for i := len(q.Moves) - 1; i >= 0; i-- {
		m := q.Moves[i]
		moves = append(moves, []string{clock(m.At), m.Pathway, m.Cohort, m.To, group(m.Median), group(m.Best), group(m.Sessions), m.Reason})
	}
	return cells, moves
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
		if s.QoE != nil {
			want[key("qoe-cells", s.Room)], want[key("qoe-moves", s.Room)] = qoeRows(s.QoE, clock)
		}
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
		if v.QoE != nil {
			want[key("qoe-cells", name)], want[key("qoe-moves", name)] = qoeRows(v.QoE, clock)
		}
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
		rest, ok := strings.CutPrefix(got, pre+"≈ ")
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
