// Package store keeps what a steering server must not lose: rooms, policies,
// per-hop records and decisions (Store), and the table of sessions and loads
// (Loads). Bolt is the embedded implementation, on bbolt; Memory is the same
// store in memory; MemLoads is the table in process. The interfaces are
// shaped so that a shared backend (several instances serving one room) can
// implement them with at most one round trip per request: Steer reads and
// updates a room's loads atomically, and PutDecisions commits decisions in
// groups.
//
// A decision is stored compactly: what cannot be recomputed (its instant,
// session, report, loads, signer and signature, and a reference to the
// evidence it stated, which many decisions share) and nothing the rule
// derives from those (the draw, the limits, the TTL, the reason and the
// priority: §9.2 has a verifier recompute them from the policy, the evidence,
// the report, the session and the loads). Rebuild writes its exact WSD1
// bytes again (§7.1) and refuses to return bytes whose SHA-256 before sig is
// not the digest stored (§7.3).
//
// # Wire format
//
// These layouts are the store's own, never served; each begins with a
// version byte (1) so that it can evolve. Integers are little-endian as in
// the extension (§2) unless marked BE (big-endian, in keys, so that bbolt's
// bytewise order is numeric order); uvarint is encoding/binary's, in its
// shortest form.
//
// An evidence snapshot (Evidence.Body) is the per-pathway evidence of a
// decision: the pathway entries of §7.1 without load and limits, which the
// rule gives for each request. Its key is SHA-256 of the body, so that
// decisions made while a room's evidence did not change share it:
//
//	version   u8   1
//	pathways  u8 n, then n entries, in the policy's order:
//	            status    u8    §5.3
//	            class     u8    2 to 5 with a figure, else 0
//	            joules    u128  J
//	            delivery  u128  D
//	            evidence  u8 k, then k digests of 32 bytes (§5.2)
//
// DecodeEvidence reads exactly these bytes, refusing truncated, malformed
// and unknown_version (COMPANION §1's codes, for the store's own layout) and
// decision_invalid for an entry §7.2 forbids; EncodeEvidence writes them.
//
// In a Bolt file a decision is the row
//
//	key:   t u64 BE ‖ digest 32
//	value: version    u8       1
//	       context    uvarint  the id of its (room, policy, signer)
//	       session    16
//	       protocol   u8
//	       present    u8       the report's (§7.1)
//	       pathway    u8       only with present bit 0
//	       throughput uvarint  only with present bit 1
//	       buffer     uvarint  only with present bit 2
//	       loads      u8 n, then n uvarints, in the policy's order
//	       snapshot   uvarint  the id of its evidence snapshot
//	       sig        64
//
// so that the rows of a busy room are appended in t order and Prune finds
// the oldest first. A room, a policy and the server's key are the same for
// millions of decisions: their 96 bytes are written once, in the contexts
// bucket, and each row names them by a small id; an evidence snapshot is
// likewise written once under an id and counted by the decisions that
// reference it, so that Prune removes it with the last of them. The file's
// buckets:
//
//	meta              "format" → 2 (1: records kept by digest, which Open
//	                  moves to record_rows); "index_through" → the watermark of the
//	                  index by digest (index.go): rows keyed before it are in
//	                  runs or in decision_digests; "secret/NAME" → a
//	                  secret (Store.Secret); "journal_applied" → u64 BE,
//	                  the last group of the journal (journal.go) this
//	                  file holds
//	rooms             room id → version u8 1, u8 1 when a key log head follows
//	                  (else 0), u32 length and the descriptor, then the head
//	policies          digest → the WSP1 bytes
//	active            room id → the digest of its active policy
//	record_rows       end u64 BE ‖ digest → the WMH1 bytes, so that the
//	                  records of a period are written to a few pages
//	record_ends       room id ‖ end u64 BE ‖ digest → hop 32 ‖ start u64
//	record_pending    sequence u64 BE → digest ‖ end u64 BE: the records'
//	                  index by digest's newest entries, in the order put
//	record_runs,      the records' index by digest's runs, as decision_runs
//	record_run_list   and decision_run_list
//	record_digests    digest → end u64 BE, for a record put again after
//	                  Prune removed the records before it
//	decisions         the rows above
//	decision_digests  digest → t u64 BE, for a decision that arrived behind
//	                  the watermark (and every decision of a file written
//	                  before the runs)
//	decision_runs     run id u64 BE → a nested bucket, digest → t u64 BE,
//	                  written in ascending order and packed full
//	decision_run_list run id u64 BE → level u8 ‖ count u64 BE ‖ least t
//	                  u64 BE ‖ greatest t u64 BE, the runs a lookup reads
//	contexts          room ‖ policy ‖ signer → id u64 BE
//	context_ids       id u64 BE → room ‖ policy ‖ signer
//	snapshots         key → id u64 BE ‖ references u64 BE
//	snapshot_bodies   id u64 BE → key ‖ body
//
// Beside the file, its journal (FILE-journal, journal.go) holds the groups
// of decisions made durable and not yet applied to it; Open applies them.
package store
