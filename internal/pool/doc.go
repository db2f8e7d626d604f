// Package pool is steering without meters: a pool of health-checked,
// weighted edges, as the station's content-steering seed describes it
// (its [steering] table, "How the order is chosen"), with Apple's pathway
// clones and buckets (the zh seed). It knows nothing of HTTP servers or of
// health checks: it is given a configuration, told which edges are up,
// drained or reweighted, and writes each session's steering manifest.
//
// Every change (SetUp, Drain, SetWeight, Reconfigure) builds an immutable
// state under the writers' lock and publishes it through an atomic pointer;
// Steer reads the pointer and takes no lock.
//
// # The order
//
// The edges listed are the healthy ones (up and not drained); with none,
// every edge that is not drained; with none of those either, every edge.
// Of the listed, those of weight above 0 are ranked for the session by a
// weighted rendezvous hash, highest score first,
//
//	score = w / −ln(u),  u = (⌊h / 2¹¹⌋ + ½) / 2⁵³  in (0, 1)
//	h     = mix(s₀ ⊕ mix(s₁ ⊕ p))
//	mix   = the SplitMix64 output function: z += 0x9e3779b97f4a7c15,
//	        z = (z ⊕ z≫30)·0xbf58476d1ce4e5b9, z = (z ⊕ z≫27)·0x94d049bb133111eb,
//	        z ⊕ z≫31
//
// where s₀ and s₁ are the session's bytes 0–7 and 8–15 read little-endian
// and p is the FNV-1a 64-bit hash of the pathway ID; equal scores go to the
// edge written first. Nothing in it depends on the process, so a session
// keeps its order across restarts and servers. Weight-0 edges follow in the
// order written.
//
// With assign = "buckets", the first rule (in the order written) whose range
// holds the session's bucket and whose cohort, if it has one, holds the
// session's cohort gives the priority's head: its priority less the edges
// not listed; the rest of the listed edges follow in the order above.
//
// A session's first answer (a request with no session this server keeps)
// that reports the pathway its player is on (Request.Reported: hls.js's
// _HLS_pathway, the first of dash.js's _DASH_pathway) puts that pathway
// first while it is listed, the rest following in the order above, with a
// TTL of at most KeepTTL: hls.js 1.7.4 stalls for good when its first
// answer moves it to another pathway while a fragment is loading, and a
// player's first request reports the pathway its playlist started it on.
// A QoE move still puts the pathway behind. When the pathway it reports is
// clone_from and no edge has that pathway (the content's own pathway, of
// which the edges are clones: the station seed's "."), the manifest names it
// first, ahead of the session's order of the edges, with the same TTL.
// Later answers follow the session's order.
//
// # Sessions
//
// A session is 16 bytes, AES-128 under the server's key of
//
//	random    8    from crypto/rand
//	bucket    u16  big-endian; 0 under assign = "rendezvous"
//	zero      6
//
// A session that does not decrypt to six zero bytes was not minted here and
// is replaced; under buckets so is one whose bucket is out of range or
// differs from the request's bucket parameter. Buckets are dealt round-robin,
// each cohort a rule names from a counter of its own and every other
// session from one more, each starting at a random offset: a rule limited to
// a cohort then gives its share of that cohort whatever the order in which
// the cohorts' sessions arrive.
//
// # Wire format
//
// The manifest is one line of JSON with no white space, its members in
// this order:
//
//	{"VERSION":1,"TTL":<ttl_s>,
//	 "RELOAD-URI":"<base><path>?session=<32 hex>[&bucket=<n>][&<cohort_param>=<value>]",
//	 "PATHWAY-PRIORITY":["<pathway>",...],
//	 "PATHWAY-CLONES":[{"BASE-ID":"<clone_from>","ID":"<pathway>",
//	   "URI-REPLACEMENT":{"HOST":"<host>"[,"PARAMS":{...}]
//	     [,"PER-VARIANT-URIS":{...}][,"PER-RENDITION-URIS":{...}]}},...]}
//
// base is public_url, else the scheme and host the request reached; the
// bucket is written under assign = "buckets", the cohort parameter when the
// request carried one (query-escaped). Hexadecimal is lowercase. Object
// members inside URI-REPLACEMENT are sorted by key. PATHWAY-CLONES holds one
// clone for every edge with a host, when clone_from is not empty: first
// those of the priority in its order, then the others in the order written;
// with no clone the member is left out, never written empty. Every string
// is JSON-escaped.
package pool
