// Package conformance builds and checks the steering corpus of extension §11:
// the requests with the report §4 reads from each, and the vectors, each a
// room, a policy, a decision, records and a manifest with the outcome §9
// gives them. The corpus is how anyone, in any language, checks an
// implementation against the text.
//
// Build makes the corpus from fixed seeds (room.TestKey keys, fixed sessions
// and instants, deterministic Ed25519), verifying every vector as it goes:
// Generate writes the same bytes on every run. Check gives a file's every
// request and vector to this implementation (report.Read, verify.Verify) and
// lists what differs; `waisteer conformance gen` and `waisteer conformance
// verify` are these two.
//
// # File format
//
// The file is COMPANION §8's: one JSON object (RFC 8259), UTF-8,
//
//	{"format": "wai-steering-vectors/1",
//	 "room": {"descriptor": HEX, "key_log_head": HEX | null},
//	 "requests": [{"name", "policy", "target", "headers", "protocol",
//	               "report": {"pathway", "throughput", "buffer"}}, ...],
//	 "vectors": [{"name", "room" (optional), "policy", "decision",
//	              "records", "manifest", "outcome",
//	              "reason", "where" (refuse only), "facts" (accept only)}, ...]}
//
// with byte strings in lowercase hexadecimal; throughput, buffer, joules and
// delivery as decimal strings; absent values null; places as COMPANION §7
// writes them; status and reason names as COMPANION §8 lists them. A
// vector's records are only those its decision names (found by digest,
// COMPANION §6), but where a case gives others on purpose: any other record
// cannot change the outcome. Marshal writes members in §8's order, one space
// of indent a level, and escapes nothing JSON does not require; Parse reads
// any file of the format, whatever its white space and member order, and
// refuses anything else (*FormatError).
package conformance
