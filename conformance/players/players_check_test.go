package players

// The checks of TestPlayersFollowWaisteer on what was observed.

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

// checkPlayer requires the pinned version, no fatal error, and CMCD on the
// player's segment requests: each page turns CMCD on, so that a player
// that sends none to the steering server is seen to send it elsewhere.
func checkPlayer(t *testing.T, o *observed, pg pageSpec, version string) {
	ss := o.samples(pg.name)
	if len(ss) == 0 {
		t.Fatalf("the page reported nothing")
	}
	if got := strings.TrimSuffix(strings.TrimPrefix(ss[len(ss)-1].Version, "v"), "-debug"); got != version {
		t.Errorf("the page runs %s %q, not the pinned %s", pg.pkg, got, version)
	}
	var errs []string
	for _, l := range o.lines {
		if l.Page != pg.name {
			continue
		}
		for _, e := range l.Errors {
			if e.Fatal {
				t.Errorf("fatal error: %s", e.Text)
			} else {
				errs = append(errs, e.Text)
			}
		}
		if l.Kind == "console" && l.Type == "pageerror" {
			t.Errorf("page error: %s", l.Text)
		}
	}
	if len(errs) > 0 {
		t.Logf("%d errors the player recovered from, the first: %s", len(errs), errs[0])
	}
	withCMCD := 0
	segs := o.segments(pg.name, "", time.Time{}, time.Time{})
	for _, m := range segs {
		if _, ok := query(m.Query)["CMCD"]; ok || m.CMCD != "" {
			withCMCD++
		}
	}
	if pg.b.noCMCD {
		if withCMCD > 0 {
			t.Errorf("CMCD on %d of %d segment requests, from a player README.md says has none", withCMCD, len(segs))
		}
		return
	}
	if withCMCD < len(segs)/2 {
		t.Errorf("CMCD on %d of %d segment requests: the page turns it on", withCMCD, len(segs))
	}
}

