package report

// Protocol is which parameters a report was read from (§7.1, COMPANION §6).
type Protocol uint8

const (
	HLS  Protocol = 1
	DASH Protocol = 2
)

// Bits of Report.Present (§7.1).
const (
	HasPathway    = 1 << 0 // c
	HasThroughput = 1 << 1 // T
	HasBuffer     = 1 << 2 // B
)

// Report is the client's report as §4 reads it and §7.1 lays it out: an
// absent value is 0 and its bit of Present is clear.
type Report struct {
	Present    uint8
	Pathway    uint8  // c: the index of a pathway of the policy
	Throughput uint64 // T: bits per second
	Buffer     uint64 // B: milliseconds
}

// Session is the 16 bytes the server mints at a client's first request and
// carries in the manifest's RELOAD-URI (§6, §8.1).
type Session [16]byte
