package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
	"github.com/waisteer/waisteer/verify/audit"
)

// The operator's dashboard (issue 18): the page is internal/dashboard's,
// served at /dashboard; what it shows comes from two operator routes here.
//
//	GET  /v1/dashboard           DashboardState: every room and pool, with their history
//	POST /v1/dashboard/inspect   {"input": DIGEST | DECISION_URL | DECISION_BYTES}: Inspection

// DashboardState is everything the page shows, in one poll.
type DashboardState struct {
	Server string    `json:"server"`
	At     time.Time `json:"at"`
	// RefreshS is how often the page polls, seconds.
	RefreshS float64      `json:"refresh_s"`
	Rooms    []RoomDash   `json:"rooms"`
	Pools    []PoolDash   `json:"pools"`
	Front    *FrontStatus `json:"front,omitempty"` // with a [front]
}

// RoomDash is one energy room: its status route's answer, each hop's
// records over the window, and the room's history.
type RoomDash struct {
	Status  Status       `json:"status"`
	Hops    []HopDash    `json:"hops"`
	History []RoomSample `json:"history"` // oldest first
}

// HopDash is one hop of one pathway over the window [a, b) of the status:
// its records (the periods they cover and their class) and the parts of
// the window no record of it covers.
type HopDash struct {
	Pathway string       `json:"pathway"`
	Hop     string       `json:"hop"` // its key, hex
	Records []RecordSpan `json:"records"`
	Gaps    [][2]uint64  `json:"gaps"` // [start, end) µs on the room clock
}

// RecordSpan is one record: [start, end) µs on the room clock.
type RecordSpan struct {
	Digest string `json:"digest"`
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Class  string `json:"class"` // its label; "unmetered" for the unmetered marker
}

// RoomSample is a room at an instant: its decisions since start by reason
// and by first pathway (counts that only grow; the page charts their
// differences), and its live sessions by the pathway they are first for.
type RoomSample struct {
	At       time.Time         `json:"at"`
	ByReason map[string]uint64 `json:"by_reason"`
	First    map[string]uint64 `json:"first"`
	Load     map[string]uint32 `json:"load"`
	Refused  uint64            `json:"refused"` // records refused since start
}

// PoolDash is one pool: its edges route's answer and its history.
type PoolDash struct {
	View    PoolView     `json:"view"`
	History []PoolSample `json:"history"` // oldest first
}

// PoolSample is a pool's edges at an instant.
type PoolSample struct {
	At    time.Time             `json:"at"`
	Edges map[string]EdgeSample `json:"edges"`
}

// EdgeSample is one edge at an instant: its health, its manifests first
// since start, its live sessions, and its latest check's time.
type EdgeSample struct {
	Up       bool    `json:"up"`
	Drained  bool    `json:"drained"`
	First    uint64  `json:"first"`
	Sessions uint32  `json:"sessions"`
	CheckMs  float64 `json:"check_ms"`
}

// dashEvery is how often the history is sampled; dashKeep how many
// samples it keeps (ten minutes).
var (
	dashEvery = 5 * time.Second
	dashKeep  = 120
)

// dashHistory is the samples of every room and pool.
type dashHistory struct {
	mu    sync.Mutex
	rooms map[sig.Hash][]RoomSample
	pools map[string][]PoolSample
}

func keep[T any](xs []T, x T) []T {
	xs = append(xs, x)
	if len(xs) > dashKeep {
		xs = slices.Clone(xs[len(xs)-dashKeep:])
	}
	return xs
}

