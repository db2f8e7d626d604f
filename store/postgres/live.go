package postgres

// Servers alive and gone (issue 31, SPEC-NOTES "One log per server and
// room"): each opening of the store refreshes its instance's seen every
// beat; one whose seen is older than gone (by the database's clock, the
// one clock every server shares) is gone, and its open logs are sealed at
// their committed size by the first other server that lists the room
// (Logs) or sweeps (every few beats). Nothing of a gone server's is lost:
// its committed leaves are its log's rows, and a group it had not
// committed stored nothing.

import (
	"context"
	"time"

	"github.com/waisteer/waisteer/internal/sig"
)

// withLiveness sets the beat, the time after which a server is gone and
// the sweep's period in beats (tests: fractions of a second).
func withLiveness(beat, gone time.Duration, sweep int) Option {
	return func(o *options) { o.live = liveness{beat: beat, gone: gone, sweep: sweep} }
}

// beat refreshes the instance's seen every beat until Close, and sweeps
// every sweep beats.
func (s *Store) beat() {
	defer s.beating.Done()
	t := time.NewTicker(s.live.beat)
	defer t.Stop()
	for beats := 1; ; beats++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.live.gone/2)
		_, err := s.pool.Exec(ctx, "UPDATE waisteer.instances SET seen = now() WHERE id = $1", s.instance)
		switch {
		case err != nil:
			s.upSince.Store(0)
		case s.upSince.Load() == 0:
			s.upSince.Store(time.Now().UnixNano())
		}
		if err == nil && s.live.sweep > 0 && beats%s.live.sweep == 0 {
			s.sealGone(ctx, nil) //nolint:errcheck // the next sweep tries again
		}
		cancel()
	}
}

// sealGone seals the open logs of the servers gone (of the room, or of
// every room for nil) at their committed size, and returns how many. A
// log whose row is locked is being appended to by its writer, which is
// then alive whatever its seen says: it is left for the next time. A
// server never takes itself for gone (its beat may be late; it is not).
//
// A server that has not itself reached the database for all of the last
// gone declares nobody gone: after an outage of the database, or of this
// server's link to it, every other server's seen is old too, and each
// refreshes it within a beat of the database coming back.
func (s *Store) sealGone(ctx context.Context, room *sig.Hash) (int64, error) {
	up := s.upSince.Load()
	if up == 0 || time.Since(time.Unix(0, up)) < s.live.gone {
		return 0, nil
	}
	var r []byte
	if room != nil {
		r = room[:]
	}
	tag, err := s.pool.Exec(ctx, `UPDATE waisteer.logs SET sealed = size WHERE id IN (
			SELECT l.id FROM waisteer.logs l WHERE l.sealed IS NULL AND ($1::bytea IS NULL OR l.room = $1) AND l.writer <> $3
				AND EXISTS (SELECT 1 FROM waisteer.instances i WHERE i.id = l.writer AND i.seen < now() - $2 * interval '1 microsecond')
			FOR NO KEY UPDATE OF l SKIP LOCKED)`, r, s.live.gone.Microseconds(), s.instance)
	if err != nil {
		return 0, err
	}
	s.metrics.sealedGone.Add(uint64(tag.RowsAffected()))
	return tag.RowsAffected(), nil
}
