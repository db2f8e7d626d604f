package players

// The checks of TestPlayersFollowAPool on what was observed.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// spread writes durations as their median and range.
func spread(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	if len(ds) == 0 || ds[0] < 0 {
		return "-"
	}
	return fmt.Sprintf("median %s, %s to %s", roundMs(ds[len(ds)/2]), roundMs(ds[0]), roundMs(ds[len(ds)-1]))
}

// sessionOf is the session of a RELOAD-URI, "" when it has none.
func sessionOf(reload string) string {
	u, err := url.Parse(reload)
	if err != nil {
		return ""
	}
	return query(u.RawQuery)["session"]
}

// parseSession reads 32 lowercase hexadecimal digits (doc.go's wire
// format).
func parseSession(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 32 || strings.ToLower(s) != s {
		return out, false
	}
	_, err := hex.Decode(out[:], []byte(s))
	return out, err == nil
}

// keepTTL is internal/pool's KeepTTL as its doc states it (10 s): the
// most TTL of an answer that keeps a new session's reported pathway first.
const keepTTL = 10

// reportedPathway is the pathway a steering request reports the player
// is on: _HLS_pathway, or the first of _DASH_pathway's list; "" for none.
func reportedPathway(rawQuery string) string {
	q := query(rawQuery)
	if v, ok := q["_HLS_pathway"]; ok {
		return v
	}
	v, _, _ := strings.Cut(strings.Trim(q["_DASH_pathway"], `"`), ",")
	return v
}

// keptFirst is the pathway the pool keeps first in the answer to the
// page's first steering request (internal/pool's doc, "The order": a new
// session that reports a listed pathway gets it first), when that is not
// the session's own first; "" otherwise. The test's edges are all up then.
func keptFirst(first steerReq, pp *poolPage, session [16]byte) string {
	full := rendezvousOrder(session, pp.pws, func(string) bool { return true })
	if id := reportedPathway(first.Query); slices.Contains(full, id) && id != full[0] {
		return id
	}
	return ""
}

// keeping is order with id moved first, the others in their order.
func keeping(order []string, id string) []string {
	if id == "" || !slices.Contains(order, id) {
		return order
	}
	return append([]string{id}, slices.DeleteFunc(slices.Clone(order), func(x string) bool { return x == id })...)
}

// ownAnswer is the index of the page's first answer in its session's own
// order: 1 when the pool kept the first request's pathway first, else 0;
// -1 when that answer has not come yet.
func ownAnswer(reqs []steerReq, pp *poolPage) int {
	if len(reqs) == 0 || reqs[0].err != nil {
		return -1
	}
	session, ok := parseSession(sessionOf(reqs[0].manifest.Reload))
	if !ok {
		return -1
	}
	i := 0
	if keptFirst(reqs[0], pp, session) != "" {
		i = 1
	}
	if i >= len(reqs) {
		return -1
	}
	return i
}

