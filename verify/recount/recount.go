// Package recount is the auditor's recount of §9.2. A decision has only
// the server's word for its loads and its bands' shares; over every
// decision of a room's log, the recount counts the loads again (§6) and
// checks the draws and the bands' shares (§6.3).
//
// # The loads
//
// A session counts toward one pathway, the one its latest decision put
// first (Priority[0]), from that decision's T until its expiry
// T + TTL·1 000 000 + grace µs inclusive (SPEC-NOTES "Session expiry"). A
// decision states the counts at its T before it is itself recorded, so its
// own session, when its previous decision is still live, is counted on that
// decision's first pathway (§6.1). The server decides one request at a time
// per room and gives each decision a T above the room's previous one, and
// above every other server's decision it counted (SPEC-NOTES "A decision
// comes after the sessions it counts"), so sorting a room's decisions by T
// (ties by their index in the log) replays the order in which the server
// read and updated its table. At the first decision whose policy's pathway
// ids, in order, are not the table's, the table is emptied, as the server
// empties it when it installs such a policy
// (SPEC-NOTES "A policy of other pathways resets the loads", "The loads survive a policy
// of the same pathways").
//
// Several servers on one database see each other's sessions up to about δ
// late (SPEC-NOTES "Loads across servers"). With Options.Staleness δ, a
// stated load is accepted when it differs from the recount by at most the
// number of changes to that pathway's count that a server up to δ behind
// could have missed: those recorded before the decision (in the order
// above) at an instant of at least T − δ, where a change is
//   - a decision that places a session on the pathway (a new session, one
//     moved from another pathway, or one whose entry had expired): at its T;
//   - a decision that moves a session off it: at its T;
//   - a decision that keeps a session on it whose previous expiry was less
//     than δ after the decision's T: at its T (a server that missed the
//     decision may have let the session expire);
//   - a session on it expiring: at its expiry.
//
// A server that has every other server's decisions of T below its own less
// δ, and all of its own, differs from the recount on a pathway only by
// sessions each of which has one of these changes in the window, so the
// bound holds for it. SPEC-NOTES "Issue 16: the audit's recount" says what
// else it assumes.
//
// # The draws and the shares
//
// Each decision's Draw must be the one §6.3 gives for its policy and
// session. A decision whose reason is share must have its draw in the band
// of its first pathway (§6.4 step 4). Per policy and per pathway i with a
// min_share_ppm p·10⁶ above 0, of the n distinct sessions decided under the
// policy, the k whose draws fall in i's band must be within Z standard
// deviations of a binomial's mean: |k − n·p| ≤ Z·√(n·p·(1 − p)). The server
// mints the sessions; one that ground them to keep a band empty (or full)
// is caught.
package recount

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// Entry is one decision of a room's logs.
type Entry struct {
	// Log is the log that holds its leaf: 0 for issue 16's one log; a
	// room steered by several servers has one log per server (issue 31).
	Log      int64
	Index    int64              // its leaf's index in the log
	Decision *decision.Decision // as read (decision.Parse); its signature is not checked here
	Policy   *policy.Policy     // the policy it names
}

// Options are the auditor's settings; the zero value recounts one server
// with the server's default grace.
type Options struct {
	// Grace is the server's session_grace, µs; 0 is its default, 20 s.
	Grace uint64
	// Staleness is δ, µs, for decisions of several servers on one
	// database; 0 requires the loads exactly.
	Staleness uint64
	// Z is the bands' bound in standard deviations; not above 0, 5.
	Z float64
	// Unheld are the instants (t, from their leaves) of the room's
	// decisions that are not given: pruned by retention, or not fetched.
	// Their sessions may count until t + ttl_s + grace, ttl_s the largest
	// of the policies given, so a decision until then is not compared
	// (LoadsUnknown) though the table goes on.
	Unheld []uint64
}

// DefaultGrace is the server's default session_grace, 20 s in µs.
const DefaultGrace = 20_000_000

// DefaultZ is the default bound on a band's count, in standard deviations:
// a fair server fails it about once in 1.7 million bands.
const DefaultZ = 5

// Examples is how many mismatches of each kind a report keeps, the first
// in T order first.
const Examples = 10