// cmcdKey reads an Integer key of a CMCD value in the simple form players
// write (key=value, comma-separated), or -1.
func cmcdKey(cmcd, key string) int64 {
	for item := range strings.SplitSeq(cmcd, ",") {
		if v, ok := strings.CutPrefix(item, key+"="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// checkSteering judges the page's steering requests (§4, §8.1) and the
// decisions they were answered with (§7, §9). It returns their count.
func checkSteering(t *testing.T, o *observed, s *steering, pg pageSpec, tChange time.Time) int {
	reqs := o.steering(pg.name)
	if len(reqs) < 3 {
		t.Errorf("%d steering requests, fewer than 3", len(reqs))
		return len(reqs)
	}
	sc := s.rooms[pg.name]
	ids := make([]string, len(sc.Policy.Pathways))
	for i, p := range sc.Policy.Pathways {
		ids[i] = p.ID
	}
	pathwayParam, throughputParam := "_HLS_pathway", "_HLS_throughput"
	if pg.protocol == "dash" {
		pathwayParam, throughputParam = "_DASH_pathway", "_DASH_throughput"
	}

	// The first request has no session; its answer's RELOAD-URI carries
	// the one the server minted (§8.1).
	first := reqs[0]
	if _, ok := query(first.Query)["wai_session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reloadURL, err := url.Parse(first.manifest.Reload)
	if err != nil {
		t.Fatalf("RELOAD-URI %q: %v", first.manifest.Reload, err)
	}
	session := query(reloadURL.RawQuery)["wai_session"]
	if want := sc.Policy.ReloadURI + "?wai_session=" + session; first.manifest.Reload != want || len(session) != 32 {
		t.Errorf("RELOAD-URI is %q, not the reload_uri with a session (§8.1)", first.manifest.Reload)
	}
	_, firstHas := query(first.Query)[pathwayParam]
	if firstHas != pg.b.firstReport {
		t.Errorf("the first steering request carries %s: %v, not %v as README.md records (%q)", pathwayParam, firstHas, pg.b.firstReport, first.Query)
	}

	client := s.sv.client
	var gaps []time.Duration
	cmcdSeen, fromMTP := 0, 0
	forms := map[string]int{} // the throughput parameter's forms, for the log
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if r.TLS != (s.sv.tls != nil) {
			t.Errorf("%s: over TLS %v, the server's scheme %s", where, r.TLS, s.sv.scheme)
		}
		if i > 0 {
			gaps = append(gaps, r.Start.Sub(reqs[i-1].Start))
		}
		q := query(r.Query)
		// Every later request is the RELOAD-URI, with the player's
		// parameters after it.
		if i > 0 && !strings.HasPrefix(r.Query, "wai_session="+session) {
			t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, session)
		}
		if r.manifest.Reload != first.manifest.Reload {
			t.Errorf("%s: RELOAD-URI %q changed from %q", where, r.manifest.Reload, first.manifest.Reload)
		}
		pw, hasPw := q[pathwayParam]
		tp, hasTp := q[throughputParam]
		if i > 0 && (!hasPw || !hasTp) {
			t.Errorf("%s: a reload without %s and %s", where, pathwayParam, throughputParam)
		}
		named := -1   // the pathway the request names (§4.2, §4.3)
		namedTp := "" // its throughput item
		if hasPw {
			quoted := len(pw) >= 2 && pw[0] == '"' && pw[len(pw)-1] == '"'
			if quoted != pg.b.quotedList {
				t.Errorf("%s: %s=%s quoted: %v, not %v as README.md records", where, pathwayParam, pw, quoted, pg.b.quotedList)
			}
			list := strings.Split(strings.Trim(pw, `"`), ",")
			tps := strings.Split(tp, ",")
			for j, id := range list {
				if k := slices.Index(ids, id); k >= 0 {
					named = k
					if j < len(tps) {
						namedTp = tps[j]
					}
					break
				}
			}
			if named < 0 {
				t.Errorf("%s: %s=%s names no pathway of the policy", where, pathwayParam, pw)
			}
			for _, v := range tps {
				if _, err := strconv.ParseUint(v, 10, 64); err != nil && (v != "" || pg.protocol == "hls") {
					t.Errorf("%s: %s=%s is not a list of integers", where, throughputParam, tp)
				}
			}
			// The throughput of one pathway alone: a number, or
			// empty where README.md says the player has none yet.
			if len(list) == 1 && named >= 0 {
				form := "a number"
				if namedTp == "" {
					form = "empty"
					if !pg.b.throughputLags || !firstOn(reqs[:i], pathwayParam, pw) {
						t.Errorf("%s: the throughput of %s is empty, not as README.md records", where, ids[named])
					}
				}
				forms[ids[named]+": "+form]++
			}
		}
		cmcd, hasCMCD := q["CMCD"]
		if r.CMCD != "" {
			hasCMCD, cmcd = true, r.CMCD
		}
		if hasCMCD {
			cmcdSeen++
			if !pg.b.cmcd {
				t.Errorf("%s: CMCD %q, which README.md says this player does not send", where, cmcd)
			}
		}

		// The decision the answer names verifies with the manifest the
		// player received (§8.4, §9), and states the report the server
		// read from the request (§4).
		raw, err := fetch(client, r.manifest.Decision)
		if err != nil {
			t.Errorf("%s: fetching its decision: %v", where, err)
			continue
		}
		if _, err := verify.Verify(verify.Input{
			Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes, Policy: sc.PolicyBytes,
			Decision: raw, Records: sc.Records, Manifest: r.Body,
		}); err != nil {
			t.Errorf("%s: its decision does not verify: %v", where, err)
			continue
		}
		dec, err := decision.Parse(raw)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		rep := dec.Report
		if dec.Reason != decision.Rank || dec.TTL != ttlSeconds {
			t.Errorf("%s: reason %s TTL %d, not rank and %d: the evidence alone orders these pathways", where, dec.Reason, dec.TTL, ttlSeconds)
		}
		if named >= 0 && (rep.Present&report.HasPathway == 0 || int(rep.Pathway) != named) {
			t.Errorf("%s: the decision states pathway %d (present %03b), not %d the request names", where, rep.Pathway, rep.Present, named)
		}
		switch mtp := cmcdKey(cmcd, "mtp"); {
		case named >= 0 && namedTp != "":
			if n, _ := strconv.ParseUint(namedTp, 10, 64); rep.Present&report.HasThroughput == 0 || rep.Throughput != n {
				t.Errorf("%s: the decision states throughput %d (present %03b), not %s", where, rep.Throughput, rep.Present, namedTp)
			}
		case hasCMCD && mtp >= 0:
			// §4.4: with no throughput of its own, T is mtp × 1000.
			fromMTP++
			if rep.Present&report.HasThroughput == 0 || rep.Throughput != uint64(mtp)*1000 {
				t.Errorf("%s: the decision states throughput %d (present %03b), not CMCD mtp %d × 1000", where, rep.Throughput, rep.Present, mtp)
			}
		}
		if bl := cmcdKey(cmcd, "bl"); hasCMCD && bl >= 0 && (rep.Present&report.HasBuffer == 0 || rep.Buffer != uint64(bl)) {
			t.Errorf("%s: CMCD bl=%d, the decision states buffer %d (present %03b)", where, bl, rep.Buffer, rep.Present)
		}
		// Before the change the clone is the cheapest, after it cdn-b
		// (a request across the instant may have either).
		want := ""
		switch {
		case r.End.Before(tChange):
			want = "cdn-b-clone"
		case r.Start.After(tChange):
			want = "cdn-b"
		}
		if want != "" && (len(r.manifest.Priority) == 0 || r.manifest.Priority[0] != want) {
			t.Errorf("%s: PATHWAY-PRIORITY %v, not %s first as the evidence gives", where, r.manifest.Priority, want)
		}
	}
	if pg.b.cmcd && cmcdSeen < len(reqs)-1 {
		t.Errorf("CMCD on %d of %d steering requests; README.md says this player sends it", cmcdSeen, len(reqs))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < ttlSeconds*time.Second-300*time.Millisecond || med > ttlSeconds*time.Second+time.Second {
		t.Errorf("the median time between steering requests is %v, not the TTL of %ds", med, ttlSeconds)
	}
	t.Logf("%d steering requests, %d with CMCD, %d with T from CMCD mtp; throughput of one pathway: %v", len(reqs), cmcdSeen, fromMTP, forms)
	t.Logf("first: %s?%s", first.Path, first.Query)
	t.Logf("last:  %s?%s", reqs[len(reqs)-1].Path, reqs[len(reqs)-1].Query)
	return len(reqs)
}

// firstOn reports whether none of the requests before named the same
// pathway list as pw after the last that named another: whether this is
// the first reload since the player moved.
func firstOn(before []steerReq, param, pw string) bool {
	if len(before) == 0 {
		return true
	}
	return query(before[len(before)-1].Query)[param] != pw
}

func fetch(c *http.Client, u string) ([]byte, error) {
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, err
}

// checkFirst judges phase 1: once the first answer puts the clone first,
// the player takes its segments from the first pathway of the priority it
// applies (the clone, from the clone's host, where it applies clones) and
// from nowhere else, with the clone's PARAMS where README.md says. It
// returns how long after that answer its first segment came from there.
func checkFirst(t *testing.T, o *observed, pg pageSpec, tChange time.Time) time.Duration {
	clone, first := pathwayByID("cdn-b-clone"), pg.firstPathway()
	var answered time.Time
	for _, r := range o.steering(pg.name) {
		if len(r.manifest.Priority) > 0 && r.manifest.Priority[0] == clone.id {
			answered = r.End
			break
		}
	}
	if answered.IsZero() {
		t.Errorf("no steering answer put %s first", clone.id)
		return -1
	}
	segs := o.segments(pg.name, "", time.Time{}, tChange)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == first && !m.Start.Before(answered.Add(-50*time.Millisecond)) })
	if i < 0 {
		t.Errorf("no segment came from %s after the answer that put %s first", first, clone.id)
		return -1
	}
	at := segs[i].Start
	if d := at.Sub(answered); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the answer that put %s first", first, d, clone.id)
	}
	for _, m := range segs[i:] {
		if m.Server != first {
			t.Errorf("segment %d came from %s after the player moved to %s", m.seg, m.Server, first)
		}
	}
	toClone := 0
	for _, m := range o.media(pg.name, time.Time{}, tChange) {
		if m.Server != clone.id {
			continue
		}
		toClone++
		if host, _, _ := strings.Cut(m.Host, ":"); host != clone.ip {
			t.Errorf("a request to the clone names host %q, not the clone's HOST %s", m.Host, clone.ip)
		}
		if pg.protocol == "hls" && m.kind == "playlist" && !strings.Contains(m.Path, "/hls/"+clone.base+"/") {
			t.Errorf("the clone's media playlist is %s, not the base's URI with the clone's host", m.Path)
		}
		has := query(m.Query)[cloneParam] == cloneValue
		if want := slices.Contains(pg.b.cloneParams, m.kind); has != want {
			t.Errorf("a %s request to the clone carries the clone's PARAMS: %v, not %v as README.md records (%s?%s)", m.kind, has, want, m.Path, m.Query)
		}
	}
	if !pg.b.appliesClones && toClone > 0 {
		t.Errorf("%d requests to the clone, which README.md says this player does not apply", toClone)
	}
	t.Logf("onto %s %v after the first answer put %s first; %d requests to the clone's host", first, at.Sub(answered).Round(time.Millisecond), clone.id, toClone)
	return at.Sub(answered)
}

