package report

import (
	"bytes"
	"math/bits"
	"net/http"
)

// Read reads the client's report from a steering request (§4): target is
// the request target as sent (path and query), h the request's header
// fields, ids the policy's pathway IDs in its order. It returns the protocol
// the report was read from (§7.1, COMPANION §6 "Protocol") and the report,
// whose absent values are 0 with their bit of Present clear. Nothing a
// client sends makes it fail: a value that does not read is absent (§4).
func Read(target string, h http.Header, ids []string) (Protocol, Report) {
	q := ParseQuery(target)
	return q.Report(h, ids)
}

// Protocol is 2 (DASH) when the query has a part named _DASH_pathway or
// _DASH_throughput, and 1 (HLS) otherwise, a request with no report
// included (COMPANION §6 "Protocol").
func (q *Query) Protocol() Protocol {
	if q.has&(hasDASHPathway|hasDASHThroughput) != 0 {
		return DASH
	}
	return HLS
}

// Report reads the report from the query and, for CMCD when the query has
// no CMCD part, from h (§4); ids are the policy's pathway IDs in its order.
// A pathway index must fit Report.Pathway's u8 (§7.1): only the first 256
// IDs can be c, and a policy has at most 32 (§3.3).
func (q *Query) Report(h http.Header, ids []string) (Protocol, Report) {
	var r Report
	p := q.Protocol()
	// The pathway values are decoded into buf: a value of this size or
	// less needs no allocation.
	var buf [256]byte
	if p == DASH {
		// Both protocols' parameters: the DASH ones alone (COMPANION §6).
		q.readDASH(&r, ids, buf[:0])
	} else {
		q.readHLS(&r, ids, buf[:0])
	}
	q.readCMCD(&r, h)
	return p, r
}

// readHLS is §4.2.
func (q *Query) readHLS(r *Report, ids []string, buf []byte) {
	if q.has&hasHLSPathway != 0 {
		// c: _HLS_pathway, unquoted, when it is the id of a pathway.
		v := unquote(appendDecoded(buf, q.hlsPathway))
		if i, ok := pathwayIndex(ids, v); ok {
			r.Present |= HasPathway
			r.Pathway = i
		}
	}
	if q.has&hasHLSThroughput != 0 {
		// T: _HLS_throughput, when it is an integer; never unquoted
		// (COMPANION §6 "Unquoting").
		v := appendDecoded(buf, q.hlsThroughput)
		if t, ok := integer(v); ok {
			r.Present |= HasThroughput
			r.Throughput = t
		}
	}
}

// readDASH is §4.3.
func (q *Query) readDASH(r *Report, ids []string, buf []byte) {
	j := 0 // the position of c in the list; 0 when no pathway is current
	if q.has&hasDASHPathway != 0 {
		// c: of _DASH_pathway, unquoted (quoted or not: the clause's own
		// example has no quotes) and cut at each ",", the first item that
		// is the id of a pathway, at position j of the list.
		v := unquote(appendDecoded(buf, q.dashPathway))
		for pos := 0; ; pos++ {
			item, rest, more := bytes.Cut(v, comma)
			if i, ok := pathwayIndex(ids, item); ok {
				r.Present |= HasPathway
				r.Pathway = i
				j = pos
				break
			}
			if !more {
				break
			}
			v = rest
		}
	}
	if q.has&hasDASHThroughput != 0 {
		// T: of _DASH_throughput, cut at each ",", the item at position j
		// when it is an integer.
		v := appendDecoded(buf, q.dashThroughput)
		for pos := 0; ; pos++ {
			item, rest, more := bytes.Cut(v, comma)
			if pos == j {
				if t, ok := integer(item); ok {
					r.Present |= HasThroughput
					r.Throughput = t
				}
				break
			}
			if !more {
				break // fewer than j + 1 items: no T
			}
			v = rest
		}
	}
}

var comma = []byte{','}

// readCMCD is §4.4: the CMCD part's value or, when the query has no such
// part, the CMCD-Request header's; the parser runs only when there is one.
func (q *Query) readCMCD(r *Report, h http.Header) {
	var v [2]uint64
	var has [2]bool
	if q.has&hasCMCD != 0 {
		text := q.cmcd
		if decodedLen(text) != len(text) {
			// Decoded on the stack when it fits, for the fast path.
			var buf [512]byte
			b := appendDecoded(buf[:0], text)
			var ok bool
			if v, has, ok = readSimpleDictionary(b); !ok {
				v, has = readDictionary(string(b))
			}
		} else {
			v, has = readDictionary(text)
		}
	} else {
		text, ok := cmcdRequest(h)
		if !ok {
			return
		}
		v, has = readDictionary(text)
	}
	if has[0] {
		// B is bl (milliseconds).
		r.Present |= HasBuffer
		r.Buffer = v[0]
	}
	if has[1] && r.Present&HasThroughput == 0 {
		// When §4.2 or §4.3 gives no T, T is mtp (kilobits per second)
		// × 1000. An RFC 9651 Integer has at most 15 digits, so the
		// product is below 10^18 < 2^64; were it not, a T that a u64
		// cannot state would be absent, never saturated.
		if hi, t := bits.Mul64(v[1], 1000); hi == 0 {
			r.Present |= HasThroughput
			r.Throughput = t
		}
	}
}

// pathwayIndex returns the index of the pathway whose id is v (the first
// such: a policy's ids are distinct, §3.3).
func pathwayIndex(ids []string, v []byte) (uint8, bool) {
	for i, id := range ids {
		if i > 255 {
			break
		}
		if string(v) == id {
			return uint8(i), true
		}
	}
	return 0, false
}
