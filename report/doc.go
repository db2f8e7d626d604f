// Package report reads the client's report from a steering request: its
// current pathway c, its throughput T and its buffer B (extension §4), the
// protocol the report was read from (§7.1), and the client's session
// (COMPANION §6 "Session", §8.1).
//
// A report is read, never refused: a value the request does not carry in
// the form §4 gives, or that does not read, is absent (0, its bit of
// Report.Present clear), never zero. So Read has no error. What a request
// carried that did not read is named, by reason, by Query.ReportUnread
// (Unread), for a server to count (issue 26).
//
// # Wire format
//
// The report arrives in the request target's query and, for CMCD, in a
// header field; these are the forms read:
//
//	/steer?wai_session=00112233445566778899aabbccddeeff&_HLS_pathway="cdn-b"&_HLS_throughput=8000000
//	/steer?_DASH_pathway=%22x,cdn-b%22&_DASH_throughput=5000000,12000000
//	/steer?CMCD=bl%3D21300%2Cmtp%3D48100
//	CMCD-Request: bl=21300,mtp=48100
//
// The query (§4.1) is the target's bytes after the first "?" and before any
// "#" (none when a "#" comes first, COMPANION §6), cut at each "&" into parts
// and each part at its first "=". Name and value are percent-decoded (RFC
// 3986 §2.1, "+" kept), a part with a "%" not followed by two hexadecimal
// digits is no part at all, and of the parts with a name the first is read.
// Pathway values are unquoted; an integer is 1 to 20 ASCII digits of value
// at most 2^64 − 1.
//
//   - HLS (§4.2): c from _HLS_pathway, T from _HLS_throughput.
//   - DASH (§4.3): c is the first item of _DASH_pathway (cut at ",") that is
//     a pathway's id, at position j; T is the item at j (at 0 when there is
//     no c) of _DASH_throughput. A query with either DASH name is protocol 2
//     and is read from the DASH parameters alone (COMPANION §6).
//   - CMCD (§4.4): the CMCD part's value or, when the query has no such
//     part, the CMCD-Request field (lines combined with ", "), parsed as an
//     RFC 9651 Dictionary with httpsfv, a Byte Sequence's padding supplied
//     and its content required to be exact base64. B is bl, and T is
//     mtp × 1000 when §4.2 or §4.3 gave none; each is an Integer ≥ 0 or the
//     least of a non-empty Inner List of them.
//
// The 18 bytes §7.1 lays a report out in are the decision's (package
// decision); this package gives their values.
//
// # Cost
//
// A server reads a report per request, so the query is scanned once
// (ParseQuery; Query.Report and Query.Session read from the scan) without
// building a map or copying, pathway values are decoded into a buffer on
// the stack, and the RFC 9651 parser runs only when the request carries
// CMCD.
package report