// checkEvidenceChange judges phase 2: once the records of the next period
// make cdn-b the cheapest, the player's next reload puts it first, and the
// player takes its segments from it from then on. It returns how long
// after the change the first segment came from cdn-b.
func checkEvidenceChange(t *testing.T, o *observed, pg pageSpec, tChange, tStop time.Time) time.Duration {
	var reload steerReq
	for _, r := range o.steering(pg.name) {
		if r.Start.After(tChange) && len(r.manifest.Priority) > 0 && r.manifest.Priority[0] == "cdn-b" {
			reload = r
			break
		}
	}
	if reload.Start.IsZero() {
		t.Errorf("no steering answer after the change put cdn-b first")
		return -1
	}
	// The next reload: the first request after the change (checkSteering
	// requires every answer after it to put cdn-b first), a TTL at most
	// after it, with some slack for a loaded machine.
	if d := reload.Start.Sub(tChange); d > ttlSeconds*time.Second+2*time.Second {
		t.Errorf("the first reload after the change came %v after it, more than the TTL", d)
	}
	segs := o.segments(pg.name, "", tChange, tStop)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == "cdn-b" })
	if i < 0 {
		t.Errorf("no segment from cdn-b after the change")
		return -1
	}
	at := segs[i].Start
	if at.Before(reload.Start) {
		t.Errorf("a segment came from cdn-b %v before the reload that put it first", reload.Start.Sub(at))
	}
	if d := at.Sub(reload.End); d > 6*time.Second {
		t.Errorf("the first segment from cdn-b came %v after the reload that put it first", d)
	}
	for _, m := range segs[i:] {
		if m.Server != "cdn-b" {
			t.Errorf("segment %d came from %s after the player moved to cdn-b", m.seg, m.Server)
		}
	}
	t.Logf("onto cdn-b %v after the evidence changed (the reload %v after it, the first segment %v after the reload)",
		at.Sub(tChange).Round(time.Millisecond), reload.Start.Sub(tChange).Round(time.Millisecond), at.Sub(reload.End).Round(time.Millisecond))
	return at.Sub(tChange)
}

