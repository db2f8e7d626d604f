package roomsteer

import (
	"errors"
	"math/bits"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/commit"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// errStale says that the room's state changed while a request was being
// decided under it: the request is decided again under the new one.
var errStale = errors.New("server: the room's policy changed during the request")

// ServeSteer answers a steering request (§4 to §8.1): read the report and
// the session (minting one for a first request), take the loads and decide
// (§6), sign (§7.3), commit the decision durably with others, and answer
// the manifest (§8.1).
//
// While a room has a policy, its steering route never answers 404, 410 or
// 429, which stop players' steering for good (players.md). A request that
// cannot be stored (or decided) is answered 503 (or 500) with Retry-After,
// which every player retries, rather than with a manifest whose decision
// an auditor could not fetch; its session's count is taken back (§6: a
// session counts from its latest stored decision).
func (h *Room) ServeSteer(w http.ResponseWriter, r *http.Request) {
	if !answer.Steerable(w, r) {
		return
	}
	if h.d.Closing.Load() {
		h.unavailable(w, api.Errorf(api.Closing, "the server is closing"))
		return
	}

	// §4.1: the query is read once, for the session and the report.
	q := report.ParseQuery(r.RequestURI)
	session, ok := q.Session()
	if h.d.Budgets != nil {
		if why := h.d.Budgets.Admit(h.d.Reach.Of(r).Client, !ok, h.limitNow()); why != "" {
			h.overBudget(w, why, session, ok)
			return
		}
	}
	if !ok {
		// COMPANION §6: no session, a first request: mint one (§6).
		var err error
		if session, err = report.NewSession(nil); err != nil {
			h.unavailable(w, api.Errorf(api.Internal, "minting a session: %v", err))
			return
		}
	}

	x := steerings.Get().(*steering)
	if aerr := h.decide(r, &q, session, x); aerr != nil {
		x.release()
		h.unavailable(w, aerr)
		return
	}
	// The manifest goes out only once its decision is durable: it names
	// the decision's URI (§8.4), where an auditor must find it.
	if err := h.d.Commits.Commit(r.Context(), &x.job); err != nil {
		// The committer has answered (or never took) the job. §6 counts
		// a session from its latest stored decision: this one was not
		// stored, so its Steer is taken back (a session counted until its
		// expiry would inflate the loads of every decision after it).
		h.d.Loads.Unsteer(h.id, session, x.t)
		x.release()
		h.unavailable(w, h.d.Fails.Failed("the decision could not be stored", err))
		return
	}

	d := &x.d
	x.st.firsts[d.Reason][d.Priority[0]].Add(1)
	if h.d.Budgets != nil {
		h.keepLatest(x, session)
	}
	mb := answer.Buffers.Get().(*[]byte)
	m := x.st.writer.Append((*mb)[:0], d.TTL, session, d.Priority, x.digest)
	answer.Manifest(w, answer.HeaderManifest, x.st.contentLength(len(m)), m, mb)
	x.release()
}

// unavailable answers a steering request that cannot be decided or
// stored, with Retry-After the policy's min_ttl_s, the TTL the text gives
// a client it asks to come back soon (§6.5). Players retry a 500 or a 503
// (hls.js and Shaka after the last TTL, Media3 after 300 s, dash.js after
// its TTL unless it was the first request); none stops steering for it.
func (h *Room) unavailable(w http.ResponseWriter, e *api.Error) {
	w.Header().Set("Retry-After", strconv.FormatUint(uint64(h.state.Load().policy.MinTTLs), 10))
	web.Refuse(w, e)
}

// steering is one steering request's work: what its decision is made
// from, the decision, and the job that commits it. It is reused, so that a
// request allocates little beyond what net/http does.
type steering struct {
	h    *Room
	st   *State
	rk   *ranked
	rep  report.Report
	draw uint32
	t    uint64

	out     decision.Outcome
	loads   []uint32 // as the rule read them
	ruleErr error
	rule    func(loads []uint32, at uint64) (int, uint64, error) // x.decideLoads, bound once

	d      decision.Decision
	digest sig.Hash
	job    commit.Job
}

var steerings = sync.Pool{New: func() any {
	x := &steering{job: commit.NewJob()}
	x.rule = x.decideLoads
	return x
}}

// release returns x to the pool, keeping its buffers and no reference to
// a room.
func (x *steering) release() {
	x.h, x.st, x.rk, x.ruleErr = nil, nil, nil, nil
	x.job.Evidence = store.Evidence{}
	steerings.Put(x)
}

// decideLoads is the part of the rule that reads the loads (§6.1 to §6.5),
// run by the table of loads with the room's loads held (Loads.Steer): the
// draw was taken before. The decision's t is the instant the loads were
// read at, which the table makes later than the room's previous one, so
// that the room's decisions in t order are those in which the loads were
// read (the audit's recount, issue 16); the ranking must cover it.
func (x *steering) decideLoads(loads []uint32, at uint64) (int, uint64, error) {
	if x.h.state.Load() != x.st || at != x.t && !x.rk.r.Covers(at) {
		x.ruleErr = errStale
		return 0, 0, errStale
	}
	x.t = at
	o, err := x.rk.r.DecideDrawn(x.rep, x.draw, loads)
	if err != nil {
		x.ruleErr = err
		return 0, 0, err
	}
	x.out = o
	x.loads = append(x.loads[:0], loads...)
	// §6, §9.2: the session counts toward its first pathway until its
	// manifest's TTL and the grace have passed.
	expires, carry := bits.Add64(x.t, uint64(o.TTL)*1_000_000+x.h.d.Grace, 0)
	if carry != 0 {
		x.ruleErr = errors.New("the session's expiry is past the room clock's range")
		return 0, 0, x.ruleErr
	}
	return int(o.First), expires, nil
}

// decide makes and signs the decision for one request into x: the report
// read under the room's state (§4), the draw taken (§6.3), the loads taken
// and the session counted atomically with the rest of the rule (§6,
// Loads.Steer; taken back, Loads.Unsteer, if no decision comes of it), the
// decision built and signed (§7.3) and compacted for the store. A failure of the table of loads is store_unavailable; any other
// is internal. The request counts as being decided (the committer waits
// for it, inFlight) from here until it is handed to the committer, or
// until decide fails.
func (h *Room) decide(r *http.Request, q *report.Query, session report.Session, x *steering) (aerr *api.Error) {
	h.d.Commits.StartDeciding(&x.job)
	defer func() {
		if aerr != nil {
			h.d.Commits.LeaveDeciding()
		}
	}()
	x.h = h
	for attempt := 0; ; attempt++ {
		st := h.state.Load()
		protocol, rep, unread := q.ReportUnread(r.Header, st.ids)
		rk, t, err := h.rank(st, h.d.Clock())
		if err != nil {
			return api.Errorf(api.Internal, "ranking the pathways: %v", err)
		}
		x.st, x.rk, x.rep, x.t, x.ruleErr = st, rk, rep, t, nil
		x.draw = decision.Draw(st.digest, session) // §6.3
		err = h.d.Loads.Steer(r.Context(), h.id, len(st.ids), session, t, x.rule)
		switch {
		case x.ruleErr == errStale && attempt < 3:
			continue
		case x.ruleErr != nil:
			return api.Errorf(api.Internal, "deciding: %v", x.ruleErr)
		case err != nil:
			return h.d.Fails.Failed("the table of loads", err)
		}
		h.unread.Note(unread, rep)
		if h.qoe != nil {
			h.qoe.AddReport(st.ids, rep, "", session, qoe.ClientOf(h.d.Reach.Of(r).Client), time.UnixMicro(int64(x.t)))
		}
		d := &x.d
		if err := rk.r.Fill(d, &x.out, h.signer, x.t, protocol, rep, session, x.loads); err != nil {
			h.d.Loads.Unsteer(h.id, session, x.t) // no decision: as on a failed commit
			return api.Errorf(api.Internal, "deciding: %v", err)
		}

		// §7.3: sign in a reused buffer. Only the signature and the
		// digest are kept: the store holds the decision compactly and
		// rebuilds its bytes (store.Rebuild).
		buf := answer.Buffers.Get().(*[]byte)
		if n := len(decision.SignedPrefix) + d.Size(); cap(*buf) < n {
			*buf = make([]byte, 0, n)
		}
		_, x.digest = decision.AppendSigned((*buf)[:0], d, h.key)
		answer.Buffers.Put(buf)

		x.job.Evidence = rk.snapshot
		store.CompactInto(&x.job.Decision, d, x.digest, rk.snapshot.Key)
		return nil
	}
}
