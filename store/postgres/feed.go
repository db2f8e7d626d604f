package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waisteer/waisteer/store"
)

var _ store.Feed = (*Store)(nil)

// feedBatch bounds the rows Follow reads at once, so that a server that
// comes back after a long outage catches up in steps.
const feedBatch = 1000

// feedPoll is how long Follow waits for a notification before it looks
// anyway: a notification lost (it is sent only to a listening connection)
// delays a change by at most this.
const feedPoll = time.Second

// FeedHead is the feeds' last numbers now.
func (s *Store) FeedHead(ctx context.Context) (store.FeedPosition, error) {
	var p store.FeedPosition
	err := s.pool.QueryRow(ctx, `SELECT (SELECT coalesce(max(seq), 0) FROM waisteer.records),
		(SELECT coalesce(max(seq), 0) FROM waisteer.changes)`).Scan(&p.Records, &p.Changes)
	return p, err
}

// Follow listens on a connection of its own for the writers' notifications
// (pg_notify at each commit, package doc) and reads what the others wrote
// after from, by number: the notification only wakes it, so one missed
// loses nothing.
func (s *Store) Follow(ctx context.Context, from store.FeedPosition, fn func(store.FeedBatch) error) error {
	c, err := s.listen(ctx)
	if err != nil {
		return err
	}
	defer func() {
		s.health.forget(c)
		c.Close(context.Background())
	}()
	at := from
	for {
		b, err := s.readFeed(ctx, at)
		if err != nil {
			return err
		}
		if b.At != at {
			if err := fn(b); err != nil {
				return err
			}
			at = b.At
			if len(b.Records) == feedBatch {
				continue // more are waiting
			}
		}
		wctx, cancel := context.WithTimeout(ctx, feedPoll)
		_, err = c.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			s.health.saw(ctx, c, err) // the listening connection, lost: no statement says so
			return err
		}
	}
}

// listen takes a connection out of the pool and listens on it; one the
// pool held that died with a database that went away is left for another.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	var err error
	for range 3 {
		var pc *pgxpool.Conn
		if pc, err = s.pool.Acquire(ctx); err != nil {
			return nil, err
		}
		c := pc.Hijack() // a connection that listened goes back to no pool
		if _, err = c.Exec(ctx, "LISTEN waisteer"); err == nil {
			return c, nil
		}
		s.health.forget(c)
		c.Close(context.Background())
		if !pgconn.SafeToRetry(err) {
			break
		}
	}
	return nil, err
}

// readFeed reads the others' records and changes after at.
func (s *Store) readFeed(ctx context.Context, at store.FeedPosition) (store.FeedBatch, error) {
	b := store.FeedBatch{At: at}
	if err := s.readRecords(ctx, &b); err != nil {
		return b, err
	}
	return b, s.readChanges(ctx, &b)
}

// readRecords adds to b the others' records after b.At.Records.
func (s *Store) readRecords(ctx context.Context, b *store.FeedBatch) error {
	rows, err := s.pool.Query(ctx, `SELECT seq, writer, digest, room, hop, start_t, end_t, raw FROM waisteer.records
		WHERE seq > $1 ORDER BY seq LIMIT $2`, b.At.Records, feedBatch)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, start, end int64
		var writer int32
		var d, room, hop, raw []byte
		if err := rows.Scan(&seq, &writer, &d, &room, &hop, &start, &end, &raw); err != nil {
			return err
		}
		b.At.Records = seq
		if writer == s.instance {
			continue
		}
		r, err := recordOf(d, room, hop, start, end, raw)
		if err != nil {
			return fmt.Errorf("postgres: record %d: %w", seq, err)
		}
		b.Records = append(b.Records, r)
	}
	return rows.Err()
}

// readChanges adds to b the rooms whose head or active policy the others
// changed after b.At.Changes.
func (s *Store) readChanges(ctx context.Context, b *store.FeedBatch) error {
	rows, err := s.pool.Query(ctx, `SELECT seq, writer, kind, room FROM waisteer.changes WHERE seq > $1 ORDER BY seq LIMIT $2`, b.At.Changes, feedBatch)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var writer int32
		var kind string
		var room []byte
		if err := rows.Scan(&seq, &writer, &kind, &room); err != nil {
			return err
		}
		b.At.Changes = seq
		if writer == s.instance {
			continue
		}
		id, err := hash(room)
		if err != nil {
			return err
		}
		switch kind {
		case "room":
			if !slices.Contains(b.Rooms, id) {
				b.Rooms = append(b.Rooms, id)
			}
		case "policy":
			if !slices.Contains(b.Policies, id) {
				b.Policies = append(b.Policies, id)
			}
		}
	}
	return rows.Err()
}