// checkFailover judges phase 3: from the instant cdn-b's server stopped,
// the player takes its segments from the next pathway of the priority in
// force, and plays on. It returns how long the move took (to the first
// segment served by the next pathway), the longest stall, and how many
// requests to the stopped pathway failed.
func checkFailover(t *testing.T, o *observed, pg pageSpec, stopped string, tStop, tEnd time.Time) (move, stall time.Duration, failed int) {
	var priority []string
	for _, r := range o.steering(pg.name) {
		if r.End.Before(tStop) {
			priority = r.manifest.Priority
		}
	}
	i := slices.Index(priority, stopped)
	if i != 0 || len(priority) < 2 {
		t.Errorf("the priority in force when %s stopped is %v", stopped, priority)
		return -1, -1, 0
	}
	next := priority[1]
	segs := o.segments(pg.name, "", tStop, tEnd)
	if len(segs) == 0 {
		t.Errorf("no segment after %s stopped", stopped)
		return -1, -1, 0
	}
	for _, m := range segs {
		if m.Server != next {
			t.Errorf("segment %d came from %s after %s stopped, not from %s, next in the priority %v", m.seg, m.Server, stopped, next, priority)
		}
	}
	move = segs[0].Start.Sub(tStop)
	stall = o.stall(pg.name, tStop, tEnd)
	span := tEnd.Sub(tStop).Seconds()
	if p := o.played(pg.name, tStop, tEnd); p < span/2 {
		t.Errorf("played %.1f s of the %.1f s after %s stopped", p, span, stopped)
	}
	// The server cannot log a refused connection; the browser can.
	host := "http://" + pathwayByID(stopped).authority() + "/"
	var last time.Time
	for _, l := range o.lines {
		if l.Kind == "requestfailed" && l.Page == pg.name && strings.HasPrefix(l.URL, host) && !l.at.Before(tStop) {
			failed++
			last = l.at
		}
	}
	lastAfter := "none"
	if !last.IsZero() {
		lastAfter = last.Sub(segs[0].Start).Round(time.Millisecond).String()
	}
	backLater := !last.IsZero() && last.Sub(segs[0].Start) > 1500*time.Millisecond
	if backLater != pg.b.retriesFailed {
		t.Errorf("went back to the stopped pathway after moving: %v (the last failure after the move: %s), not %v as README.md records",
			backLater, lastAfter, pg.b.retriesFailed)
	}
	t.Logf("failover to %s %v after %s stopped; longest stall %v; %d failed requests to %s, the last %s after the move",
		next, move.Round(time.Millisecond), stopped, stall.Round(time.Millisecond), failed, stopped, lastAfter)
	return move, stall, failed
}
