package server

import (
	"context"
	"errors"
	"slices"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// restoreChunk is how many leaves of a room's log a restore reads at once.
const restoreChunk = 4096

// logged is a room's log at start-up: its size, and the latest t among
// its last leaves (the log is in commit order, in which a t is at most the
// committer's wait behind the latest, so the latest is among them).
type logged struct {
	size   int64
	latest uint64
}

// resumeLoads has a table of loads that a restart emptied read its next
// loads after the latest decision logged, as it did before the restart
// (Loads.Steer), so that the room's decisions stay in t order however the
// clock stands; it is quick, and New runs it before serving. It returns
// the log as it found it, which restoreLoads counts the sessions of.
func (s *Server) resumeLoads(ctx context.Context, h *hub, loads *store.MemLoads) (logged, error) {
	var lg logged
	size, err := s.st.LogSize(ctx, h.id)
	if err != nil || size == 0 {
		return lg, err
	}
	last, err := s.st.LogEntries(ctx, h.id, max(0, size-restoreChunk), size)
	if err != nil {
		return lg, err
	}
	lg.size = size
	for _, e := range last {
		lg.latest = max(lg.latest, e.T)
	}
	_, err = loads.Snapshot(ctx, h.id, len(h.state.Load().ids), lg.latest)
	return lg, err
}

// restoreLoads counts again, in a table of loads held in memory that a
// restart emptied, the room's sessions still live: each session's latest
// decision in the room's log (issue 16), newest first, back to the first
// whose t is a session's life before now. It runs beside steering, which a
// restore of millions of sessions would otherwise hold up: a decision
// merged later than a new one for its session changes nothing (the later
// t is the latest), and until it ends the loads count fewer sessions than
// live. A session whose latest decision was under a policy of other
// pathways counts nowhere, as the install of the current one reset the
// table (§6, SPEC-NOTES); what it cannot read (a pruned decision) counts
// nowhere. It reads the log of lg, as resumeLoads found it: the decisions
// after are the table's own. It returns how many sessions it counted.
func (s *Server) restoreLoads(ctx context.Context, h *hub, loads *store.MemLoads, lg logged) (int, error) {
	st := h.state.Load()
	p := st.policy
	life := uint64(max(p.TTLs, p.MinTTLs))*1_000_000 + s.grace
	at := max(s.clock(), lg.latest)
	seen := map[report.Session]bool{}
	counted := 0
	for end := lg.size; end > 0; {
		start := max(0, end-restoreChunk)
		es, err := s.st.LogEntries(ctx, h.id, start, end)
		if err != nil {
			return counted, err
		}
		for i := len(es) - 1; i >= 0; i-- {
			e := es[i]
			// A decision a second older than a life is past every
			// session's, even one committed that much late.
			if e.T+life+1_000_000 < at {
				return counted, nil
			}
			if err := ctx.Err(); err != nil {
				return counted, err
			}
			row, err := s.st.Decision(ctx, e.Digest)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return counted, err
			}
			if seen[row.Session] {
				continue
			}
			seen[row.Session] = true
			first, expires, ok, err := s.firstOf(ctx, row, st)
			if err != nil {
				return counted, err
			}
			if ok && expires >= at {
				loads.Merge(h.id, len(st.ids), row.Session, first, row.T, expires, at)
				counted++
			}
		}
		end = start
	}
	return counted, nil
}

// firstOf is the pathway a stored decision put first and its session's
// expiry, when its policy has the current one's pathways (ok).
func (s *Server) firstOf(ctx context.Context, row store.Decision, st *roomState) (int, uint64, bool, error) {
	p, err := s.audit.PolicyOf(ctx, row.Policy)
	if err != nil {
		return 0, 0, false, err
	}
	if !slices.Equal(p.IDs(), st.ids) {
		return 0, 0, false, nil
	}
	body, err := s.st.EvidenceSnapshot(ctx, row.Evidence)
	if err != nil {
		return 0, 0, false, err
	}
	b, err := store.Rebuild(p, row.Policy, row, body)
	if err != nil {
		return 0, 0, false, err
	}
	d, err := decision.Parse(b)
	if err != nil {
		return 0, 0, false, err
	}
	return int(d.Priority[0]), d.T + uint64(d.TTL)*1_000_000 + s.grace, true, nil
}
