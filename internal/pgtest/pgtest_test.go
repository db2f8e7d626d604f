package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server starts, answers, stops at once and starts again on its port,
// with what was committed before still there.
func TestStartStopResume(t *testing.T) {
	s := Start(t)
	// PID names the running postmaster (bench reads its CPU from /proc).
	pid, err := s.PID()
	if err != nil {
		t.Fatal(err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(comm)) != "postgres" {
		t.Errorf("PID %d is %q, not postgres", pid, comm)
	}
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
