package recount

import (
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"sort"
	"strings"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// The brute-force reference, written from the rules alone (§6, §6.3, §9.2
// and SPEC-NOTES "Session expiry", "A policy of other pathways resets the loads", "The
// loads survive a policy of the same pathways", "Loads across servers"):
// for each decision it scans every decision before it, with no table kept
// from one decision to the next. Instants are math/big, so that an expiry
// is never rounded.

// refDraw is §6.3's draw: the first four bytes of
// SHA-256("wai:steering-draw" ‖ 0x01 ‖ policy digest ‖ session) as a
// little-endian u32 (§2), mod 1 000 000.
func refDraw(digest sig.Hash, s report.Session) uint32 {
	m := []byte("wai:steering-draw")
	m = append(m, 0x01)
	m = append(m, digest[:]...)
	m = append(m, s[:]...)
	h := sha256.Sum256(m)
	return binary.LittleEndian.Uint32(h[:4]) % 1_000_000
}

// refBand is §6.3's band that holds the draw: pathway i's is
// [S_i, S_i + min_share_ppm_i), S_i the sum of the shares before it.
func refBand(p *policy.Policy, d uint32) int {
	s := new(big.Int)
	for i := range p.Pathways {
		share := big.NewInt(int64(p.Pathways[i].MinSharePPM))
		end := new(big.Int).Add(s, share)
		x := big.NewInt(int64(d))
		if s.Cmp(x) <= 0 && x.Cmp(end) < 0 {
			return i
		}
		s = end
	}
	return -1
}

// refOut is the reference's recount of one decision.
type refOut struct {
	loads   []uint32 // the counts at its T before it is recorded
	changes []int    // per pathway, the changes within δ before it
	reset   bool     // the table was emptied at it, after a first policy
	equalT  bool     // its T is its room's previous decision's
	pos     int      // its place in the server's order
}

type refDecision struct {
	k        int // its place in the entries
	room     sig.Hash
	t        *big.Int
	index    int64
	session  report.Session
	first    int
	expires  *big.Int // T + TTL·10⁶ + grace
	ids      string
	pathways int
}

// reference recounts entries by brute force; out[k] is entries[k]'s.
func reference(entries []Entry, grace, delta uint64) []refOut {
	ds := make([]refDecision, len(entries))
	for k, e := range entries {
		d := e.Decision
		exp := new(big.Int).SetUint64(uint64(d.TTL))
		exp.Mul(exp, big.NewInt(1_000_000))
		exp.Add(exp, new(big.Int).SetUint64(d.T))
		exp.Add(exp, new(big.Int).SetUint64(grace))
		ds[k] = refDecision{
			k: k, room: d.Room, t: new(big.Int).SetUint64(d.T), index: e.Index,
			session: d.Session, first: int(d.Priority[0]), expires: exp,
			ids: strings.Join(e.Policy.IDs(), "/"), pathways: len(e.Policy.Pathways),
		}
	}
	// The server's order: per room, by T, then by the log's index.
	sort.SliceStable(ds, func(a, b int) bool {
		x, y := ds[a], ds[b]
		if x.room != y.room {
			return string(x.room[:]) < string(y.room[:])
		}
		if c := x.t.Cmp(y.t); c != 0 {
			return c < 0
		}
		return x.index < y.index
	})
	bigDelta := new(big.Int).SetUint64(delta)
	out := make([]refOut, len(entries))
	for pos, d := range ds {
		o := refOut{loads: make([]uint32, d.pathways), changes: make([]int, d.pathways), pos: pos}
		// The decisions since the table was last emptied: a run of
		// decisions of the room with the policy's ids.
		start := pos
		for start > 0 && ds[start-1].room == d.room && ds[start-1].ids == d.ids {
			start--
		}
		prevSameRoom := pos > 0 && ds[pos-1].room == d.room
		o.reset = start == pos && prevSameRoom
		o.equalT = prevSameRoom && ds[pos-1].t.Cmp(d.t) == 0
		run := ds[start:pos]

		// latest is the session's latest decision in run[:end], if any.
		latest := func(s report.Session, end int) *refDecision {
			var l *refDecision
			for j := range run[:end] {
				if run[j].session == s {
					l = &run[j]
				}
			}
			return l
		}

		// §6: each session counts on its latest decision's first pathway
		// while T ≤ its expiry.
		seen := map[report.Session]bool{}
		for j := len(run) - 1; j >= 0; j-- {
			r := run[j]
			if seen[r.session] {
				continue
			}
			seen[r.session] = true
			if d.t.Cmp(r.expires) <= 0 {
				o.loads[r.first]++
			}
		}

		if delta > 0 {
			from := new(big.Int).Sub(d.t, bigDelta) // T − δ
			for j, r := range run {
				// A decision within δ: a placement, a move, or a keep
				// just before an expiry.
				if r.t.Cmp(from) >= 0 {
					prev := latest(r.session, j)
					live := prev != nil && prev.expires.Cmp(r.t) >= 0
					switch {
					case !live:
						o.changes[r.first]++
					case prev.first != r.first:
						o.changes[r.first]++
						o.changes[prev.first]++
					case new(big.Int).Sub(prev.expires, r.t).Cmp(bigDelta) < 0:
						o.changes[r.first]++
					}
				}
				// An expiry within δ: in [T − δ, T), with no later
				// decision of its session at or before it.
				if r.expires.Cmp(from) >= 0 && r.expires.Cmp(d.t) < 0 {
					renewed := false
					for _, q := range run[j+1:] {
						if q.session == r.session && q.t.Cmp(r.expires) <= 0 {
							renewed = true
						}
					}
					if !renewed {
						o.changes[r.first]++
					}
				}
			}
		}
		out[d.k] = o
	}
	return out
}