// sample takes a sample of every room and pool.
func (s *Server) sample(ctx context.Context) {
	now := time.UnixMicro(int64(s.clock())).UTC()
	// The loads a microsecond back: a read of the table moves the room's
	// instant on to its own (issue 16), and a background read must not
	// move a steering request's.
	back := max(s.clock(), 1) - 1
	type roomS struct {
		id sig.Hash
		rs RoomSample
	}
	var rooms []roomS
	for _, h := range s.sortedHubs() {
		st, aerr := h.Status(ctx, back)
		if aerr != nil {
			continue
		}
		rooms = append(rooms, roomS{h.ID(), roomSampleOf(now, &st)})
	}
	type poolS struct {
		name string
		ps   PoolSample
	}
	var pools []poolS
	for _, ph := range s.poolsSorted() {
		v := s.poolViewAt(ctx, ph, back)
		pools = append(pools, poolS{ph.name, poolSampleOf(now, &v)})
	}
	s.dash.mu.Lock()
	defer s.dash.mu.Unlock()
	for _, r := range rooms {
		s.dash.rooms[r.id] = keep(s.dash.rooms[r.id], r.rs)
	}
	for _, p := range pools {
		s.dash.pools[p.name] = keep(s.dash.pools[p.name], p.ps)
	}
}

func roomSampleOf(at time.Time, st *Status) RoomSample {
	rs := RoomSample{At: at, ByReason: st.Decisions.ByReason, First: map[string]uint64{}, Load: map[string]uint32{}}
	for _, p := range st.Pathways {
		rs.First[p.ID] = p.First
		if p.Load != nil {
			rs.Load[p.ID] = *p.Load
		}
	}
	for _, n := range st.Records.Refused {
		rs.Refused += n
	}
	return rs
}

func poolSampleOf(at time.Time, v *PoolView) PoolSample {
	ps := PoolSample{At: at, Edges: map[string]EdgeSample{}}
	for _, e := range v.Edges {
		ps.Edges[e.Pathway] = EdgeSample{Up: e.Health.Up, Drained: e.Drained, First: e.First, Sessions: e.Sessions, CheckMs: e.Health.LastMs}
	}
	return ps
}

// dashboardState is the page's poll: the history as sampled, and a
// sample of now at its end.
func (s *Server) dashboardState(ctx context.Context) DashboardState {
	now := time.UnixMicro(int64(s.clock())).UTC()
	out := DashboardState{Server: s.name, At: now, RefreshS: 3, Rooms: []RoomDash{}, Pools: []PoolDash{}}
	s.dash.mu.Lock()
	rooms := make(map[sig.Hash][]RoomSample, len(s.dash.rooms))
	for k, v := range s.dash.rooms {
		rooms[k] = slices.Clone(v)
	}
	pools := make(map[string][]PoolSample, len(s.dash.pools))
	for k, v := range s.dash.pools {
		pools[k] = slices.Clone(v)
	}
	s.dash.mu.Unlock()
	for _, h := range s.sortedHubs() {
		st, aerr := h.Status(ctx, s.clock())
		if aerr != nil {
			continue
		}
		rd := RoomDash{Status: st, Hops: s.hopsOf(h, st.Window), History: append(rooms[h.ID()], roomSampleOf(now, &st))}
		out.Rooms = append(out.Rooms, rd)
	}
	for _, ph := range s.poolsSorted() {
		v := s.poolView(ctx, ph)
		out.Pools = append(out.Pools, PoolDash{View: v, History: append(pools[ph.name], poolSampleOf(now, &v))})
	}
	if s.front != nil {
		fs := s.frontStatus(ctx)
		out.Front = &fs
	}
	return out
}

// hopsOf is each hop's records over the window [a, b), by pathway in the
// policy's order and hop in the pathway's.
func (s *Server) hopsOf(h *roomsteer.Room, w [2]uint64) []HopDash {
	st := h.State()
	out := []HopDash{}
	for _, pw := range st.Policy().Pathways {
		for _, hop := range pw.Hops {
			hd := HopDash{Pathway: pw.ID, Hop: hop.Key.String(), Records: []RecordSpan{}, Gaps: [][2]uint64{}}
			es := h.RecordsInWindow(hop.Key, w[0], w[1])
			slices.SortFunc(es, func(x, y evidence.Entry) int { return cmp.Compare(x.Record.Start, y.Record.Start) })
			at := w[0]
			for _, e := range es {
				r := e.Record
				class := r.Class.Label()
				if r.Joules == 0 {
					class = "unmetered"
				}
				hd.Records = append(hd.Records, RecordSpan{Digest: e.Digest.String(), Start: r.Start, End: r.End, Class: class})
				if r.Start > at {
					hd.Gaps = append(hd.Gaps, [2]uint64{at, min(r.Start, w[1])})
				}
				at = max(at, r.End)
			}
			if at < w[1] {
				hd.Gaps = append(hd.Gaps, [2]uint64{at, w[1]})
			}
			out = append(out, hd)
		}
	}
	return out
}

