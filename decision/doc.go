// Package decision is the steering decision of the energy-aware steering
// extension: the rule that orders a policy's pathways for one request (§6),
// the record WSD1 that states its inputs and output and is signed (§7), and
// the bytes a player reads from it: the steering manifest, the HLS tag, the
// DASH element and the record's URI (§8).
//
// # Wire format
//
// A decision, WSD1 (§7.1), is little-endian throughout; u128 is 16 bytes:
//
//	magic     4      "WSD1"
//	version   1      1
//	room      32     the room id
//	signer    32     the key that signs it (§3.5)
//	policy    32     the policy's digest
//	t         u64    the decision's instant on the room clock, µs
//	session   16     the client's session (§6)
//	draw      u32    d (§6.3), below 1 000 000
//	protocol  u8     1 HLS (§4.2), 2 DASH (§4.3)
//	report    18     present u8 (bit 0 c, bit 1 T, bit 2 B)
//	                 pathway u8 (c), throughput u64 (T), buffer u64 (B);
//	                 an absent value is 0
//	pathways  u8 n   the policy's count, then n entries, in the policy's order:
//	            load      u32
//	            limits    u8   bit 0 latency, bit 1 quality, bit 2 capacity (§6.1)
//	            status    u8   0 figure, 1 unmetered, 2 mixed, 3 stale, 4 empty (§5.3)
//	            class     u8   2 to 5 with a figure, else 0
//	            joules    u128 J, µJ; 0 with no figure
//	            delivery  u128 D; 0 with no figure
//	            evidence  u8 k, then k digests of 32 bytes (§5.2)
//	ttl       u32    the TTL, s (§6.5), at least 1
//	reason    u8     1 buffer, 2 floor, 3 share, 4 hold, 5 rank, 6 none (§6.4)
//	priority  u8 m   m = n, then m pathway indices, a permutation, first first
//	sig       64     Ed25519 by signer (§7.3)
//
// Parse reads exactly the bytes given and refuses with COMPANION §1's codes
// (truncated, malformed, unknown_version) and then with decision_invalid for
// a rule of §7.2; Append writes the same layout, and the two agree byte for
// byte. Every count is a u8: at most 255 pathways, 255 records named under a
// pathway and 255 indices. The digest is SHA-256 over the bytes before sig;
// the signature covers the 22 bytes "wai:steering-decision" ‖ 0x01 and then
// those bytes (§7.3, COMPANION §2). AppendSigned writes that prefix and the
// body once into one buffer and signs them in place.
//
// The steering manifest (§8.1) is one line of JSON with no white space, its
// members in this order, the PATHWAY-CLONES member only when the policy has
// a clone:
//
//	{"VERSION":1,"TTL":<ttl>,
//	 "RELOAD-URI":"<reload_uri>(&|?)wai_session=<32 hex of the session>",
//	 "PATHWAY-PRIORITY":["<id>",...],
//	 "PATHWAY-CLONES":[{"BASE-ID":"<base id>","ID":"<id>",
//	   "URI-REPLACEMENT":{"HOST":"<host>","PARAMS":{"<name>":"<value>",...}}},...],
//	 "science.transaction.wai-decision":"<decision_uri><64 hex of the digest>"}
//
// where the separator after reload_uri is `&` when it holds a `?`, the ids
// are the priority's, each clone is in the policy's order, and HOST and
// PARAMS are each written only when the clone has them (an empty
// URI-REPLACEMENT when it has neither). Hexadecimal is lowercase. §3.3's
// character rules leave nothing to escape. A ManifestWriter encodes a
// policy's part of this once; each request appends the TTL, the session,
// the ids and the digest.
//
// The policy rides in the content description as
//
//	#EXT-X-CONTENT-STEERING:SERVER-URI="<server_uri>",PATHWAY-ID="<initial id>"
//
// in HLS (§8.2), and in DASH (§8.3) as
//
//	<ContentSteering defaultServiceLocation="<initial id>" queryBeforeStart="<true|false>"><server_uri></ContentSteering>
//
// on one line, with each `&` of server_uri written `&amp;` (COMPANION §6).
// The record is served at decision_uri followed by its digest (§8.4).
package decision
