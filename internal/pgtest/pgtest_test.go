package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server starts, answers, stops at once and starts again on its port,
// with what was committed before still there.
func TestStartStopResume(t *testing.T) {
	s := Start(t)
	dsn := s.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (41), (1)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a stopped server still answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var sum int
	if err := c.QueryRow(ctx, "SELECT sum(v) FROM kept").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 42 {
		t.Fatalf("sum after the restart = %d, want 42", sum)
	}
}
