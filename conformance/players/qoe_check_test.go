package players

// QoE reports as the test reads them, the rule's reference, and the checks.

import (
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// qoeReport is what the extension's §4 reads of a steering request, the
// reading the brief gives the per-client rule: the client's current
// pathway c and its throughput T.
type qoeReport struct {
	pathway    string // c; "" when absent
	throughput uint64 // T, bits/s
	hasT       bool
	from       string // where T came from: the throughput parameter, or CMCD mtp
}

func (r qoeReport) String() string {
	c := r.pathway
	if c == "" {
		c = "no pathway"
	}
	if !r.hasT {
		return c + " with no throughput"
	}
	return fmt.Sprintf("%s at %d bit/s (%s)", c, r.throughput, r.from)
}

// unquote removes one `"` at each end when the value both begins and ends
// with one (§4.1).
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// integer reads §4.1's integer: 1 to 20 ASCII digits, at most 2⁶⁴ − 1.
func integer(v string) (uint64, bool) {
	if len(v) < 1 || len(v) > 20 || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// readQoEReport reads c and T from a steering request as §4.2 (HLS), §4.3
// (DASH) and §4.4 (CMCD mtp × 1000 when neither gives T) say, for a policy
// (here a pool) of the pathways ids. CMCD is read in the simple form the
// players write (cmcdKey).
func readQoEReport(h hit, protocol string, ids []string) qoeReport {
	q := query(h.Query)
	var r qoeReport
	if protocol == "hls" {
		if c := unquote(q["_HLS_pathway"]); slices.Contains(ids, c) {
			r.pathway = c
		}
		if v, ok := q["_HLS_throughput"]; ok {
			r.throughput, r.hasT = integer(v)
			r.from = "_HLS_throughput"
		}
	} else {
		j := 0
		if pw, ok := q["_DASH_pathway"]; ok {
			for i, c := range strings.Split(unquote(pw), ",") {
				if slices.Contains(ids, c) {
					r.pathway, j = c, i
					break
				}
			}
		}
		if tp, ok := q["_DASH_throughput"]; ok {
			if items := strings.Split(tp, ","); j < len(items) {
				r.throughput, r.hasT = integer(items[j])
				r.from = "_DASH_throughput"
			}
		}
	}
	if !r.hasT {
		cmcd, ok := q["CMCD"]
		if !ok {
			cmcd = h.CMCD
		}
		if mtp := cmcdKey(cmcd, "mtp"); mtp >= 0 {
			r.throughput, r.hasT, r.from = uint64(mtp)*1000, true, "CMCD mtp × 1000"
		}
	}
	return r
}

// belowLowest is the per-client rule's test, exactly: T < 1.2 × Lowest.
func belowLowest(t, lowest uint64) bool {
	lhs := new(big.Int).Mul(big.NewInt(5), new(big.Int).SetUint64(t))
	rhs := new(big.Int).Mul(big.NewInt(6), new(big.Int).SetUint64(lowest))
	return lhs.Cmp(rhs) < 0
}

// qoeRule is the per-client rule as the brief states it, and as the
// server keeps it (issue 17: "a client kept away for the hold"), for one
// session's requests in the order they came: a request that reports
// below 1.2 × Lowest on its pathway has that pathway moved behind the
// others with the short TTL, and a request of the session (one that
// carries it) keeps the session off that pathway until qoeHold after it;
// a later request that reports nothing below is answered so too while the
// hold lasts; any other, the weights' order (the throttled pathway, then
// the weight-0 one) with the pool's TTL.
type qoeRule struct {
	lowest uint64
	away   string    // the pathway the session is kept off, "" for none
	until  time.Time // the end of its hold
}

// answer is the order and TTL for a request that began at, carrying the
// report r, with a session or not, and why; doubt when the answer is in
// doubt, as for a request within a second of the hold's end, which the
// server may see on either side.
func (q *qoeRule) answer(r qoeReport, session bool, at time.Time) (order []string, ttl int, why string, doubt bool) {
	behind := ""
	switch {
	case r.pathway != "" && r.hasT && belowLowest(r.throughput, q.lowest):
		behind, why = r.pathway, fmt.Sprintf("below 1.2 × Lowest = %d on %s", q.lowest*6/5, r.pathway)
		if session {
			q.away, q.until = r.pathway, at.Add(qoeHold)
		}
	case q.away != "" && at.Before(q.until):
		behind, why = q.away, fmt.Sprintf("the session kept off %s for the hold, until %s", q.away, q.until.Format("15:04:05.000"))
		doubt = q.until.Sub(at) < time.Second
	default:
		why = "nothing below 1.2 × Lowest and no hold: the weights' order"
		doubt = q.away != "" && at.Sub(q.until) < time.Second
	}
	order = []string{slowID, fastID}
	if behind == "" {
		return order, qoeTTL, why, doubt
	}
	order = slices.DeleteFunc(order, func(id string) bool { return id == behind })
	return append(order, behind), qoeShortTTL, why, doubt
}

// qoeMove is what the test found of a page's move off the throttled
// pathway, for the log and README.md's table.
type qoeMove struct {
	reported    qoeReport
	toReload    time.Duration // from the first throttled segment to the reload that moved it
	toFast      time.Duration // ... to its first segment from the other pathway
	slowSegs    int           // segments from the throttled pathway before the move
	slowRate    uint64        // their median rate as served, bits/s
	back        int           // answers after the move that put the throttled pathway first again
	returns     int           // times the player went back to it
	answers     []string      // every answer after the move, in brief
	requests    int
	fastPlayed  float64 // s of media played in the shortTTL after its first fast segment
	lastPathway string  // the pathway of its last segment
}

// diagnoseQoE lists, for a failure's message, each page's steering
// requests with their answers, and its media requests by pathway.
func diagnoseQoE(o *observed, pgs []pageSpec) string {
	var b strings.Builder
	for _, pg := range pgs {
		fmt.Fprintf(&b, "  %s:\n", pg.name)
		for _, r := range o.steering(pg.name) {
			fmt.Fprintf(&b, "    %s ?%s -> %v TTL %d\n", r.Start.Format("15:04:05.000"), r.Query, r.manifest.Priority, r.manifest.TTL)
		}
		count := map[string]int{}
		for _, mh := range o.media(pg.name, time.Time{}, time.Time{}) {
			count[mh.Server+" "+mh.kind+" "+strconv.Itoa(mh.Status)]++
		}
		keys := make([]string, 0, len(count))
		for k := range count {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("    media:")
		for _, k := range keys {
			fmt.Fprintf(&b, " [%s]×%d", k, count[k])
		}
		if ss := o.samples(pg.name); len(ss) > 0 {
			s := ss[len(ss)-1]
			fmt.Fprintf(&b, "; currentTime %.1f readyState %d", s.CurrentTime, s.ReadyState)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// findQoEMove finds the page's reload that reported, for the throttled
// pathway, a throughput below 1.2 × Lowest after the player had timed a
// segment there (one served whole before the reload began), and says what
// is still missing when there is none yet, or no segment from the other
// pathway after it.
func findQoEMove(o *observed, pg pageSpec, lowest uint64) (steerReq, string) {
	ids := []string{slowID, fastID}
	slow := o.segments(pg.name, slowID, time.Time{}, time.Time{})
	if len(slow) == 0 {
		return steerReq{}, "no segment from " + slowID + " yet"
	}
	for _, r := range o.steering(pg.name) {
		rep := readQoEReport(r.hit, pg.protocol, ids)
		if r.Start.Before(slow[0].End) || rep.pathway != slowID || !rep.hasT || !belowLowest(rep.throughput, lowest) {
			continue
		}
		if len(o.segments(pg.name, fastID, r.End, time.Time{})) == 0 {
			return r, "no segment from " + fastID + " since the reload that reported " + rep.String()
		}
		return r, ""
	}
	return steerReq{}, fmt.Sprintf("no reload has reported %s below 1.2 × Lowest (%d segments from it so far)", slowID, len(slow))
}

// checkQoESteering judges every steering request of the page: the first
// has no session and its answer's RELOAD-URI is the pool's route, absolute,
// with the session minted; every later request is that RELOAD-URI with the
// player's parameters after it; and every answer is VERSION 1 with the
// same RELOAD-URI, the PATHWAY-PRIORITY and TTL that the rule gives the
// report its request carried and the session's earlier ones (qoeRule),
// and no clones.
func checkQoESteering(t *testing.T, o *observed, pg pageSpec, lowest uint64, steerURL string, mv *qoeMove) {
	reqs := o.steering(pg.name)
	mv.requests = len(reqs)
	if len(reqs) < 2 {
		t.Errorf("%d steering requests, fewer than 2", len(reqs))
		return
	}
	first := reqs[0]
	if _, ok := query(first.Query)["session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reload := first.manifest.Reload
	session := sessionOf(reload)
	if _, ok := parseSession(session); !ok || reload != steerURL+qoePath(pg.name)+"?session="+session {
		t.Fatalf("RELOAD-URI %q is not the pool's route, absolute, with a session of 32 hexadecimal digits", reload)
	}
	ids := []string{slowID, fastID}
	rule := &qoeRule{lowest: lowest}
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if i > 0 && !strings.HasPrefix(r.Query, "session="+session) {
			t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, session)
		}
		rep := readQoEReport(r.hit, pg.protocol, ids)
		_, carried := parseSession(query(r.Query)["session"])
		order, ttl, why, doubt := rule.answer(rep, carried, r.Start)
		if r.manifest.Version != 1 || r.manifest.Reload != reload || len(r.manifest.Clones) != 0 {
			t.Errorf("%s: VERSION %d, RELOAD-URI %q, %d clones: not 1, %q and none", where, r.manifest.Version, r.manifest.Reload, len(r.manifest.Clones), reload)
		}
		if !doubt && (!slices.Equal(r.manifest.Priority, order) || r.manifest.TTL != ttl) {
			t.Errorf("%s: reported %s; answered PATHWAY-PRIORITY %v TTL %d, not %v TTL %d as the rule gives (%s)",
				where, rep, r.manifest.Priority, r.manifest.TTL, order, ttl, why)
		}
	}
	t.Logf("%d steering requests; first: %s?%s", len(reqs), first.Path, first.Query)
}

// checkQoEMove judges the move: the player starts on the throttled
// pathway, and takes every segment from it until the reload that reports
// it below 1.2 × Lowest; that answer puts the other pathway first with the
// short TTL; the player's next segments come from the other pathway, the
// first within a few seconds, and none from the throttled one until its
// next answer. What it did after is logged and counted, not required.
func checkQoEMove(t *testing.T, o *observed, m *media, pg pageSpec, lowest, rate uint64, tEnd time.Time, mv *qoeMove) {
	// The throttle, as the server sent: no segment from it faster than its
	// pace (a few per cent for the clock's grain), so that none could be
	// timed above it. A segment the player gave up on is not timed.
	var rates []uint64
	for _, s := range o.segments(pg.name, slowID, time.Time{}, tEnd) {
		if size := m.segmentSize(s.seg); size > 0 && s.Bytes == int64(size) {
			rates = append(rates, uint64(float64(size*8)/s.End.Sub(s.Start).Seconds()))
		}
	}
	slices.Sort(rates)
	if len(rates) > 0 {
		mv.slowRate = rates[len(rates)/2]
		if top := rates[len(rates)-1]; top > rate+rate/20 {
			t.Errorf("a segment from %s was served at %d bit/s, above its pace of %d", slowID, top, rate)
		}
	}

	reqs := o.steering(pg.name)
	if len(reqs) == 0 {
		t.Errorf("no steering request")
		return
	}
	segs := o.segments(pg.name, "", time.Time{}, tEnd)
	if len(segs) == 0 || segs[0].Server != slowID {
		t.Errorf("the player did not start on %s: its first segments %v", slowID, servers(segs, 4))
		return
	}
	r, why := findQoEMove(o, pg, lowest)
	if why != "" {
		t.Errorf("%s", why)
		return
	}
	ids := []string{slowID, fastID}
	mv.reported = readQoEReport(r.hit, pg.protocol, ids)
	if len(r.manifest.Priority) == 0 || r.manifest.Priority[0] != fastID || r.manifest.TTL != qoeShortTTL {
		t.Errorf("the reload that reported %s was answered PATHWAY-PRIORITY %v TTL %d, not %s first with the short TTL %d",
			mv.reported, r.manifest.Priority, r.manifest.TTL, fastID, qoeShortTTL)
	}

	// Before the move, every segment from the throttled pathway.
	firstSlow := segs[0]
	for _, s := range segs {
		if !s.Start.Before(r.End) {
			break
		}
		if s.Server != slowID {
			t.Errorf("segment %d came from %s before the move", s.seg, s.Server)
			continue
		}
		mv.slowSegs++
	}

	// The next segments: from the other pathway, until the next answer.
	var next time.Time // the end of the answer after the move's, or tEnd
	for _, q := range reqs {
		if q.Start.After(r.End) {
			next = q.End
			break
		}
	}
	if next.IsZero() {
		next = tEnd
	}
	after := o.segments(pg.name, "", r.End, next)
	// A segment asked for just as the answer left may still go to the
	// throttled pathway: the player reads the answer a moment later.
	const reading = 250 * time.Millisecond
	i := slices.IndexFunc(after, func(s mediaHit) bool { return s.Server == fastID })
	if i < 0 {
		t.Errorf("no segment from %s between the answer that put it first and the next answer (%d segments: %v)", fastID, len(after), servers(after, 8))
		return
	}
	for _, s := range after {
		if s.Server != fastID && s.Start.After(r.End.Add(reading)) {
			t.Errorf("segment %d came from %s %v after the answer that put %s first", s.seg, s.Server, s.Start.Sub(r.End).Round(time.Millisecond), fastID)
		}
	}
	firstFast := after[i]
	if d := firstFast.Start.Sub(r.End); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the answer that put it first", fastID, d.Round(time.Millisecond))
	}
	mv.toReload = r.Start.Sub(firstSlow.Start)
	mv.toFast = firstFast.Start.Sub(firstSlow.Start)
	mv.fastPlayed = o.played(pg.name, firstFast.Start, firstFast.Start.Add(qoeShortTTL*time.Second))

	// After the move: tolerated, counted and logged.
	for _, q := range reqs {
		if !q.Start.After(r.Start) {
			continue
		}
		if len(q.manifest.Priority) > 0 && q.manifest.Priority[0] == slowID {
			mv.back++
		}
		mv.answers = append(mv.answers, fmt.Sprintf("+%.1fs %s, read as %s -> %s TTL %d", q.Start.Sub(r.Start).Seconds(), playerParams(q.hit, pg.protocol),
			readQoEReport(q.hit, pg.protocol, ids), strings.Join(q.manifest.Priority, ","), q.manifest.TTL))
	}
	last := ""
	for _, s := range o.segments(pg.name, "", firstFast.Start, tEnd) {
		if s.Server == slowID && last == fastID {
			mv.returns++
		}
		last = s.Server
	}
	mv.lastPathway = last
	t.Logf("started on %s (%d segments, served at a median %d bit/s); the reload %v after its first segment there reported %s and was answered %v TTL %d; first segment from %s %v after that answer (%v after the first from %s); played %.1f s in the %d s after",
		slowID, mv.slowSegs, mv.slowRate, mv.toReload.Round(time.Millisecond), mv.reported, r.manifest.Priority, r.manifest.TTL,
		fastID, firstFast.Start.Sub(r.End).Round(time.Millisecond), mv.toFast.Round(time.Millisecond), slowID, mv.fastPlayed, qoeShortTTL)
	t.Logf("after the move: %d answers put %s first again, the player went back to it %d times, its last segment from %s; answers: %s",
		mv.back, slowID, mv.returns, last, strings.Join(mv.answers, "; "))
}

// segmentSize is segment n's size in bytes, 0 when it cannot be read.
func (m *media) segmentSize(n int) int {
	st, err := os.Stat(filepath.Join(m.dir, fmt.Sprintf("seg_%d.m4s", n)))
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// playerParams is the pathway and throughput parameters of a request as
// the player wrote them, decoded, for the log.
func playerParams(h hit, protocol string) string {
	q := query(h.Query)
	prefix := "_HLS_"
	if protocol == "dash" {
		prefix = "_DASH_"
	}
	return "pathway=" + q[prefix+"pathway"] + " throughput=" + q[prefix+"throughput"]
}

// servers lists the pathways of the first n segments, for a message.
func servers(segs []mediaHit, n int) []string {
	var out []string
	for _, s := range segs[:min(n, len(segs))] {
		out = append(out, fmt.Sprintf("%d@%s", s.seg, s.Server))
	}
	return out
}
