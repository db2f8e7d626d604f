// Package evidence reads, writes and signs the per-hop session record, WMH1
// (COMPANION §5, live-metering §3), that a hop signs for each span of the
// room clock, and computes from such records a pathway's evidence
// (extension §5): its window, whether its hops are covered, its status, and
// its joules J and delivery D.
//
// # Wire format
//
// A record is little-endian, every field at a fixed place but the tracks,
// whose u8 count n fixes the rest (COMPANION §5):
//
//	offset    size  field
//	0         4     magic          "WMH1"
//	4         1     version        1
//	5         32    room           the room id (COMPANION §4)
//	37        32    hop            the hop's Ed25519 key, which signs the record
//	69        8     start          u64: the span's first µs on the room clock
//	77        8     end            u64: the µs after its last
//	85        1     class          the acquisition class of joules (COMPANION §3); 0: the unmetered marker
//	86        8     joules         u64: µJ the hop spent over the span; 0 with the marker
//	94        4     sessions       u32: the sessions the hop served
//	98        1     n              u8: the tracks count, at most 32
//	99        10n   tracks         each: kind u8 (1 media, 2 other), direction u8 (1 in, 2 out), bytes u64
//	99+10n    64    subscriber_us  8 × u64: µs of delivery at layer class 0 to 7
//	163+10n   64    sig            Ed25519 by hop (COMPANION §2)
//
// A record is 227 + 10n bytes, so a body of records written back to back
// splits on the count alone (SplitRecords). Its digest (live-metering §3.5)
// is SHA-256 over bytes 0 to 163+10n, all but sig, and sig signs
// "wai:hop-record" ‖ 0x01 ‖ those same bytes.
//
// Reading a record (live-metering §3.6) stops at the first refusal, in this
// order: COMPANION §1's truncated, malformed and unknown_version (ParseRecord,
// which reads all n entries before any rule, even for n above 32);
// energy_invalid, for a class that is not 0, 2, 3, 4 or 5, the marker with
// joules, or a class without (ParseRecord); record_invalid, for end ≤ start,
// n above 32, or a track's kind or direction not 1 or 2 (ParseRecord);
// wrong_room; bad_key or bad_signature (Record.Check). Whether the hop may
// sign (live-metering §5.2) is the room's to say.
//
// A verifier finds a named record among the bytes it is given by
// NamedDigest, SHA-256 over all but the last 64 bytes (COMPANION §6), which
// names bytes that do not read as well as those that do.
package evidence