func (s *Server) serveDashboardState(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return
	}
	api.WriteJSON(w, http.StatusOK, s.dashboardState(r.Context()))
}

// Inspection is the decision inspector's answer: the decision decoded,
// the records it names, and §9.1's steps as the server's own verifier ran
// them, each with its outcome, then the log's placement.
type Inspection struct {
	Digest   string           `json:"digest"` // the decision's (§7.3), of the bytes inspected
	Decision *DecodedDecision `json:"decision,omitempty"`
	Records  []InspectRecord  `json:"records"`
	Steps    []InspectStep    `json:"steps"`
	Verdict  string           `json:"verdict"` // "accepted" or "refused"
	Facts    *verify.Facts    `json:"facts,omitempty"`
	// Log is where the room's log holds the decision; nil when it does not
	// (a decision pasted in that was never made), with why in LogError.
	Log      *InspectLog `json:"log,omitempty"`
	LogError string      `json:"log_error,omitempty"`
}

// DecodedDecision is a decision's fields (§7.1), as text.
type DecodedDecision struct {
	Room     string            `json:"room"`
	Signer   string            `json:"signer"`
	Policy   string            `json:"policy"`
	T        uint64            `json:"t"`
	Session  string            `json:"session"`
	Draw     uint32            `json:"draw"`
	Protocol string            `json:"protocol"`
	Report   map[string]uint64 `json:"report"`
	Pathways []DecodedPathway  `json:"pathways"`
	TTL      uint32            `json:"ttl"`
	Reason   string            `json:"reason"`
	Priority []int             `json:"priority"`
}

// DecodedPathway is one pathway's state in a decision.
type DecodedPathway struct {
	Status   string   `json:"status"`
	Class    int      `json:"class"`
	Joules   string   `json:"joules"`
	Delivery string   `json:"delivery"`
	Records  []string `json:"records"`
	Load     uint32   `json:"load"`
	Limits   uint8    `json:"limits"`
}

// InspectRecord is a record the decision names: found in the store or
// not, and what it states.
type InspectRecord struct {
	Pathway int    `json:"pathway"`
	Digest  string `json:"digest"`
	Found   bool   `json:"found"`
	Hop     string `json:"hop,omitempty"`
	Start   uint64 `json:"start,omitempty"`
	End     uint64 `json:"end,omitempty"`
	Class   string `json:"class,omitempty"`
	Joules  uint64 `json:"joules,omitempty"`
}

