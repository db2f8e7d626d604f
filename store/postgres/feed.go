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
	defer c.Close(context.Background())
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
	rows, err := s.pool.Query(ctx, `SELECT seq, writer, digest, room, hop, start_t, end_t, raw FROM waisteer.records
		WHERE seq > $1 ORDER BY seq LIMIT $2`, at.Records, feedBatch)
	if err != nil {
		return b, err
	}
	for rows.Next() {
		var seq int64
		var writer int32
		var d, room, hop, raw []byte
		var start, end int64
		if err := rows.Scan(&seq, &writer, &d, &room, &hop, &start, &end, &raw); err != nil {
			rows.Close()
			return b, err
		}
		b.At.Records = seq
		if writer == s.instance {
			continue
		}
		r := store.Record{Start: u64(start), End: u64(end), Raw: raw}
		var err1, err2 error
		r.Digest, err1 = hash(d)
		r.Room, err2 = hash(room)
		if err := errors.Join(err1, err2); err != nil || len(hop) != len(r.Hop) {
			rows.Close()
			return b, fmt.Errorf("postgres: record %d does not read: %v", seq, err)
		}
		copy(r.Hop[:], hop)
		b.Records = append(b.Records, r)
	}
	if err := rows.Err(); err != nil {
		return b, err
	}
	rows, err = s.pool.Query(ctx, `SELECT seq, writer, kind, room FROM waisteer.changes WHERE seq > $1 ORDER BY seq LIMIT $2`, at.Changes, feedBatch)
	if err != nil {
		return b, err
	}
	for rows.Next() {
		var seq int64
		var writer int32
		var kind string
		var room []byte
		if err := rows.Scan(&seq, &writer, &kind, &room); err != nil {
			rows.Close()
			return b, err
		}
		b.At.Changes = seq
		if writer == s.instance {
			continue
		}
		id, err := hash(room)
		if err != nil {
			rows.Close()
			return b, err
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
	return b, rows.Err()
}
