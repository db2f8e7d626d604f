// Package room reads the room a steering policy, decision and per-hop record
// belong to: its signed descriptor and the head of its origin's key log
// (COMPANION §4), runs the room step of a verification (COMPANION §4.1,
// extension §9.1 step 1) and answers who may sign what (COMPANION §4.2,
// extension §3.5).
//
// A Room is built once, by Open, and then answers MaySignPolicy,
// MaySignDecision and MaySignRecord from a table made at Open: a server asks
// them on every request.
//
// # Wire format
//
// Both structures are CBOR (RFC 8949) arrays of two byte strings,
// [body, sig] (COMPANION §4). body is the deterministic encoding (RFC 8949
// §4.2.1: shortest integers and lengths, definite lengths, map keys in
// ascending bytewise order of their encodings, no duplicate keys) of a map
// with integer keys, and sig is the 64-byte Ed25519 signature over it in the
// structure's domain (COMPANION §2).
//
// A room descriptor, signed by its authority in the domain
// "wai:room-descriptor"; the room id is SHA-256(body):
//
//	{1: 1,                   version
//	 2: h'<32 bytes>',       authority
//	 3: h'<32 bytes>',       origin (absent for a room with no origin)
//	 4: "name"}              1 to 64 bytes
//
// A key log head, signed by its origin in the domain "wai:key-log-head":
//
//	{1: 1,                   version
//	 2: h'<32 bytes>',       origin
//	 3: seq,                 unsigned
//	 4: [{1: h'<32 bytes>',  key; entries in ascending bytewise key order
//	      2: ["live/hop", …],  may_sign: 1 to 32 distinct strings of 1 to 64
//	                           printable ASCII bytes, ascending bytewise
//	      3: false}, …]}     revoked
//
// For example the descriptor of a room with no origin named "r" is
//
//	82                       array(2)
//	   58 29                 bytes(41): body
//	      a3                 map(3)
//	         01 01           1: 1
//	         02 58 20 <key>  2: bytes(32)
//	         04 61 72        4: "r"
//	   58 40 <sig>           bytes(64)
//
// The readers accept exactly these bytes: anything that is not the
// deterministic encoding of the shape (an extra, missing, duplicate or
// out-of-order key, a wrong type, a non-shortest integer or length, an
// indefinite length, a tag, a key or signature of the wrong length, bytes
// after the array) is room_invalid or key_log_invalid. They decode with
// options that refuse what they can name, then encode what they decoded and
// require the same bytes, which refuses the rest.
package room