// InspectStep is one step of §9.1 and its outcome: "passed", "refused"
// (with the code and why) or "not reached".
type InspectStep struct {
	Step    int    `json:"step"`
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Code    string `json:"code,omitempty"`
	Where   string `json:"where,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// InspectLog is the decision's place in its room's log.
type InspectLog struct {
	Index     uint64  `json:"index"`
	Size      uint64  `json:"size"`
	KeyLogSeq *uint64 `json:"key_log_seq,omitempty"`
}

// steps9 are §9.1's steps, by the places their refusals carry.
var steps9 = []struct{ name, place string }{
	{"the room (COMPANION §4.1)", verify.PlaceRoom},
	{"the policy (§3.5)", verify.PlacePolicy},
	{"the decision's signature and fields (§7)", verify.PlaceDecision},
	{"each record named (COMPANION §5)", "evidence/"},
	{"the evidence (§5)", "pathway/"},
	{"the output: the rule again (§6)", verify.PlaceOutput},
	{"the manifest (§8.1)", verify.PlaceManifest},
}

// maxInspectBody bounds the inspector's request: a decision's bytes in
// base64, with room to spare.
const maxInspectBody = 4 * api.MaxDecisionBytes

// dashOrigin is the host the inspector's in-process client names: its
// requests never leave the server.
const dashOrigin = "http://waisteer.inspector"

func (s *Server) serveInspect(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !s.operator(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxInspectBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		web.Refuse(w, api.Errorf(api.BodyTooLarge, "the inspector reads at most %d bytes", maxInspectBody))
		return
	case err != nil:
		web.Refuse(w, api.Errorf(api.BadBody, "reading the request: %v", err))
		return
	}
	var req struct {
		Input string `json:"input"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		web.Refuse(w, api.Errorf(api.BadInspect, `the request is {"input": "..."}: %v`, err))
		return
	}
	digest, raw, aerr := readInspectInput(req.Input)
	if aerr != nil {
		web.Refuse(w, aerr)
		return
	}
	c := &client.Client{HTTP: &http.Client{Transport: handlerTransport{s}, Timeout: 30 * time.Second}, UserAgent: "waisteer inspector"}
	var in verify.Input
	if raw == nil {
		in, err = c.FetchInput(r.Context(), dashOrigin+steerroute.StableDecisions+digest.String(), nil)
	} else {
		in, err = c.FetchAround(r.Context(), dashOrigin, raw, nil)
	}
	var rf *client.Refusal
	switch {
	case errors.As(err, &rf) && rf.Where == verify.PlaceDecision && raw == nil && api.IsNotFound(rf.Err):
		web.Refuse(w, api.Errorf(api.NotFound, "no decision %s: this server holds none of that digest", digest))
		return
	case err != nil && !errors.As(err, &rf):
		web.Refuse(w, api.Errorf(api.BadInspect, "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, s.inspect(r.Context(), c, in, rf))
}

// readInspectInput reads the inspector's input: a digest, a decision's
// URL (its digest is read off its end, §8.4, and the decision is this
// server's: another host is never asked), or a decision's bytes in base64
// or hex.
func readInspectInput(input string) (sig.Hash, []byte, *api.Error) {
	v := strings.TrimSpace(input)
	if v == "" {
		return sig.Hash{}, nil, api.Errorf(api.BadInspect, "nothing to inspect: give a decision's digest, its URL or its bytes")
	}
	if d, err := sig.ParseHash(v); err == nil {
		return d, nil, nil
	}
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return sig.Hash{}, nil, api.Errorf(api.BadInspect, "%q is not an http or https URL", clip(v))
		}
		d, err := sig.ParseHash(v[max(0, len(v)-2*sig.HashSize):])
		if err != nil {
			return sig.Hash{}, nil, api.Errorf(api.BadInspect, "the URL %q does not end in a decision's digest, 64 hexadecimal digits (§8.4)", clip(v))
		}
		return d, nil, nil
	}
	for _, dec := range []func(string) ([]byte, error){base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString, base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString} {
		if b, err := dec(strings.Join(strings.Fields(v), "")); err == nil && bytes.HasPrefix(b, []byte(decision.Magic)) {
			return sig.Hash{}, b, nil
		}
	}
	return sig.Hash{}, nil, api.Errorf(api.BadInspect, "%q is neither a decision's digest (64 hexadecimal digits), nor its URL, nor its bytes (WSD1, in base64 or hex)", clip(v))
}

