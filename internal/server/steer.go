package server

import (
	"errors"
	"math/bits"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/commit"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
	"github.com/waisteer/waisteer/store"
)

// ManifestType is the media type of a steering manifest: the one
// draft-pantos-content-steering registers for it (§11.1 of the draft; the
// IANA media types registry lists application/vnd.apple.steering-list with
// the draft as its reference), which §8.1 has the manifest served with.
const ManifestType = "application/vnd.apple.steering-list"

// errStale says that the room's state changed while a request was being
// decided under it: the request is decided again under the new one.
var errStale = errors.New("server: the room's policy changed during the request")

// buffers are reused for the decision's signed bytes and the manifest.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Header values every steering answer shares, set in the header map as
// they are: net/http copies a header's values when it writes them, and
// never changes a slice it was given.
var (
	headerNoStore   = []string{"no-store"}
	headerAnyOrigin = []string{"*"}
	headerManifest  = []string{ManifestType}
)

// steerHeaders are the headers of every answer on a steering route: the
// manifest is the client's own and never cached (§6: each request is
// decided), and a player in a browser on another origin may read it.
func steerHeaders(w http.ResponseWriter) {
	h := w.Header()
	h["Cache-Control"] = headerNoStore
	h["Access-Control-Allow-Origin"] = headerAnyOrigin
}

// steerable writes the headers of every steering answer, a room's or a
// pool's, and refuses what no steering route takes: a method other than GET
// (§4; OPTIONS is the preflight's), a target over maxTarget.
func steerable(w http.ResponseWriter, r *http.Request) bool {
	steerHeaders(w)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, OPTIONS")
		web.Refuse(w, api.Errorf(api.MethodNotAllowed, "a steering request is a GET (§4), not %s", r.Method))
		return false
	}
	if len(r.RequestURI) > maxTarget {
		web.Refuse(w, api.Errorf(api.TargetTooLong, "the request target is %d bytes, over the %d a steering request may have", len(r.RequestURI), maxTarget))
		return false
	}
	return true
}

// preflight answers a CORS preflight: a player in a browser sends CMCD in
// request headers (CTA-5004-B header mode), which makes its GET need one.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "CMCD-Request, CMCD-Object, CMCD-Session, CMCD-Status, Content-Type")
	h.Set("Access-Control-Max-Age", "86400")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// serveSteer answers a steering request (§4 to §8.1): read the report and
// the session (minting one for a first request), take the loads and decide
// (§6), sign (§7.3), commit the decision durably with others, and answer
// the manifest (§8.1).
//
// While a room has a policy, its steering route never answers 404, 410 or
// 429, which stop players' steering for good (players.md). A request that
// cannot be stored (or decided) is answered 503 (or 500) with Retry-After,
// which every player retries, rather than with a manifest whose decision
// an auditor could not fetch.
func (s *Server) serveSteer(w http.ResponseWriter, r *http.Request, h *hub) {
	if !steerable(w, r) {
		return
	}
	if s.closing.Load() {
		s.unavailable(w, h, api.Errorf(api.Closing, "the server is closing"))
		return
	}

	// §4.1: the query is read once, for the session and the report.
	q := report.ParseQuery(r.RequestURI)
	session, ok := q.Session()
	if s.limits != nil {
		if why := s.limits.Admit(s.clientAddr(r), !ok, s.limitNow()); why != "" {
			s.overBudget(w, h, why, session, ok)
			return
		}
	}
	if !ok {
		// COMPANION §6: no session, a first request: mint one (§6).
		var err error
		if session, err = report.NewSession(nil); err != nil {
			s.unavailable(w, h, api.Errorf(api.Internal, "minting a session: %v", err))
			return
		}
	}

	x := steerings.Get().(*steering)
	if aerr := s.decide(r, h, &q, session, x); aerr != nil {
		x.release()
		s.unavailable(w, h, aerr)
		return
	}
	// The manifest goes out only once its decision is durable: it names
	// the decision's URI (§8.4), where an auditor must find it.
	if err := s.commits.Commit(r.Context(), &x.job); err != nil {
		// The committer has answered (or never took) the job.
		x.release()
		s.unavailable(w, h, s.fails.Failed("the decision could not be stored", err))
		return
	}

	d := &x.d
	x.st.firsts[d.Reason][d.Priority[0]].Add(1)
	if s.limits != nil {
		h.keepLatest(x, session)
	}
	mb := buffers.Get().(*[]byte)
	m := x.st.writer.Append((*mb)[:0], d.TTL, session, d.Priority, x.digest)
	answerManifest(w, headerManifest, x.st.contentLength(len(m)), m, mb)
	x.release()
}