// At names a decision: its leaf in its log, its digest and its T.
type At struct {
	Log    int64
	Index  int64
	Digest sig.Hash
	T      uint64
}

// Leaf names the decision's leaf in messages: "leaf 7", or "leaf 7 of log
// 3" in a log other than 0.
func (a At) Leaf() string {
	if a.Log == 0 {
		return fmt.Sprintf("leaf %d", a.Index)
	}
	return fmt.Sprintf("leaf %d of log %d", a.Index, a.Log)
}

// LoadMismatch is a stated load that the recount does not accept.
type LoadMismatch struct {
	At
	Pathway int
	ID      string
	Stated  uint32
	Recount uint32
	Changes int // the changes within δ that a stated load may differ by
}

// DrawMismatch is a stated draw that is not §6.3's.
type DrawMismatch struct {
	At
	Stated, Draw uint32
}

// ShareMismatch is a decision of reason share whose draw is not in its
// first pathway's band (§6.4 step 4).
type ShareMismatch struct {
	At
	First  int  // its first pathway
	Band   int  // the pathway whose band holds its draw, when InBand
	InBand bool // whether its draw is in any band
}

// BandShare is one band's count over a policy's sessions (§6.3).
type BandShare struct {
	Policy   sig.Hash
	Pathway  int
	ID       string
	SharePPM uint32
	Sessions int     // n: distinct sessions decided under the policy
	InBand   int     // k: those whose draw falls in the band
	Placed   int     // those with a decision of reason share with the pathway first
	Expected float64 // n·p
	Bound    float64 // Z·√(n·p·(1 − p))
	Within   bool    // |k − n·p| ≤ Bound
}

// Report is what the recount found.
type Report struct {
	Options   Options // as applied, defaults filled in
	Decisions int
	Rooms     int
	// Resets is how many times a room's table was emptied for a policy of
	// other pathways.
	Resets int
	// EqualT counts decisions whose T is their room's previous decision's:
	// their order is their index in the log, which one server never needs.
	EqualT int

	LoadsUnknown  int // decisions a decision not given may have counted for (Options.Unheld)
	LoadsMatch    int // decisions whose every stated load is the recount
	LoadsStale    int // decisions with a load that differs but within δ's changes
	LoadsMismatch int // decisions with a load the recount does not accept
	Loads         []LoadMismatch

	DrawsMismatch int
	Draws         []DrawMismatch

	SharesMismatch int
	Shares         []ShareMismatch

	Bands        []BandShare // by policy in order of first decision, then pathway
	BandsOutside int
}

// OK reports whether the server's claims hold: every load accepted, every
// draw §6.3's, every share placement in its band and every band within
// its bound.
func (r *Report) OK() bool {
	return r.LoadsMismatch == 0 && r.DrawsMismatch == 0 && r.SharesMismatch == 0 && r.BandsOutside == 0
}