// clip shortens what an error quotes of the input.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// inspect runs §9.1 over in and says how each step went; fetched is the
// refusal of fetching what it needs, when there was one.
func (s *Server) inspect(ctx context.Context, c *client.Client, in verify.Input, fetched *client.Refusal) Inspection {
	out := Inspection{Records: []InspectRecord{}}
	if len(in.Decision) >= sig.SignatureSize {
		out.Digest = sig.Digest(in.Decision[:len(in.Decision)-sig.SignatureSize]).String()
	}
	if d, err := decision.Parse(in.Decision); err == nil {
		out.Decision = decoded(d)
		byDigest := map[sig.Hash][]byte{}
		for _, b := range in.Records {
			if len(b) >= sig.SignatureSize {
				byDigest[sig.Digest(b[:len(b)-sig.SignatureSize])] = b
			}
		}
		for i, p := range d.Pathways {
			for _, h := range p.Records {
				ir := InspectRecord{Pathway: i, Digest: h.String()}
				if b, ok := byDigest[h]; ok {
					if rec, err := evidence.ParseRecord(b); err == nil {
						ir.Found, ir.Hop, ir.Start, ir.End, ir.Class, ir.Joules = true, rec.Hop.String(), rec.Start, rec.End, rec.Class.Label(), rec.Joules
					}
				}
				out.Records = append(out.Records, ir)
			}
		}
	}
	var err error
	if fetched != nil {
		err = fetched
	} else {
		out.Facts, err = verify.Verify(in)
	}
	where, code, detail := "", "", ""
	if err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			where, code, detail = re.Place, string(re.Code), re.Detail
		} else {
			detail = err.Error()
		}
		if fetched != nil {
			where, code, detail = fetched.Where, string(fetched.Code), fetched.Error()
		}
	}
	failed := false
	for i, st := range steps9 {
		step := InspectStep{Step: i + 1, Name: st.name, Outcome: "passed"}
		switch {
		case failed:
			step.Outcome = "not reached"
		case err != nil && (where == st.place || strings.HasSuffix(st.place, "/") && strings.HasPrefix(where, st.place)):
			step.Outcome, step.Code, step.Where, step.Detail = "refused", code, where, detail
			failed = true
		}
		out.Steps = append(out.Steps, step)
	}
	if err != nil && !failed {
		// A refusal with no place of §9.1's (a fetch that failed).
		out.Steps[0].Outcome, out.Steps[0].Code, out.Steps[0].Detail = "refused", code, detail
		for i := 1; i < len(out.Steps); i++ {
			out.Steps[i].Outcome = "not reached"
		}
	}
	out.Verdict = "accepted"
	if err != nil {
		out.Verdict = "refused"
		return out
	}
	pl, perr := audit.Place(ctx, c, dashOrigin, &in)
	if perr != nil {
		out.LogError = perr.Error()
		return out
	}
	out.Log = &InspectLog{Index: uint64(pl.Index), Size: uint64(pl.Log.Checkpoint.Size)}
	if pl.Epoch != nil {
		out.Log.KeyLogSeq = &pl.Epoch.Seq
	}
	return out
}

func decoded(d *decision.Decision) *DecodedDecision {
	out := &DecodedDecision{
		Room: d.Room.String(), Signer: d.Signer.String(), Policy: d.Policy.String(), T: d.T,
		Session: d.Session.String(), Draw: d.Draw, TTL: d.TTL, Reason: d.Reason.String(),
		Report: map[string]uint64{}, Pathways: []DecodedPathway{}, Priority: []int{},
	}
	switch d.Protocol {
	case report.HLS:
		out.Protocol = "hls"
	case report.DASH:
		out.Protocol = "dash"
	default:
		out.Protocol = "none"
	}
	if d.Report.Present&report.HasPathway != 0 {
		out.Report["pathway"] = uint64(d.Report.Pathway)
	}
	if d.Report.Present&report.HasThroughput != 0 {
		out.Report["throughput"] = d.Report.Throughput
	}
	if d.Report.Present&report.HasBuffer != 0 {
		out.Report["buffer"] = d.Report.Buffer
	}
	for _, p := range d.Pathways {
		dp := DecodedPathway{Status: p.Status.String(), Class: int(p.Class), Joules: p.Joules.String(), Delivery: p.Delivery.String(), Records: []string{}}
		for _, h := range p.Records {
			dp.Records = append(dp.Records, h.String())
		}
		out.Pathways = append(out.Pathways, dp)
	}
	for _, i := range d.Priority {
		out.Priority = append(out.Priority, int(i))
	}
	return out
}

// handlerTransport answers a client's requests with the server's own
// handler, in process: the inspector's verifier fetches what a verifier
// fetches, from this server and no other.
type handlerTransport struct{ s *Server }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme+"://"+r.URL.Host != dashOrigin {
		return nil, errors.New("the inspector asks this server only")
	}
	r2 := r.Clone(r.Context())
	r2.RequestURI = r.URL.RequestURI()
	r2.RemoteAddr = "127.0.0.1:0"
	rec := httptest.NewRecorder()
	t.s.ServeHTTP(rec, r2)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
