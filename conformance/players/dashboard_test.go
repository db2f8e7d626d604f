package players

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/demo"
)

// TestDashboard is issue 18's must-show: the operator's page, in headless
// Chromium, against `waisteer demo` run in this process. It signs in, sees
// the demo's room and pool, sees the order change after a record it posts
// and an edge go down after the demo stops it, each within the page's
// refresh time and without a reload, inspects a decision and a tampered one,
// gives a clear message for a wrong token, an unknown digest and a malformed
// URL, fits a phone's width and a desktop's, has readable text, and writes
// a screenshot of each view (into t.ArtifactDir: keep them with -artifacts).
//
// And issue 29's dashboard items: every table's cells against the GET
// /v1/dashboard answer the page drew them from (dashboard_tables_test.go),
// once as the demo runs and once on an answer patched with what the demo
// cannot make (QoE cells with no buffer reported, a 10 % share across an
// interval of no decision); a table kept open, scrolled and focused across
// three polls; chart text at least 11 px and scroll hints at 1 280 and
// 375 px; the sign-in's keys, the glossary, whole digests and the
// inspector taking one with a click (dashboard_page_test.go). The page
// runs at UTC+05:30, so that its local times are not its UTC ones.
func TestDashboard(t *testing.T) {
	started := time.Now()
	tl := requireTools(t)
	const seed = "dashboard test"
	ctx, cancel := context.WithCancel(context.Background())
	out := &demoOutput{}
	served := make(chan error, 1)
	go func() {
		served <- demo.Serve(ctx, nil, out, slog.New(slog.DiscardHandler), demo.Options{Listen: "127.0.0.1:0", Seed: seed, EdgeStop: 12 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil && ctx.Err() == nil {
				t.Errorf("the demo: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("the demo did not stop")
		}
	})
	m := out.waitFor(t, regexp.MustCompile(`^  (http://127\.0\.0\.1:[0-9]+)/dashboard  token ([0-9a-f]+)$`), 30*time.Second)
	base, token := m[1], m[2]
	room, err := demo.NewRoom(seed, base) // the same keys as the demo's: its hops sign for the test too
	if err != nil {
		t.Fatal(err)
	}
	var edges []string
	for _, l := range out.waitForAll(t, regexp.MustCompile(`^  (edge-[0-9]+) +weight [0-9]+ `), 3, 30*time.Second) {
		edges = append(edges, l[1])
	}
	var pathways []string
	for _, p := range room.Policy.Pathways {
		pathways = append(pathways, p.ID)
	}

	// The screenshots: kept with -artifacts (go test -artifacts -run
	// TestDashboard ./conformance/players), removed otherwise.
	shots := t.ArtifactDir()
	t.Logf("screenshots in %s", shots)
	ws := startChromium(t, tl.chromium)
	// The page runs at UTC+05:30 (a zone of no summer time), so that its
	// local times are not its UTC ones (issue 29: local time beside UTC).
	const tz = "Asia/Kolkata"
	loc := time.FixedZone(tz, 5*3600+30*60)
	d := startDashDriver(t, tl.node, ws, tz)
	dash := base + "/dashboard"

	// Signed out.
	d.do(t, "viewport", map[string]any{"w": 1280, "h": 900})
	d.do(t, "goto", map[string]any{"url": dash})
	d.wait(t, `() => { const e = document.getElementById('token'); return e && e.offsetParent !== null }`, 5*time.Second)
	d.shot(t, filepath.Join(shots, "signed-out.png"), "", true)
	// Issue 29: the sign-in names the keys that exist.
	signin := d.waitText(t, "#signin", time.Second)
	for _, k := range []string{"operator_token_file", "operator_token_env"} {
		if !strings.Contains(signin, k) {
			t.Errorf("the sign-in does not name %s: %q", k, signin)
		}
	}

	// A wrong token: the server's detail, on the sign-in form.
	d.expect(401, "/v1/dashboard")
	d.do(t, "fill", map[string]any{"sel": "#token", "value": "not-the-operators-token"})
	d.do(t, "click", map[string]any{"sel": "#signin-form button"})
	msg := d.waitText(t, "#signin-msg", 5*time.Second)
	for _, want := range []string{"token_invalid", "the bearer token is not the operator's"} {
		if !strings.Contains(msg, want) {
			t.Errorf("a wrong token: the page says %q, without %q", msg, want)
		}
	}
	d.notBlank(t, "a wrong token")

	// Signed in: the room's pathways and the pool's edges.
	d.do(t, "fill", map[string]any{"sel": "#token", "value": token})
	d.do(t, "click", map[string]any{"sel": "#signin-form button"})
	d.wait(t, `() => document.querySelector('.room table') && document.querySelector('.pool table')`, 10*time.Second)
	// A mark in the page's window: a reload would lose it.
	d.do(t, "eval", map[string]any{"fn": `() => { window.__dashMark = 'kept'; return null }`})
	rows := d.rowHeads(t, ".room")
	if !slices.Equal(rows, pathways) {
		t.Errorf("the room's table lists %v; the demo's policy has %v", rows, pathways)
	}
	if got := d.rowHeads(t, ".pool"); !slices.Equal(got, edges) {
		t.Errorf("the pool's table lists %v; the demo has %v", got, edges)
	}
	state := getState(t, base, token)
	before := state.Rooms[0].Status.Order
	if want := orderOf(state.Rooms[0].Status.Pathways); !slices.Equal(before, want) {
		t.Errorf("the server's order %v is not §6.2's from its own figures, %v", before, want)
	}
	if got := d.pageOrder(t); !slices.Equal(got, before) {
		t.Errorf("the page shows the order %v; the server %v", got, before)
	}
	d.shot(t, filepath.Join(shots, "room.png"), ".room", false)

	// A record that changes the order (§5.2: of the tilings of the window,
	// the one of fewest records is named; §6.2: within a class the lower
	// J/D first). cdn-b and its clone cdn-b-edge2 are of one class and
	// take turns at being the cheaper as the demo's energy drifts; one
	// record of the edge hop of whichever is first now, covering the whole
	// window with ten times the joules of the hop's six, puts it behind the
	// other. One is posted for each of the next windows too, so that the
	// change lasts the test.
	target, other := "cdn-b", "cdn-b-edge2"
	if slices.Index(before, other) < slices.Index(before, target) {
		target, other = other, target
	}
	ti := slices.Index(pathways, target)
	hop := -1
	for h := range room.Hops {
		rec, err := evidence.ParseRecord(room.Record(h, 0, nil))
		if err == nil && rec.Hop == room.Policy.Pathways[ti].Hops[0].Key {
			hop = h
		}
	}
	if hop < 0 {
		t.Fatalf("no hop of the demo's room signs for %s's edge hop", target)
	}
	p := room.Policy
	w := state.Rooms[0].Status.Window
	var body []byte
	for k := uint64(0); k < 8; k++ {
		body = append(body, room.Record(hop, w[0]+k*p.PeriodUs, func(r *evidence.Record) {
			r.End = r.Start + p.WindowUs
			r.Joules = 100_000_000_000
			r.Tracks[0].Bytes = 1_500_000_000
			r.SubscriberUs[2] = uint64(r.Sessions) * p.WindowUs
		})...)
	}
	c := client.New()
	if _, err := c.PostRecords(ctx, room.RecordsURL(base), body); err != nil {
		t.Fatalf("posting the records: %v", err)
	}
	posted := time.Now()
	var after []string
	for time.Since(posted) < 5*time.Second {
		state = getState(t, base, token)
		if after = state.Rooms[0].Status.Order; !slices.Equal(after, before) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	served1 := time.Now()
	if slices.Equal(after, before) {
		t.Fatalf("the server's order stayed %v after the records", before)
	}
	if want := orderOf(state.Rooms[0].Status.Pathways); !slices.Equal(after, want) {
		t.Errorf("the server's order %v is not §6.2's from its own figures, %v", after, want)
	}
	if slices.Index(after, target) < slices.Index(after, other) {
		t.Errorf("after the records, %s still comes before %s: %v", target, other, after)
	}
	refresh := time.Duration(state.RefreshS * float64(time.Second))
	shown := d.waitFor(t, fmt.Sprintf(`() => document.querySelector('.room .order')?.dataset.order === %q`, strings.Join(after, ",")), refresh+3*time.Second)
	t.Logf("order %v → %v: the server's at %.2f s after the post, the page's %.2f s after the server's", before, after, served1.Sub(posted).Seconds(), shown.Sub(served1).Seconds())
	if lag := shown.Sub(served1); lag > refresh+time.Second {
		t.Errorf("the page showed the new order %.2f s after the server had it; it polls every %v", lag.Seconds(), refresh)
	}
	d.noReload(t)

	// The demo stops edge-2: the page shows it down.
	victim := out.waitFor(t, regexp.MustCompile(`pool: stopped (edge-[0-9]+)`), 30*time.Second)[1]
	var downAt time.Time
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if e, ok := edgeOf(getState(t, base, token), victim); ok && !e.Health.Up {
			downAt = time.Now()
			break
		}
	}
	if downAt.IsZero() {
		t.Fatalf("the server never said %s was down", victim)
	}
	shown = d.waitFor(t, fmt.Sprintf(`() => [...document.querySelector('.pool table').tBodies[0].rows].some((r) => r.cells[0].textContent === %q && r.cells[2].textContent === 'down')`, victim), refresh+3*time.Second)
	t.Logf("%s down: the page showed it %.2f s after the server", victim, shown.Sub(downAt).Seconds())
	if lag := shown.Sub(downAt); lag > refresh+time.Second {
		t.Errorf("the page showed %s down %.2f s after the server had it; it polls every %v", victim, lag.Seconds(), refresh)
	}
	d.noReload(t)
	d.shot(t, filepath.Join(shots, "pool.png"), ".pool", false)

	// Issue 29: every table's cells against the answer it was drawn from,
	// with an edge down and a change listed.
	t.Logf("tables read against GET /v1/dashboard: %v", checkTables(t, d, loc))
	checkTerms(t, d)
	checkPatched(t, d, loc, refresh, filepath.Join(shots, "shares.png"))

	// An unknown digest and a malformed URL: the server's message.
	unknown := sha256.Sum256([]byte("no decision has this digest"))
	d.expect(404, "/v1/dashboard/inspect")
	msg = d.inspectError(t, hex.EncodeToString(unknown[:]))
	if !strings.Contains(msg, "not_found") || !strings.Contains(msg, "no decision "+hex.EncodeToString(unknown[:])) {
		t.Errorf("an unknown digest: the page says %q", msg)
	}
	d.expect(400, "/v1/dashboard/inspect")
	msg = d.inspectError(t, base+"/v1/decisions/not-a-digest")
	if !strings.Contains(msg, "inspect_unreadable") || !strings.Contains(msg, "does not end in a decision's digest") {
		t.Errorf("a malformed URL: the page says %q", msg)
	}

	// The inspector: a decision from a steering request's manifest, by its
	// URL, passes every step of §9.1 and is placed in the log.
	mf, err := c.Steer(ctx, p.ServerURI+"?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000")
	if err != nil {
		t.Fatal(err)
	}
	res := d.inspect(t, mf.Decision)
	if res.Verdict != "accepted" || len(res.Steps) != 7 || slices.ContainsFunc(res.Steps, func(s string) bool { return s != "passed" }) {
		t.Errorf("the decision %s: verdict %q, steps %v; want accepted, seven passed", mf.Decision, res.Verdict, res.Steps)
	}
	if !strings.Contains(res.Text, "In the room's log: entry") || !strings.Contains(res.Text, mf.Decision[len(mf.Decision)-64:]) {
		t.Errorf("the inspector shows no log placement or not the digest: %.400q", res.Text)
	}
	d.shot(t, filepath.Join(shots, "inspector-accepted.png"), "#inspector", false)

	// Its bytes with one byte of the signature changed, in base64: §9.1
	// step 3 (the decision's signature) refuses it, bad_signature, and the
	// steps after are not reached.
	raw, err := c.Get(ctx, mf.Decision, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 0x01
	res = d.inspect(t, base64.StdEncoding.EncodeToString(raw))
	want := []string{"passed", "passed", "refused", "not reached", "not reached", "not reached", "not reached"}
	if res.Verdict != "refused" || !slices.Equal(res.Steps, want) || res.Code != "bad_signature" {
		t.Errorf("the tampered decision: verdict %q, steps %v, code %q; want refused, %v, bad_signature", res.Verdict, res.Steps, res.Code, want)
	}
	d.shot(t, filepath.Join(shots, "inspector-refused.png"), "#inspector", false)

	// Widths: nothing wider than the window, at a desktop's and a phone's,
	// with the refused inspection shown (its digests are the longest words);
	// the charts' text at least 11 px and the scroll hints right at each,
	// after a poll has drawn the page at the width; at a phone's, a table
	// kept open, scrolled and focused across three polls; and a screenshot
	// of the whole page at each.
	for _, vw := range []int{1280, 375} {
		d.do(t, "viewport", map[string]any{"w": vw, "h": 900})
		d.wait(t, fmt.Sprintf(`() => innerWidth === %d`, vw), 5*time.Second)
		var at string
		d.evalInto(t, `() => document.getElementById('updated').dataset.at`, &at)
		d.wait(t, fmt.Sprintf(`() => document.getElementById('updated').dataset.at !== %q`, at), refresh+5*time.Second)
		var sw struct{ Doc, Body, Inner int }
		d.evalInto(t, `() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth, inner: innerWidth})`, &sw)
		if sw.Doc > sw.Inner || sw.Body > sw.Inner {
			t.Errorf("at %d px the page is %d px wide (body %d): it overflows", vw, sw.Doc, sw.Body)
		}
		checkWidth(t, d, vw)
		if vw == 375 {
			keepsAcrossPolls(t, d, refresh)
		}
		d.do(t, "eval", map[string]any{"fn": `() => { window.scrollTo(0, 0); return null }`})
		d.shot(t, filepath.Join(shots, fmt.Sprintf("page-%d.png", vw)), "", true)
	}
	d.do(t, "eval", map[string]any{"fn": `() => { window.scrollTo(0, 0); return null }`})
	d.shot(t, filepath.Join(shots, "phone.png"), "", false)
	d.do(t, "viewport", map[string]any{"w": 1280, "h": 900})

	// Contrast (WCAG 2 AA, 4.5:1 for text), computed here from the
	// definitions of relative luminance and contrast ratio, for every
	// element with text of its own: body text, table cells, links.
	var contrast []struct {
		What, Text string
		Ratio      float64
	}
	d.evalInto(t, contrastJS, &contrast)
	kinds := map[string]int{}
	for _, c := range contrast {
		kinds[c.What]++
		if c.Ratio < 4.5 {
			t.Errorf("contrast %.2f:1 below 4.5:1 for %s text %q", c.Ratio, c.What, c.Text)
		}
	}
	for _, k := range []string{"body", "table", "link"} {
		if kinds[k] == 0 {
			t.Errorf("no %s text measured for contrast (%v)", k, kinds)
		}
	}
	t.Logf("contrast measured on %v elements", kinds)

	d.noReload(t)
	d.checkEvents(t)
	for _, name := range []string{"signed-out", "room", "pool", "inspector-accepted", "inspector-refused", "phone", "page-1280", "page-375", "shares"} {
		checkScreenshot(t, filepath.Join(shots, name+".png"))
	}
	t.Logf("TestDashboard took %.1f s", time.Since(started).Seconds())
}

// contrastJS gives, for every visible element with a text node of its own,
// the contrast ratio of its colour against the colour behind it (its own
// background or its nearest ancestor's, alpha composited over white).
const contrastJS = `() => {
  const rgba = (s) => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return [0,0,0,1]; const v = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, bottom) => [0,1,2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const behind = (el) => { const layers = []; for (let e = el; e; e = e.parentElement) { const b = rgba(getComputedStyle(e).backgroundColor); if (b[3] > 0) layers.push(b); if (b[3] >= 1) break; } let c = [255,255,255,1]; for (const l of layers.reverse()) c = over(l, c); return c; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || !el.offsetParent && el !== document.body) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const bg = behind(el), fg = over(rgba(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const what = el.closest('a') ? 'link' : el.closest('table') ? 'table' : 'body';
    out.push({what, text: el.textContent.trim().slice(0, 60), ratio: (a + 0.05) / (b + 0.05)});
  }
  return out;
}`

// checkScreenshot requires a PNG that shows something: many colours (text
// is anti-aliased) and a share of pixels unlike the page's background.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("screenshot %s: %v", path, err)
		return
	}
	b := img.Bounds()
	bg := img.At(b.Min.X, b.Min.Y)
	colours := map[[4]uint32]bool{}
	other := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			r, g, bb, a := c.RGBA()
			colours[[4]uint32{r, g, bb, a}] = true
			if c != bg {
				other++
			}
		}
	}
	share := float64(other) / float64(b.Dx()*b.Dy())
	t.Logf("screenshot %s: %d×%d, %d colours, %.1f %% not background", path, b.Dx(), b.Dy(), len(colours), 100*share)
	if len(colours) < 16 || share < 0.01 {
		t.Errorf("screenshot %s looks blank: %d colours, %.2f %% not background", path, len(colours), 100*share)
	}
}

