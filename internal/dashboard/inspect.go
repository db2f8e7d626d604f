package dashboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/steerroute"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
	"github.com/waisteer/waisteer/verify/audit"
)

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

// InspectLog is the decision's place in its room's logs: the log that
// holds it (issue 31: one a server on a shared database; 0, left out, on a
// store of one log) and its index there.
type InspectLog struct {
	Log       int64   `json:"log,omitempty"`
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

func (d *Dashboard) serveInspect(w http.ResponseWriter, r *http.Request) {
	if !web.NoQuery(w, r) || !d.d.Operator(w, r) {
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
	c := &client.Client{HTTP: &http.Client{Transport: handlerTransport{d.d.Handler}, Timeout: 30 * time.Second}, UserAgent: "waisteer inspector"}
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
	api.WriteJSON(w, http.StatusOK, inspect(r.Context(), c, in, rf))
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
func inspect(ctx context.Context, c *client.Client, in verify.Input, fetched *client.Refusal) Inspection {
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
	out.Log = &InspectLog{Log: pl.Log.N, Index: uint64(pl.Index), Size: uint64(pl.Log.Checkpoint.Size)}
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
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme+"://"+r.URL.Host != dashOrigin {
		return nil, errors.New("the inspector asks this server only")
	}
	r2 := r.Clone(r.Context())
	r2.RequestURI = r.URL.RequestURI()
	r2.RemoteAddr = "127.0.0.1:0"
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r2)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
