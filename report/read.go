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
	p, r, _ := q.ReportUnread(h, ids)
	return p, r
}

// ReportUnread is Report, with what the request carried that did not read
// (Unread): the same protocol and report.
func (q *Query) ReportUnread(h http.Header, ids []string) (Protocol, Report, Unread) {
	var r Report
	var u Unread
	p := q.Protocol()
	// The pathway values are decoded into buf: a value of this size or
	// less needs no allocation.
	var buf [256]byte
	if p == DASH {
		// Both protocols' parameters: the DASH ones alone (COMPANION §6).
		q.readDASH(&r, &u, ids, buf[:0])
	} else {
		q.readHLS(&r, &u, ids, buf[:0])
	}
	q.readCMCD(&r, &u, h)
	return p, r, u
}

// Unread is what a steering request carried of a report that §4 does not
// read (so absent, never zero: the decision is made as without it), one
// bit a reason (issue 26 item 3). Only a value the request carries counts:
// an empty value, or a list without the item at c's position, carries
// none (dash.js leaves an entry empty where it has no sample), and "." is
// the default pathway's ID (rfc8216bis: hls.js sends it before it knows
// its pathway), never an unknown one.
type Unread uint8

const (
	// UnknownPathway: _HLS_pathway, or every item of _DASH_pathway, is
	// not the ID of a pathway of the policy.
	UnknownPathway Unread = 1 << iota
	// ThroughputUnreadable: _HLS_throughput, or the item of
	// _DASH_throughput at c's position, is not an integer (§4.1: a sign,
	// a letter, a value over 2^64 − 1), or the CMCD key mtp is given
	// with a value other than §4.4's.
	ThroughputUnreadable
	// BufferUnreadable: the CMCD key bl is given with a value other than
	// §4.4's (a negative Integer, a Decimal, a String, ...).
	BufferUnreadable
	// CMCDUnreadable: the CMCD text (the query's part, or the
	// CMCD-Request header) is not an RFC 9651 Dictionary.
	CMCDUnreadable
)

// unreadReasons name the bits of Unread, from the lowest.
var unreadReasons = [...]string{"unknown_pathway", "throughput_unreadable", "buffer_unreadable", "cmcd_unreadable"}

// UnreadReasons are the names of every bit of Unread, from the lowest.
func UnreadReasons() []string { return unreadReasons[:] }

// Reasons are the names of u's bits, from the lowest.
func (u Unread) Reasons() []string {
	var out []string
	for i, name := range unreadReasons {
		if u&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// carried reports whether a pathway value names something: neither empty
// nor the default pathway's ".".
func carried(v []byte) bool { return len(v) > 0 && !(len(v) == 1 && v[0] == '.') }

// readHLS is §4.2.
func (q *Query) readHLS(r *Report, u *Unread, ids []string, buf []byte) {
	if q.has&hasHLSPathway != 0 {
		// c: _HLS_pathway, unquoted, when it is the id of a pathway.
		v := unquote(appendDecoded(buf, q.hlsPathway))
		if i, ok := pathwayIndex(ids, v); ok {
			r.Present |= HasPathway
			r.Pathway = i
		} else if carried(v) {
			*u |= UnknownPathway
		}
	}
	if q.has&hasHLSThroughput != 0 {
		// T: _HLS_throughput, when it is an integer; never unquoted
		// (COMPANION §6 "Unquoting").
		v := appendDecoded(buf, q.hlsThroughput)
		if t, ok := integer(v); ok {
			r.Present |= HasThroughput
			r.Throughput = t
		} else if len(v) > 0 {
			*u |= ThroughputUnreadable
		}
	}
}

// readDASH is §4.3.
func (q *Query) readDASH(r *Report, u *Unread, ids []string, buf []byte) {
	j := 0 // the position of c in the list; 0 when no pathway is current
	if q.has&hasDASHPathway != 0 {
		// c: of _DASH_pathway, unquoted (quoted or not: the clause's own
		// example has no quotes) and cut at each ",", the first item that
		// is the id of a pathway, at position j of the list.
		v := unquote(appendDecoded(buf, q.dashPathway))
		named := false
		for pos := 0; ; pos++ {
			item, rest, more := bytes.Cut(v, comma)
			if i, ok := pathwayIndex(ids, item); ok {
				r.Present |= HasPathway
				r.Pathway = i
				j = pos
				break
			}
			named = named || carried(item)
			if !more {
				if named {
					*u |= UnknownPathway
				}
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
				} else if len(item) > 0 {
					*u |= ThroughputUnreadable
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
func (q *Query) readCMCD(r *Report, u *Unread, h http.Header) {
	var k cmcdKeyValues
	parsed := true
	if q.has&hasCMCD != 0 {
		text := q.cmcd
		if decodedLen(text) != len(text) {
			// Decoded on the stack when it fits, for the fast path.
			var buf [512]byte
			b := appendDecoded(buf[:0], text)
			var ok bool
			if k, ok = readSimpleDictionary(b); !ok {
				k, parsed = readDictionary(string(b))
			}
		} else {
			k, parsed = readDictionary(text)
		}
	} else {
		text, ok := cmcdRequest(h)
		if !ok {
			return
		}
		k, parsed = readDictionary(text)
	}
	if !parsed {
		*u |= CMCDUnreadable
		return
	}
	if k.given[0] && !k.has[0] {
		*u |= BufferUnreadable
	}
	if k.given[1] && !k.has[1] {
		*u |= ThroughputUnreadable
	}
	v, has := k.v, k.has
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