// dashState is what the test reads of GET /v1/dashboard.
type dashState struct {
	RefreshS float64 `json:"refresh_s"`
	Rooms    []struct {
		Status struct {
			Order    []string     `json:"order"`
			Window   [2]uint64    `json:"window"`
			Pathways []dashFigure `json:"pathways"`
		} `json:"status"`
	} `json:"rooms"`
	Pools []struct {
		View struct {
			Edges []dashEdge `json:"edges"`
		} `json:"view"`
	} `json:"pools"`
}

type dashFigure struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Class    int    `json:"class"`
	Joules   string `json:"joules"`
	Delivery string `json:"delivery"`
}

type dashEdge struct {
	Pathway string `json:"pathway"`
	Health  struct {
		Up bool `json:"up"`
	} `json:"health"`
}

func getState(t *testing.T, base, token string) dashState {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/dashboard", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dashState
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /v1/dashboard: %s %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Rooms) != 1 || len(st.Pools) != 1 {
		t.Fatalf("the demo has one room and one pool; the dashboard %d and %d", len(st.Rooms), len(st.Pools))
	}
	return st
}

func edgeOf(st dashState, id string) (dashEdge, bool) {
	for _, e := range st.Pools[0].View.Edges {
		if e.Pathway == id {
			return e, true
		}
	}
	return dashEdge{}, false
}

