// Package policy reads, checks, writes and signs the steering policy, WSP1, of
// the energy-aware steering extension (§3): the pathways of a room's stream,
// their hops and limits, and the window the evidence is read over.
//
// Parse is the strict reader: COMPANION §1's reading (truncated, malformed,
// unknown_version), then §3.3's rules (clone_unknown, then policy_invalid).
// Append and AppendBody are its exact inverses; Check runs the rules on a
// value, and Sign checks, signs and writes one. A policy that Parse or Sign
// returned keeps its bytes and digest (§3.4), so that serving it and naming it
// in each decision costs nothing; it is read-only from then on.
//
// # Wire format
//
// All integers are little-endian (§2). A policy is (§3.1):
//
//	+------+---------+------+--------+-----------+-----------+--------+
//	| WSP1 | version | room | signer | period_us | window_us | lag_us |
//	|  4   |  1 (=1) |  32  |   32   |  u64      |  u64      |  u64   |
//	+------+---------+------+--------+-----------+-----------+--------+
//	+-------+-------+--------------------+---------------+----------------+
//	| basis | floor | latency_ceiling_ms | min_buffer_ms | hysteresis_ppm |
//	|  u8   |  u8   |  u32               |  u32          |  u32           |
//	+-------+-------+--------------------+---------------+----------------+
//	+-------+-----------+-------+---------+--------------------------+
//	| ttl_s | min_ttl_s | flags | initial | tiers: n (u8), n × u64   |
//	|  u32  |  u32      |  u8   |  u8     | bit/s, tier 0 first      |
//	+-------+-----------+-------+---------+--------------------------+
//	+-------------------+-------------------+-------------------+
//	| server_uri        | reload_uri        | decision_uri      |
//	| u16 len, bytes    | u16 len, bytes    | u16 len, bytes    |
//	+-------------------+-------------------+-------------------+
//	+--------------------------------------------+-----+
//	| pathways: count (u8), then each entry      | sig |
//	| below, in the policy's order               | 64  |
//	+--------------------------------------------+-----+
//
// A pathway entry is (§3.2):
//
//	+---------------+------+-----------------+----------------------------------+
//	| id            | base | host            | params: count (u8), each:        |
//	| u8 len, bytes | u8   | u8 len, bytes   | u8 len, name, u8 len, value      |
//	+---------------+------+-----------------+----------------------------------+
//	+----------+------------+----------+---------------+--------------------------+
//	| top_tier | latency_ms | capacity | min_share_ppm | hops: k (u8), each:      |
//	| u8       | u32        | u32      | u32           | key (32), place (u8)     |
//	+----------+------------+----------+---------------+--------------------------+
//
// base is 255 (NoBase) for a pathway of the content description, else the
// index of the pathway it clones, which comes before it (§3.3, clone_unknown).
// A host of length 0 is none. capacity 2^32 − 1 (Unlimited) is no limit.
// place is 1 (Edge) or 2 (Interior). flags bit 0 is DASH queryBeforeStart.
//
// For example, a policy with one pathway "a" of one edge hop, one tier of
// 1 000 000 bit/s and the URIs "s", "r" and "d" is 252 bytes: 117 of the
// fixed fields from magic to initial, 9 of tiers, 9 of the URIs, 1 of the
// pathway count, 52 of the entry (2 + 1 + 1 + 1 + 1 + 12 + 1 + 33) and 64 of
// sig.
//
// The digest is SHA-256 over every byte before sig; sig is Ed25519 by signer
// over "wai:steering-policy", 0x01 and those bytes (§3.4, COMPANION §2).
//
// # Reading
//
// A length or count that announces more bytes than remain is truncated, and
// bytes after sig are malformed (COMPANION §1); only a policy that reads is
// checked against §3.3. Of §3.3's refusals, clone_unknown is checked before
// policy_invalid: the text names it first, beside the reading, and §9.1 step 2
// lists it first. A clone may clone a clone that comes before it, and may have
// neither host nor params (§8.1 writes an empty URI-REPLACEMENT for it).
package policy
