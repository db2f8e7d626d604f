// Package reach reads what a viewer reached (the scheme and the host[:port]
// of the URL it asked for) and who the viewer is (its address), through the
// proxies the server trusts (TLS terminators, load balancers, CDNs):
// [limits] trusted_proxies. Every URL the server writes for a viewer (a
// pool's RELOAD-URI, the front's redirects and backup variants) is built on
// what Read returns, unless the operator gave a public_url; the steering
// budgets and QoE weigh requests by the client address it returns (issue 28,
// "Trusted proxies"; issue 19).
//
// From a peer that is not a trusted proxy, no header is read: the scheme is
// https when the request came over TLS, the host is the request's Host, the
// client is the peer. From a trusted peer, Forwarded is read when the
// request has one; else X-Forwarded-For, X-Forwarded-Proto and
// X-Forwarded-Host. A header that does not read is ignored, with a reason
// (Ignored) that the server counts; reading never panics.
//
// # Wire format
//
// Forwarded (RFC 7239 §4), its field lines joined by commas (RFC 9110
// §5.3), is a list (RFC 9110 §5.6.1) of elements, one a proxy, the last
// written by the nearest:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// Parameter names are case-insensitive and each occurs at most once in an
// element (§4). Whitespace is allowed around the commas only (the list's
// OWS), as the grammar has it. The parameters read are
//
//	for, by = node (§6): nodename [ ":" node-port ], where nodename is an
//	          IPv4 address, "[" IPv6 address "]", "unknown" or an
//	          obfuscated "_" 1*(ALPHA / DIGIT / "." / "_" / "-")
//	proto   = the URI scheme the proxy was reached by (§5.4): http or https
//	host    = the Host the proxy was reached with (§5.3): host[:port]
//
// and any other is skipped as a token or quoted-string. Elements are read
// from the right, as X-Forwarded-For's addresses are (limit.Proxies.Client):
// each element was written by the proxy named in the for= of the element to
// its right (the last by the peer), and the walk goes on leftwards while
// for= names a trusted proxy. It stops at the first element whose for= is
// an untrusted address (the client), or is unknown, obfuscated or absent
// (the client is then the proxy that wrote it). The proto and host are the
// leftmost given among the elements walked: those the viewer reached the
// outermost trusted proxy by.
//
// X-Forwarded-Proto and X-Forwarded-Host are read as one value each: the
// rightmost of their comma-separated values, which the trusted peer wrote
// (a proxy that appends to a value a client sent leaves the client's on the
// left). A proxy the server trusts must set them, never pass a client's on.
package reach
