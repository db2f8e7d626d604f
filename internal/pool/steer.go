package pool

import (
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// The manifest's fixed pieces, in the order of its members.
const (
	manifestBucket   = `&bucket=`
	manifestPriority = `","PATHWAY-PRIORITY":[`
	manifestClones   = `,"PATHWAY-CLONES":[`
)

// Request is what the server read of one steering request.
type Request struct {
	RawQuery string // the query as sent, without '?'
	Cohort   string // the cohort_header's value, "" when none or not configured
	Base     string // "scheme://host" the request reached, used when PublicURL is ""
	// Away is the pathway the client is on when the per-client rule moves
	// it off (QoE.Lowest): that edge goes behind the others; "" for none.
	Away string
	// Reported is the pathway the request reports the player is on (its
	// _HLS_pathway, the first of its _DASH_pathway), "" for none. A
	// session's first answer keeps it first while it is listed (KeepTTL).
	Reported string

	// TTL is set by Steer and Order: the TTL the manifest states, the
	// short one when a QoE move shaped the order.
	TTL int
}

// KeepTTL is the most TTL, in seconds, of a new session's answer that
// keeps first the pathway its player reports (Request.Reported): the
// player moves to the session's own order at its next request, a few
// seconds into play, rather than a whole ttl_s later (the station seed's
// 300 s would hold every new hls.js viewer on its playlist's PATHWAY-ID).
const KeepTTL = 10

// smallPool is the most edges whose scratch lives on Steer's stack.
const smallPool = 64

// scratch is a larger pool's: from a sync.Pool, which takes no lock while
// each processor has one to hand.
type scratch struct {
	out  []int32
	keys []ranked
	skip []uint64
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// Steer appends the session's manifest to dst and returns it, with the
// index (in Config().Edges) of the edge it puts first (after clone_from,
// when it keeps a new session on it) and the session:
// the request's, or one minted when the request had none, or one this
// server did not mint, or (under buckets) one whose bucket does not hold.
// A pool without edges appends nothing and returns first −1. Steer takes
// no lock, and allocates only when dst is too small for the manifest.
func (p *Pool) Steer(dst []byte, req *Request) (manifest []byte, first int, s Session) {
	st := p.state.Load()
	n := len(st.runs)
	if n == 0 {
		return dst, -1, Session{}
	}
	q := readQuery(req.RawQuery, st.cfg.CohortParam)

	// One growth at most: the base may need six bytes for each of its own
	// (a control byte escaped), and the 32 bytes AES needs are borrowed from
	// where the manifest will go.
	dst = slices.Grow(dst, st.fixed+6*len(req.Base))
	var cbuf [maxCohortLen]byte
	var (
		outA  [smallPool]int32
		keysA [smallPool]ranked
		skipA [1]uint64
		sc    *scratch
	)
	if n > smallPool {
		sc = scratches.Get().(*scratch)
		defer scratches.Put(sc)
	}
	out, skip, s, bucket, carried, short, keep, onBase := p.order(st, req, &q, dst[len(dst):len(dst)+32], cbuf[:0], outA[:0], keysA[:0], skipA[:], sc)

	m := append(dst, st.head...)
	req.TTL = st.cfg.TTL
	if keep && st.keepTTL < req.TTL {
		m = append(dst, st.headKeep...)
		req.TTL = st.keepTTL
	}
	if short && st.cfg.QoE.ShortTTL < req.TTL {
		m = append(dst, st.headShort...)
		req.TTL = st.cfg.QoE.ShortTTL
	}
	if !st.public {
		m = appendJSONEscaped(m, req.Base)
	}
	m = append(m, st.pathQ...)
	m = hex.AppendEncode(m, s[:])
	if st.buckets {
		m = append(m, manifestBucket...)
		m = strconv.AppendInt(m, int64(bucket), 10)
	}
	if carried != nil {
		m = append(m, st.cohortQ...)
		m = appendQueryEscaped(m, carried)
	}
	m = append(m, manifestPriority...)
	if onBase {
		m = append(m, st.base...)
	}
	for j, i := range out {
		if j > 0 {
			m = append(m, ',')
		}
		m = append(m, st.quoted[i]...)
	}
	m = append(m, ']')
	// Every edge with a host has its clone, those listed first in their
	// order: a player may be told of an edge before it is listed again.
	if len(st.hosted) > 0 {
		m = append(m, manifestClones...)
		comma := false
		for _, i := range out {
			if st.clone[i] != "" {
				if comma {
					m = append(m, ',')
				}
				m, comma = append(m, st.clone[i]...), true
			}
		}
		for _, i := range st.hosted {
			if skip[i>>6]&(1<<(i&63)) == 0 {
				if comma {
					m = append(m, ',')
				}
				m, comma = append(m, st.clone[i]...), true
			}
		}
		m = append(m, ']')
	}
	m = append(m, '}')

	st.runs[out[0]].first.Add(1)
	return m, int(out[0]), s
}

// order is the session's order of the listed edges (indices into the
// configuration's edges), and skip marks them; with the session (kept or
// minted, sessionOf), its bucket, and the cohort the RELOAD-URI carries on
// (in cbuf); short when a QoE move shaped it (the cohort has pathways
// behind, or req.Away moved one); keep when the session is new and the
// pathway it reports, listed but not first, was put first (KeepTTL), or
// onBase (keep too) when that pathway is clone_from, no edge's, which the
// manifest then names ahead of out. The other arguments are scratch:
// scratch32 for AES, the stack's arrays, and sc for a pool larger than
// smallPool.
func (p *Pool) order(st *state, req *Request, q *query, scratch32, cbuf []byte, outA []int32, keysA []ranked, skipA []uint64, sc *scratch) (out []int32, skip []uint64, s Session, bucket int, carried []byte, short, keep, onBase bool) {
	n := len(st.runs)

	// The cohort: the header's each request, or the parameter's, which the
	// RELOAD-URI carries on; a value no cohort could hold is none.
	cohort := int32(-1)
	var behind []uint8 // the QoE moves of the session's cohort
	switch {
	case st.cfg.CohortHeader != "":
		if id, ok := st.cohortIDs[req.Cohort]; ok {
			cohort = id
		}
		behind = st.behind[req.Cohort]
	case q.hasCohort:
		if v, ok := unescape(cbuf[:0], q.cohort); ok && validCohort(v) {
			carried = v
			if id, ok := st.cohortIDs[string(v)]; ok {
				cohort = id
			}
			behind = st.behind[string(v)]
		}
	}
	if carried == nil && st.cfg.CohortHeader == "" {
		behind = st.behind[""] // no cohort: the sessions without one are a cohort too
	}
	s, bucket, kept := p.sessionOf(st, q, scratch32, cohort)

	var keys []ranked
	if sc == nil {
		out, keys, skip = outA[:0], keysA[:0], skipA[:]
	} else {
		if cap(sc.out) < n {
			sc.out, sc.keys, sc.skip = make([]int32, 0, n), make([]ranked, 0, n), make([]uint64, (n+63)/64)
		}
		out, keys, skip = sc.out[:0], sc.keys[:0], sc.skip[:(n+63)/64]
		clear(skip)
	}

	// The first rule for the bucket and the cohort gives the head of the
	// order; the listed edges it leaves out follow in rendezvous order.
	if st.buckets {
		for _, r := range st.byBucket[bucket-1] {
			if c := st.ruleCohorts[r]; c == nil || slices.Contains(c, cohort) {
				for _, i := range st.rulePrio[r] {
					out = append(out, i)
					skip[i>>6] |= 1 << (i & 63)
				}
				break
			}
		}
	}
	s0, s1 := halves(&s)
	out = st.rank(out, keys, st.rankable, s0, s1, skip)
	for _, i := range st.tail {
		if skip[i>>6]&(1<<(i&63)) == 0 {
			out = append(out, i)
			skip[i>>6] |= 1 << (i & 63)
		}
	}
	// A new session keeps the pathway its player reports first while that
	// edge is listed, before any QoE move (which may still put it behind):
	// hls.js 1.7.4 stalls for good when its first answer moves it while a
	// fragment loads (conformance/players/README.md, "hls.js through the
	// front"), and its first request reports the pathway it starts on.
	// The pathway the clones copy (clone_from), when no edge has it, is
	// the content's own: a player that reports it is kept on it the same
	// way, ahead of every edge (the station seed's clone_from ".", the
	// front's PATHWAY-ID).
	if !kept && req.Reported != "" {
		if a, ok := st.index[req.Reported]; ok {
			if i := slices.Index(out, a); i > 0 {
				copy(out[1:i+1], out[:i])
				out[0] = a
				keep = true
			}
		} else if st.base != "" && req.Reported == st.cfg.CloneFrom {
			keep, onBase = true, true
		}
	}
	if behind != nil {
		probe := qoe.InProbe(report.Session(s), st.cfg.QoE.Share())
		behindLast(out, func(i int32) bool { return behind[i] == isBehind || behind[i] == isProbed && !probe })
		short = true
	}
	if req.Away != "" && st.cfg.QoE != nil {
		if a, ok := st.index[req.Away]; ok && len(out) > 1 {
			behindLast(out, func(i int32) bool { return i == a })
			short = true
		}
	}
	return out, skip, s, bucket, carried, short, keep, onBase
}

// behindLast moves the edges of out that bad holds behind the others,
// each part in its order (a stable partition, in place). With every edge
// bad, out stays as it is.
func behindLast(out []int32, bad func(int32) bool) {
	var tailA [smallPool]int32
	tail := tailA[:0]
	k := 0
	for _, i := range out {
		if bad(i) {
			tail = append(tail, i)
		} else {
			out[k] = i
			k++
		}
	}
	copy(out[k:], tail)
}

// Opening is a session's order, for a player that is not sent a manifest
// (the front's redirect on opening, and its backup variants).
type Opening struct {
	Session Session
	Order   []string // the pathways, first first
	// Query is what carries the session on: "session=HEX", then the
	// bucket and the cohort parameter as the RELOAD-URI carries them.
	Query string
}

// Order is the session's order for req, as Steer's manifest would give it
// (the session kept or minted as Steer does), without a manifest; false
// for a pool without edges. It counts no manifest.
func (p *Pool) Order(req *Request) (Opening, bool) {
	st := p.state.Load()
	n := len(st.runs)
	if n == 0 {
		return Opening{}, false
	}
	q := readQuery(req.RawQuery, st.cfg.CohortParam)
	var scratch32 [32]byte
	cbuf := make([]byte, 0, maxCohortLen)
	sc := &scratch{}
	out, _, s, bucket, carried, short, keep, _ := p.order(st, req, &q, scratch32[:], cbuf, nil, nil, nil, sc)
	req.TTL = st.cfg.TTL
	if keep {
		req.TTL = min(req.TTL, st.keepTTL)
	}
	if short {
		req.TTL = min(req.TTL, st.cfg.QoE.ShortTTL)
	}
	o := Opening{Session: s, Order: make([]string, len(out))}
	for j, i := range out {
		o.Order[j] = st.cfg.Edges[i].Pathway
	}
	qs := "session=" + s.String()
	if st.buckets {
		qs += "&bucket=" + strconv.Itoa(bucket)
	}
	if carried != nil {
		qs += "&" + st.cfg.CohortParam + "=" + string(appendQueryEscaped(nil, carried))
	}
	o.Query = qs
	return o, true
}

// sessionOf keeps the request's session when this server minted it (and,
// under buckets, its bucket is in range and is the request's bucket), and
// mints one otherwise, its bucket dealt by the dealer of its cohort (the
// id a rule names it by, or −1); kept says which. scratch is 32 bytes for
// AES.
func (p *Pool) sessionOf(st *state, q *query, scratch []byte, cohort int32) (Session, int, bool) {
	if s, bucket, ok := p.kept(st, q, scratch); ok {
		return s, bucket, true
	}
	bucket := 0
	if st.buckets {
		bucket = int(st.dealers[cohort+1].Add(1)%uint64(st.cfg.Buckets)) + 1
	}
	return mint(p.block, uint16(bucket), scratch), bucket, false
}

// kept is the request's session and bucket when Steer keeps them: this
// server minted the session and, under buckets, its bucket is in range and
// is the request's bucket.
func (p *Pool) kept(st *state, q *query, scratch []byte) (Session, int, bool) {
	if !q.hasSession {
		return Session{}, 0, false
	}
	s, ok := readSession(q.session)
	if !ok {
		return Session{}, 0, false
	}
	b, ok := open(p.block, &s, scratch)
	if !ok {
		return Session{}, 0, false
	}
	if !st.buckets {
		return s, 0, true
	}
	if n, ok := readBucket(q.bucket); ok && q.hasBucket && n == int(b) && n <= st.cfg.Buckets {
		return s, n, true
	}
	return Session{}, 0, false
}

// appendClone appends an edge's PATHWAY-CLONES entry (RFC 8216bis 7.3;
// the zh seed's PER-VARIANT-URIS and PER-RENDITION-URIS).
func appendClone(dst []byte, base string, e *Edge) []byte {
	dst = append(dst, `{"BASE-ID":`...)
	dst = appendJSONString(dst, base)
	dst = append(dst, `,"ID":`...)
	dst = appendJSONString(dst, e.Pathway)
	dst = append(dst, `,"URI-REPLACEMENT":{"HOST":`...)
	dst = appendJSONString(dst, e.Host)
	dst = appendObject(dst, "PARAMS", e.Params)
	dst = appendObject(dst, "PER-VARIANT-URIS", e.PerVariantURIs)
	dst = appendObject(dst, "PER-RENDITION-URIS", e.PerRenditionURIs)
	return append(dst, "}}"...)
}

// appendObject appends `,"<name>":{...}` with m's members sorted by key (as
// hls.js applies PARAMS), or nothing for an empty m.
func appendObject(dst []byte, name string, m map[string]string) []byte {
	if len(m) == 0 {
		return dst
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, ',')
	dst = appendJSONString(dst, name)
	dst = append(dst, ":{"...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string, quotes included.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendJSONEscaped(dst, s)
	return append(dst, '"')
}

// appendJSONEscaped appends s escaped for a JSON string (RFC 8259 §7): the
// quote, the backslash and control bytes escaped, a byte that is not UTF-8
// written as U+FFFD, and U+2028 and U+2029 escaped for JavaScript's sake.
func appendJSONEscaped(dst []byte, s string) []byte {
	const digits = "0123456789abcdef"
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', digits[b>>4], digits[b&15])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', digits[r&15])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}