// orderOf is §6.2's order, written from the text: rank by class (5, 4, 2,
// 3, then no figure), then within a class J_p × D_q < J_q × D_p, exactly,
// then the id bytewise.
func orderOf(ps []dashFigure) []string {
	rank := func(p dashFigure) int {
		if p.Status != "figure" {
			return 4
		}
		return map[int]int{5: 0, 4: 1, 2: 2, 3: 3}[p.Class]
	}
	n := func(s string) *big.Int { v, _ := new(big.Int).SetString(s, 10); return v }
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(p, q dashFigure) int {
		if rp, rq := rank(p), rank(q); rp != rq {
			return rp - rq
		}
		if rank(p) < 4 && p.Class == q.Class {
			l := new(big.Int).Mul(n(p.Joules), n(q.Delivery))
			r := new(big.Int).Mul(n(q.Joules), n(p.Delivery))
			if c := l.Cmp(r); c != 0 {
				return c
			}
		}
		return strings.Compare(p.ID, q.ID)
	})
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

// demoOutput is the demo's printed lines, which the test reads for the
// dashboard's URL and token and for when the demo stops an edge.
type demoOutput struct {
	mu   sync.Mutex
	part []byte
	all  []string
}

func (o *demoOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.part = append(o.part, b...)
	for {
		i := bytes.IndexByte(o.part, '\n')
		if i < 0 {
			break
		}
		o.all = append(o.all, string(o.part[:i]))
		o.part = o.part[i+1:]
	}
	return len(b), nil
}

// waitForAll waits until n lines match re and returns their matches.
func (o *demoOutput) waitForAll(t *testing.T, re *regexp.Regexp, n int, within time.Duration) [][]string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		o.mu.Lock()
		var ms [][]string
		for _, l := range o.all {
			if m := re.FindStringSubmatch(l); m != nil {
				ms = append(ms, m)
			}
		}
		text := strings.Join(o.all, "\n")
		o.mu.Unlock()
		if len(ms) >= n {
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo printed no %d lines matching %s within %v; it printed:\n%s", n, re, within, text)
		}
	}
}

func (o *demoOutput) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	return o.waitForAll(t, re, 1, within)[0]
}