// Recount checks the loads, draws and bands' shares of entries, in any
// order (§9.2). It returns an error, naming the entry, for one it cannot
// recount: a nil decision or policy, a policy that is not the one the
// decision names or of its room, or a decision whose count of pathways or
// first pathway does not fit its policy (§9.1 step 3 refuses those).
func Recount(entries []Entry, o Options) (*Report, error) {
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if !(o.Z > 0) {
		o.Z = DefaultZ
	}
	rc := &recounter{
		o:        o,
		rep:      &Report{Options: o},
		info:     map[*policy.Policy]*policyInfo{},
		byDigest: map[sig.Hash]*policyStats{},
		classes:  map[string]int{},
	}
	for k := range entries {
		if err := rc.check(&entries[k]); err != nil {
			return nil, fmt.Errorf("recount: entry %d (%s): %w", k, At{Log: entries[k].Log, Index: entries[k].Index}.Leaf(), err)
		}
	}

	order := make([]int, len(entries))
	for k := range order {
		order[k] = k
	}
	// The server's order: per room by T; equal Ts, possible only across
	// servers, by log, then by the log's order (issue 31: the merge of a
	// room's logs by (t, log, index)).
	slices.SortStableFunc(order, func(a, b int) int {
		da, db := entries[a].Decision, entries[b].Decision
		if c := bytes.Compare(da.Room[:], db.Room[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(da.T, db.T); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(entries[a].Log, entries[b].Log), cmp.Compare(entries[a].Index, entries[b].Index))
	})

	// The last instant a decision not given may count a session until.
	if len(o.Unheld) > 0 {
		var ttl uint64
		for k := range entries {
			ttl = max(ttl, uint64(entries[k].Policy.TTLs), uint64(entries[k].Policy.MinTTLs))
		}
		rc.unknownUntil, rc.unknown = slices.Max(o.Unheld)+ttl*1_000_000+o.Grace, true
	}
	var t *table
	for j, k := range order {
		e := &entries[k]
		d := e.Decision
		if j == 0 || d.Room != entries[order[j-1]].Decision.Room {
			t = newTable(o.Staleness)
			rc.rep.Rooms++
		} else if d.T == entries[order[j-1]].Decision.T {
			rc.rep.EqualT++
		}
		rc.add(t, e)
	}
	rc.finish()
	return rc.rep, nil
}

// policyInfo is what the recount keeps of one policy value.
type policyInfo struct {
	class int // its pathway ids, in order, interned
	stats *policyStats
}

// policyStats gathers the draws of one policy's sessions.
type policyStats struct {
	p        *policy.Policy
	digest   sig.Hash
	sessions map[report.Session]drawn
	placed   map[placement]struct{}
}

// drawn is a session's draw under a policy and the band that holds it.
type drawn struct {
	draw uint32
	band int16 // -1 for none
}

type placement struct {
	session report.Session
	pathway uint8
}

type recounter struct {
	o        Options
	rep      *Report
	info     map[*policy.Policy]*policyInfo
	byDigest map[sig.Hash]*policyStats
	stats    []*policyStats // in order of first decision
	classes  map[string]int
	// unknownUntil is when a decision not given may last count a
	// session, when unknown (Options.Unheld).
	unknownUntil uint64
	unknown      bool
}

// check refuses an entry the recount cannot read, and learns its policy.
func (rc *recounter) check(e *Entry) error {
	d, p := e.Decision, e.Policy
	if d == nil || p == nil {
		return fmt.Errorf("no decision or no policy")
	}
	if _, ok := rc.info[p]; !ok {
		digest := p.Digest()
		ids := p.IDs()
		key := strings.Join(ids, "\x00") // §3.3: an id never holds a NUL
		class, ok := rc.classes[key]
		if !ok {
			class = len(rc.classes)
			rc.classes[key] = class
		}
		st := rc.byDigest[digest]
		if st == nil {
			st = &policyStats{p: p, digest: digest, sessions: map[report.Session]drawn{}, placed: map[placement]struct{}{}}
			rc.byDigest[digest] = st
		}
		rc.info[p] = &policyInfo{class: class, stats: st}
	}
	if d.Policy != rc.info[p].stats.digest {
		return fmt.Errorf("the decision names policy %s, given %s", d.Policy, rc.info[p].stats.digest)
	}
	if d.Room != p.Room {
		return fmt.Errorf("the decision is of room %s, its policy of %s", d.Room, p.Room)
	}
	n := len(p.Pathways)
	if n == 0 || n > decision.MaxCount || len(d.Pathways) != n {
		return fmt.Errorf("the decision states %d pathways, its policy has %d", len(d.Pathways), n)
	}
	if len(d.Priority) == 0 || int(d.Priority[0]) >= n {
		return fmt.Errorf("the decision's priority has no first pathway of its policy's %d", n)
	}
	if _, carry := bits.Add64(d.T, uint64(d.TTL)*1_000_000+rc.o.Grace, 0); carry != 0 {
		return fmt.Errorf("t %d: its session's expiry passes the room clock's range", d.T)
	}
	return nil
}

// add takes the room's next decision in the server's order.
func (rc *recounter) add(t *table, e *Entry) {
	d := e.Decision
	info := rc.info[e.Policy]
	rep := rc.rep
	rep.Decisions++
	at := func() At { return At{Log: e.Log, Index: e.Index, Digest: d.Digest(), T: d.T} }

	// The loads (§6, §9.2): the table at T, before this decision joins it.
	if info.class != t.class {
		if t.class >= 0 {
			rep.Resets++
		}
		t.reset(info.class, len(d.Pathways))
	}
	t.expire(d.T)
	exact, accepted := true, true
	var bad []LoadMismatch
	for i := range d.Pathways {
		stated, counted := d.Pathways[i].Load, t.counts[i]
		if stated == counted {
			continue
		}
		exact = false
		diff := uint64(max(stated, counted) - min(stated, counted))
		changes := t.changesSince(i, d.T)
		if diff <= uint64(changes) {
			continue
		}
		accepted = false
		if len(rep.Loads)+len(bad) < Examples {
			bad = append(bad, LoadMismatch{Pathway: i, ID: e.Policy.Pathways[i].ID, Stated: stated, Recount: counted, Changes: changes})
		}
	}
	switch {
	case rc.unknown && d.T <= rc.unknownUntil:
		rep.LoadsUnknown++
	case !accepted:
		rep.LoadsMismatch++
		a := at()
		for _, m := range bad {
			m.At = a
			rep.Loads = append(rep.Loads, m)
		}
	case !exact:
		rep.LoadsStale++
	default:
		rep.LoadsMatch++
	}
	expires := d.T + uint64(d.TTL)*1_000_000 + rc.o.Grace // check made sure it fits
	t.set(d.Session, d.Priority[0], expires, d.T)

	// The draw (§6.3), once per session and policy.
	st := info.stats
	if len(st.sessions) == 0 {
		rc.stats = append(rc.stats, st)
	}
	s, seen := st.sessions[d.Session]
	if !seen {
		s.draw = decision.Draw(st.digest, d.Session)
		s.band = -1
		if b, ok := decision.Band(st.p, s.draw); ok {
			s.band = int16(b)
		}
	}
	if d.Draw != s.draw {
		rep.DrawsMismatch++
		if len(rep.Draws) < Examples {
			rep.Draws = append(rep.Draws, DrawMismatch{At: at(), Stated: d.Draw, Draw: s.draw})
		}
	}
	// §6.4 step 4: share places a session on the pathway whose band holds
	// its draw, and nowhere else.
	if d.Reason == decision.Share {
		first := d.Priority[0]
		if s.band != int16(first) {
			rep.SharesMismatch++
			if len(rep.Shares) < Examples {
				rep.Shares = append(rep.Shares, ShareMismatch{At: at(), First: int(first), Band: int(max(s.band, 0)), InBand: s.band >= 0})
			}
		}
		st.placed[placement{d.Session, first}] = struct{}{}
	}
	st.sessions[d.Session] = s
}

// finish counts each band over its policy's sessions (§6.3).
func (rc *recounter) finish() {
	z := rc.o.Z
	for _, st := range rc.stats {
		var inBand, placed [decision.MaxCount + 1]int
		for _, s := range st.sessions {
			if s.band >= 0 {
				inBand[s.band]++
			}
		}
		for pl := range st.placed {
			placed[pl.pathway]++
		}
		n := len(st.sessions)
		for i := range st.p.Pathways {
			ppm := st.p.Pathways[i].MinSharePPM
			if ppm == 0 {
				continue
			}
			ppm = min(ppm, decision.DrawRange)
			k := inBand[i]
			// |k − n·p| ≤ Z·√(n·p·(1 − p)), both sides times 10⁶ so that
			// the deviation is an exact integer.
			dev := int64(k)*decision.DrawRange - int64(n)*int64(ppm)
			if dev < 0 {
				dev = -dev
			}
			bound := z * math.Sqrt(float64(n)*float64(ppm)*float64(decision.DrawRange-ppm))
			b := BandShare{
				Policy: st.digest, Pathway: i, ID: st.p.Pathways[i].ID, SharePPM: ppm,
				Sessions: n, InBand: k, Placed: placed[i],
				Expected: float64(n) * float64(ppm) / decision.DrawRange,
				Bound:    bound / decision.DrawRange,
				Within:   float64(dev) <= bound,
			}
			if !b.Within {
				rc.rep.BandsOutside++
			}
			rc.rep.Bands = append(rc.rep.Bands, b)
		}
	}
}