// answerManifest writes m, made in the pooled buffer mb, as a 200 of
// content type ct and length length (nil: counted from m), and gives mb
// back to the pool.
func answerManifest(w http.ResponseWriter, ct, length []string, m []byte, mb *[]byte) {
	hd := w.Header()
	hd["Content-Type"] = ct
	if length != nil {
		hd["Content-Length"] = length
	} else {
		hd.Set("Content-Length", strconv.Itoa(len(m)))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(m)
	*mb = m[:0]
	buffers.Put(mb)
}

// unavailable answers a steering request that cannot be decided or
// stored, with Retry-After the policy's min_ttl_s, the TTL the text gives
// a client it asks to come back soon (§6.5). Players retry a 500 or a 503
// (hls.js and Shaka after the last TTL, Media3 after 300 s, dash.js after
// its TTL unless it was the first request); none stops steering for it.
func (s *Server) unavailable(w http.ResponseWriter, h *hub, e *api.Error) {
	w.Header().Set("Retry-After", strconv.FormatUint(uint64(h.state.Load().policy.MinTTLs), 10))
	web.Refuse(w, e)
}

// steering is one steering request's work: what its decision is made
// from, the decision, and the job that commits it. It is reused, so that a
// request allocates little beyond what net/http does.
type steering struct {
	s    *Server
	h    *hub
	st   *roomState
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
	x.s, x.h, x.st, x.rk, x.ruleErr = nil, nil, nil, nil, nil
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
	expires, carry := bits.Add64(x.t, uint64(o.TTL)*1_000_000+x.s.grace, 0)
	if carry != 0 {
		x.ruleErr = errors.New("the session's expiry is past the room clock's range")
		return 0, 0, x.ruleErr
	}
	return int(o.First), expires, nil
}

// decide makes and signs the decision for one request into x: the report
// read under the room's state (§4), the draw taken (§6.3), the loads taken
// and the session counted atomically with the rest of the rule (§6,
// Loads.Steer), the decision built and signed (§7.3) and compacted for the
// store. A failure of the table of loads is store_unavailable; any other
// is internal. The request counts as being decided (the committer waits
// for it, inFlight) from here until it is handed to the committer, or
// until decide fails.
func (s *Server) decide(r *http.Request, h *hub, q *report.Query, session report.Session, x *steering) (aerr *api.Error) {
	s.commits.StartDeciding()
	defer func() {
		if aerr != nil {
			s.commits.LeaveDeciding()
		}
	}()
	x.s, x.h = s, h
	for attempt := 0; ; attempt++ {
		st := h.state.Load()
		protocol, rep, unread := q.ReportUnread(r.Header, st.ids)
		rk, t, err := h.rank(st, s.clock())
		if err != nil {
			return api.Errorf(api.Internal, "ranking the pathways: %v", err)
		}
		x.st, x.rk, x.rep, x.t, x.ruleErr = st, rk, rep, t, nil
		x.draw = decision.Draw(st.digest, session) // §6.3
		err = s.loads.Steer(r.Context(), h.id, len(st.ids), session, t, x.rule)
		switch {
		case x.ruleErr == errStale && attempt < 3:
			continue
		case x.ruleErr != nil:
			return api.Errorf(api.Internal, "deciding: %v", x.ruleErr)
		case err != nil:
			return s.fails.Failed("the table of loads", err)
		}
		h.unread.Note(unread, rep)
		if h.qoe != nil {
			h.qoe.AddReport(st.ids, rep, "", session, qoe.ClientOf(s.clientAddr(r)), time.UnixMicro(int64(x.t)))
		}
		d := &x.d
		if err := rk.r.Fill(d, &x.out, h.signer, x.t, protocol, rep, session, x.loads); err != nil {
			return api.Errorf(api.Internal, "deciding: %v", err)
		}

		// §7.3: sign in a reused buffer. Only the signature and the
		// digest are kept: the store holds the decision compactly and
		// rebuilds its bytes (store.Rebuild).
		buf := buffers.Get().(*[]byte)
		if n := len(decision.SignedPrefix) + d.Size(); cap(*buf) < n {
			*buf = make([]byte, 0, n)
		}
		_, x.digest = decision.AppendSigned((*buf)[:0], d, h.key)
		buffers.Put(buf)

		x.job.Evidence = rk.snapshot
		store.CompactInto(&x.job.Decision, d, x.digest, rk.snapshot.Key)
		return nil
	}
}