// checkPoolManifest judges one answer of the page's pool for its session:
// the seed's manifest (VERSION 1, the TTL, an absolute RELOAD-URI carrying
// the session), the session's rendezvous order over the edges up (all
// before the kill; without the killed one after it; either in the
// dropLimit between), and the clone of cdn-b with its URI-REPLACEMENT.
// With kept set (the first answer, keptFirst), that pathway comes first
// and the TTL is at most keepTTL.
func checkPoolManifest(m steeringManifest, pp *poolPage, session [16]byte, reload string, start, end time.Time, k kill, kept string) string {
	full := keeping(rendezvousOrder(session, pp.pws, func(string) bool { return true }), kept)
	without := keeping(rendezvousOrder(session, pp.pws, func(id string) bool { return id != k.pathway }), kept)
	ttl := poolTTL
	if kept != "" {
		ttl = min(ttl, keepTTL)
	}
	switch {
	case m.Version != 1 || m.TTL != ttl:
		return fmt.Sprintf("VERSION %d TTL %d, not 1 and %d", m.Version, m.TTL, ttl)
	case m.Reload != reload:
		return fmt.Sprintf("RELOAD-URI %q, not %q", m.Reload, reload)
	case end.Before(k.at) && !slices.Equal(m.Priority, full):
		return fmt.Sprintf("PATHWAY-PRIORITY %v before the kill, not the session's order %v", m.Priority, full)
	case start.After(k.at.Add(dropLimit)) && !slices.Equal(m.Priority, without):
		return fmt.Sprintf("PATHWAY-PRIORITY %v %v after the kill, not the session's order without %s, %v", m.Priority, start.Sub(k.at).Round(time.Millisecond), k.pathway, without)
	case !slices.Equal(m.Priority, full) && !slices.Equal(m.Priority, without):
		return fmt.Sprintf("PATHWAY-PRIORITY %v, neither the session's order %v nor that without %s", m.Priority, full, k.pathway)
	case len(m.Clones) != 1:
		return fmt.Sprintf("%d clones, not the one of %s", len(m.Clones), cloneID)
	}
	c := m.Clones[0]
	want := map[string]string(nil)
	if pp.protocol == "hls" {
		want = map[string]string{stableVariantID: pp.perVariantURI()}
	}
	if c.BaseID != cloneBase || c.ID != cloneID || c.Replacement.Host != pp.pathway(cloneID).ip ||
		!mapsEqual(c.Replacement.Params, map[string]string{cloneParam: cloneValue}) || !mapsEqual(c.Replacement.PerVariant, want) {
		return fmt.Sprintf("the clone %+v, not %s of %s with HOST %s, PARAMS %s=%s and per-variant URIs %v", c, cloneID, cloneBase, pp.pathway(cloneID).ip, cloneParam, cloneValue, want)
	}
	return ""
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkPoolSteering judges the page's steering requests: the first has no
// session, and its answer's RELOAD-URI is the pool's route, absolute, with
// the session minted (doc.go's wire format); every later request is that
// RELOAD-URI, with the player's parameters after it, every TTL; every
// answer is the session's (checkPoolManifest). It returns the count of
// requests, the session and the second pathway of its order.
func checkPoolSteering(t *testing.T, o *observed, pp *poolPage, k kill, steerURL string) (int, [16]byte, string) {
	reqs := o.steering(pp.name)
	var session [16]byte
	if len(reqs) < 2 {
		t.Errorf("%d steering requests, fewer than 2", len(reqs))
		return len(reqs), session, ""
	}
	first := reqs[0]
	if _, ok := query(first.Query)["session"]; ok {
		t.Errorf("the first steering request already carries a session: %s", first.Query)
	}
	if first.err != nil {
		t.Fatalf("the first answer is not a steering manifest: %v: %s", first.err, first.Body)
	}
	reload := first.manifest.Reload
	hexSession := sessionOf(reload)
	session, ok := parseSession(hexSession)
	if !ok || reload != steerURL+pp.path()+"?session="+hexSession {
		t.Fatalf("RELOAD-URI %q is not the pool's route, absolute, with a session of 32 hexadecimal digits", reload)
	}
	var gaps []time.Duration
	for i, r := range reqs {
		where := fmt.Sprintf("steering request %d (%s?%s)", i, r.Path, r.Query)
		if r.Status != http.StatusOK || r.err != nil {
			t.Errorf("%s: answered %d, %v: %s", where, r.Status, r.err, r.Body)
			continue
		}
		if r.TLS != strings.HasPrefix(steerURL, "https:") {
			t.Errorf("%s: over TLS %v, the pool's route %s", where, r.TLS, steerURL)
		}
		if i > 0 {
			gaps = append(gaps, r.Start.Sub(reqs[i-1].Start))
			if !strings.HasPrefix(r.Query, "session="+hexSession) {
				t.Errorf("%s: not a request of the RELOAD-URI with session %s", where, hexSession)
			}
		}
		kept := ""
		if i == 0 {
			kept = keptFirst(r, pp, session)
		}
		if why := checkPoolManifest(r.manifest, pp, session, reload, r.Start, r.End, k, kept); why != "" {
			t.Errorf("%s: %s", where, why)
		}
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < poolTTL*time.Second-500*time.Millisecond || med > poolTTL*time.Second+1500*time.Millisecond {
		t.Errorf("the median time between steering requests is %v, not the TTL of %ds (gaps %v)", med, poolTTL, gaps)
	}
	full := rendezvousOrder(session, pp.pws, func(string) bool { return true })
	t.Logf("%d steering requests, session %s, order %v; gaps %v", len(reqs), hexSession, full, gaps)
	t.Logf("first: %s?%s", first.Path, first.Query)
	t.Logf("last:  %s?%s", reqs[len(reqs)-1].Path, reqs[len(reqs)-1].Query)
	return len(reqs), session, full[1]
}

// checkPoolDrop judges the pool's answers to the test's probes, which
// carried the player's session: each is the session's (checkPoolManifest);
// those before the kill name the killed edge, and within dropLimit of the
// kill the pool stops naming it, for good. It returns the time from the
// kill to the last answer naming it.
func checkPoolDrop(t *testing.T, o *observed, pp *poolPage, k kill, session [16]byte) time.Duration {
	var probes []steerReq
	for _, h := range o.hits {
		if h.Server == "probe" && h.Path == pp.path() {
			r := steerReq{hit: h}
			r.err = json.Unmarshal(h.Body, &r.manifest)
			probes = append(probes, r)
		}
	}
	slices.SortFunc(probes, func(a, b steerReq) int { return a.Start.Compare(b.Start) })
	reload := o.steering(pp.name)[0].manifest.Reload
	before, last := 0, -1
	var wrong []string // one line for the first of the wrong answers, and their count
	for i, r := range probes {
		if r.Status != http.StatusOK || r.err != nil {
			wrong = append(wrong, fmt.Sprintf("probe %d: answered %d, %v: %s", i, r.Status, r.err, r.Body))
			continue
		}
		if why := checkPoolManifest(r.manifest, pp, session, reload, r.Start, r.End, k, ""); why != "" {
			wrong = append(wrong, fmt.Sprintf("probe %d: %s", i, why))
		}
		if slices.Contains(r.manifest.Priority, k.pathway) {
			last = i
		}
		if r.End.Before(k.at) {
			before++
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of %d probes answered wrong, the first: %s", len(wrong), len(probes), wrong[0])
	}
	switch {
	case before == 0:
		t.Errorf("no probe was answered before the kill")
		return -1
	case last < 0:
		t.Errorf("no probe's answer named %s", k.pathway)
		return -1
	case last == len(probes)-1:
		t.Errorf("the pool still named %s in its last answer, %v after the kill", k.pathway, probes[last].End.Sub(k.at).Round(time.Millisecond))
		return -1
	}
	drop := probes[last].End.Sub(k.at)
	if drop > dropLimit {
		t.Errorf("the pool named %s until %v after the kill, more than %v", k.pathway, drop.Round(time.Millisecond), dropLimit)
	}
	t.Logf("the pool's last answer naming %s came %v after the kill (%d probes)", k.pathway, drop.Round(time.Millisecond), len(probes))
	return drop
}

// checkPoolFirst judges phase 1: from the first answer in the session's
// own order on (ownAnswer), the player takes its segments from the first
// pathway of its order it can apply, and from nowhere else until the kill;
// where that is the clone, from the clone's host, through the per-variant
// URI where the player applies it, with the clone's PARAMS on the requests
// README.md records. Before it, where the pool kept the first request's
// pathway first, the player takes them from that pathway. It returns how
// long after the own answer its first segment came from there, and what of
// the clone it applied.
func checkPoolFirst(t *testing.T, o *observed, pp *poolPage, k kill) (time.Duration, string) {
	reqs := o.steering(pp.name)
	own := ownAnswer(reqs, pp)
	if own < 0 {
		t.Errorf("no answer in the session's own order")
		return -1, ""
	}
	if own > 0 {
		kept := reqs[0].manifest.Priority[0]
		segs := o.segments(pp.name, "", reqs[0].End, reqs[own].Start)
		for _, m := range segs {
			if m.Server != kept {
				t.Errorf("segment %d came from %s while the first answer kept %s first", m.seg, m.Server, kept)
			}
		}
		t.Logf("kept on %s by the first answer (TTL %d): %d segments from it until the next", kept, reqs[0].manifest.TTL, len(segs))
	}
	priority := reqs[own].manifest.Priority
	if len(priority) == 0 || priority[0] != cloneID {
		// Two sessions in a million draw this (poolWeights).
		t.Errorf("the session's own priority %v does not put %s first", priority, cloneID)
	}
	want := pp.applies(priority)
	answered := reqs[own].End
	segs := o.segments(pp.name, "", time.Time{}, k.at)
	i := slices.IndexFunc(segs, func(m mediaHit) bool { return m.Server == want && !m.Start.Before(answered.Add(-50*time.Millisecond)) })
	if i < 0 {
		t.Errorf("no segment came from %s after the first answer", want)
		return -1, ""
	}
	at := segs[i].Start
	if d := at.Sub(answered); d > 6*time.Second {
		t.Errorf("the first segment from %s came %v after the first answer", want, d)
	}
	for _, m := range segs[i:] {
		if m.Server != want {
			t.Errorf("segment %d came from %s after the player moved to %s", m.seg, m.Server, want)
		}
	}
	clone := pp.pathway(cloneID)
	perVariant := pp.protocol == "hls" && pp.b.perVariantURIs
	withParams := map[string]bool{}
	toClone := 0
	for _, m := range o.media(pp.name, time.Time{}, k.at) {
		if host, _, _ := strings.Cut(m.Host, ":"); host != pp.pathway(m.Server).ip {
			t.Errorf("a request to %s names host %q, not its address", m.Server, m.Host)
		}
		if m.Server != cloneID {
			continue
		}
		toClone++
		dir := "/" + pp.name + "/hls/" + cloneBase + "/"
		if perVariant {
			dir = "/" + pp.name + "/hls/" + perVariantDir + "/"
		}
		if pp.protocol == "hls" && !strings.HasPrefix(m.Path, dir) {
			t.Errorf("a request to the clone is %s, not under %s", m.Path, dir)
		}
		has := query(m.Query)[cloneParam] == cloneValue
		if has {
			withParams[m.kind] = true
		}
		// A per-variant URI replaces HOST and PARAMS both (RFC 8216bis
		// 7.3.2, hls.js's performUriReplacement).
		if wantParams := !perVariant && slices.Contains(pp.b.cloneParams, m.kind); has != wantParams {
			t.Errorf("a %s request to the clone carries its PARAMS: %v, not %v as README.md records (%s?%s)", m.kind, has, wantParams, m.Path, m.Query)
		}
	}
	applied := "none"
	switch {
	case !pp.b.appliesClones && toClone > 0:
		t.Errorf("%d requests to the clone, which README.md says this player does not apply", toClone)
	case pp.b.appliesClones && toClone == 0:
		t.Errorf("no request to the clone, which README.md says this player applies")
	case perVariant:
		applied = "PER-VARIANT-URIS"
	case toClone > 0:
		applied = "HOST"
	}
	if len(withParams) > 0 {
		kinds := make([]string, 0, len(withParams))
		for kind := range withParams {
			kinds = append(kinds, kind)
		}
		slices.Sort(kinds)
		applied += ", PARAMS (" + strings.Join(kinds, ", ") + ")"
	}
	t.Logf("onto %s %v after its answer in its session's own order; %d requests to the clone's host %s; applied: %s", want, at.Sub(answered).Round(time.Millisecond), toClone, clone.ip, applied)
	return at.Sub(answered), applied
}

// checkPoolFailover judges phase 2: from the kill on, the player takes its
// segments from the next pathway of its order it can apply (the order in
// force without the killed edge), the first within ttl_s and a few seconds
// of the kill, and plays on to the end. It returns that pathway, how long
// the move took, the longest stall, and how many requests to the killed
// edge the browser saw fail.
func checkPoolFailover(t *testing.T, o *observed, pp *poolPage, k kill, tEnd time.Time) (string, time.Duration, time.Duration, int) {
	var priority []string
	for _, r := range o.steering(pp.name) {
		if r.End.Before(k.at) {
			priority = r.manifest.Priority
		}
	}
	rest := slices.DeleteFunc(slices.Clone(priority), func(id string) bool { return id == k.pathway })
	next := pp.applies(rest)
	if pp.applies(priority) != k.pathway || next == "" {
		t.Errorf("the priority in force when %s stopped is %v", k.pathway, priority)
		return "", -1, -1, 0
	}
	segs := o.segments(pp.name, "", k.at, tEnd)
	if len(segs) == 0 {
		t.Errorf("no segment after %s stopped", k.pathway)
		return next, -1, -1, 0
	}
	for _, m := range segs {
		if m.Server != next {
			t.Errorf("segment %d came from %s after %s stopped, not from %s, next in the order %v it can apply", m.seg, m.Server, k.pathway, next, priority)
		}
	}
	move := segs[0].Start.Sub(k.at)
	if limit := poolTTL*time.Second + 3*time.Second; move > limit {
		t.Errorf("the first segment from another edge came %v after the kill, more than ttl_s and 3 s", move.Round(time.Millisecond))
	}
	span := tEnd.Sub(k.at).Seconds()
	if p := o.played(pp.name, k.at, tEnd); p < span/2 {
		t.Errorf("played %.1f s of the %.1f s after %s stopped", p, span, k.pathway)
	}
	// Not stalled for good: the video still advances at the end.
	if p := o.played(pp.name, tEnd.Add(-3*time.Second), tEnd); p < 1 {
		t.Errorf("played %.1f s in the last 3 s", p)
	}
	stall := o.stall(pp.name, k.at, tEnd)
	host := "http://" + pp.pathway(k.pathway).authority() + "/"
	var fails []line                    // the page's requests to the edge refused since the kill
	firstFail := map[string]time.Time{} // by the URL's path: a retry keeps it
	for _, l := range o.lines {
		if l.Kind == "requestfailed" && l.Page == pp.name && strings.HasPrefix(l.URL, host) && !l.at.Before(k.at) {
			fails = append(fails, l)
			path, _, _ := strings.Cut(l.URL, "?")
			if _, ok := firstFail[path]; !ok {
				firstFail[path] = l.at
			}
		}
	}
	failed := len(fails)
	var lastFail time.Time
	if failed > 0 {
		lastFail = fails[failed-1].at
	}
	lastAfter := "none"
	if !lastFail.IsZero() {
		lastAfter = lastFail.Sub(segs[0].Start).Round(time.Millisecond).String()
	}
	// Once an answer no longer names the edge, the player has no reason to
	// ask it again (dash.js, which goes back to a failed pathway every TTL
	// while an energy room keeps it first, included): a request to it
	// that fails more than a second after that answer is the player's new
	// choice, unless it retries a request that had failed before the
	// answer (dash.js 5 retries a media segment 3 times, 1 s apart, at the
	// URL it chose first: its retryAttempts and retryIntervals).
	for _, r := range o.steering(pp.name) {
		if r.Start.After(k.at) && r.err == nil && !slices.Contains(r.manifest.Priority, k.pathway) {
			for _, l := range fails {
				if !l.at.After(r.End.Add(time.Second)) {
					continue
				}
				path, _, _ := strings.Cut(l.URL, "?")
				if first, ok := firstFail[path]; ok && first.Before(r.End) {
					t.Logf("a retry of %s, refused first %v before the answer, failed %v after it", path, r.End.Sub(first).Round(time.Millisecond), l.at.Sub(r.End).Round(time.Millisecond))
					continue
				}
				t.Errorf("a request to %s (%s) failed %v after the answer that no longer named it", k.pathway, path, l.at.Sub(r.End).Round(time.Millisecond))
			}
			break
		}
	}
	t.Logf("failover to %s %v after %s stopped; longest stall %v; %d failed requests to %s, the last %s after the move",
		next, move.Round(time.Millisecond), k.pathway, stall.Round(time.Millisecond), failed, k.pathway, lastAfter)
	return next, move, stall, failed
}
