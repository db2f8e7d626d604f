package postgres

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waisteer/waisteer/internal/pgtest"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/storetest"
)

// server is the package's PostgreSQL, one for every test; each test has a
// database of its own.
var server *pgtest.Server

func TestMain(m *testing.M) {
	s, err := pgtest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	s.Close()
	os.Exit(code)
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open returns a store on a fresh, migrated database.
func open(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	dsn := server.Database(t)
	s, err := Open(bg(t), dsn, append(opts, WithMigrate())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// openTwo opens two stores on one new database, as two servers do (issue
// 15): the first migrates it.
func openTwo(t *testing.T) (a, b *Store) {
	t.Helper()
	a, dsn := open(t)
	b, err := Open(bg(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// The room clock's u64 values are written as bigint with the top bit
// flipped: every u64 fits, and bigint's order is u64's (issue 15: records
// and decisions are found by end and t in SQL). Checked over the values at
// the edges of both types, pairwise, against Go's u64 order.
func TestI64KeepsOrder(t *testing.T) {
	vals := []uint64{0, 1, 2, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, 1<<53 + 1,
		math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxInt64 + 2, math.MaxUint64 - 1, math.MaxUint64}
	for _, a := range vals {
		if u64(i64(a)) != a {
			t.Errorf("u64(i64(%d)) = %d", a, u64(i64(a)))
		}
		for _, b := range vals {
			if (a < b) != (i64(a) < i64(b)) {
				t.Errorf("%d < %d is %v, but as bigint %d < %d is %v", a, b, a < b, i64(a), i64(b), i64(a) < i64(b))
			}
		}
	}
}

// The same order holds in the database itself: values written through
// i64 come back sorted by SQL as u64 sorts them.
func TestI64OrderInSQL(t *testing.T) {
	s, _ := open(t)
	ctx := bg(t)
	vals := []uint64{math.MaxUint64, 0, math.MaxInt64 + 1, 7, math.MaxInt64, 1 << 40}
	var ins []int64
	for _, v := range vals {
		ins = append(ins, i64(v))
	}
	rows, err := s.pool.Query(ctx, "SELECT v FROM unnest($1::bigint[]) AS u(v) ORDER BY v", ins)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
		var v int64
		err := r.Scan(&v)
		return u64(v), err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(vals)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("SQL's order %v, want %v", got, want)
	}
}

// Issue 15: the schema is versioned; migrations are applied once, by one
// instance at a time, and a binary refuses a schema it does not know.
func TestMigrate(t *testing.T) {
	ctx := bg(t)
	dsn := server.Database(t)

	// A fresh database is refused without migrating, with the way out.
	if _, err := Open(ctx, dsn); err == nil || !strings.Contains(err.Error(), "waisteer migrate") {
		t.Fatalf("Open of an unmigrated database: %v, want a refusal naming waisteer migrate", err)
	}

	// Eight instances migrating at once: the versions are applied once in
	// all, and every one of them ends on this build's version.
	var wg sync.WaitGroup
	applied := make([][]int, 8)
	errs := make([]error, 8)
	for i := range applied {
		wg.Go(func() { applied[i], errs[i] = Migrate(ctx, dsn) })
	}
	wg.Wait()
	var all []int
	for i := range applied {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	slices.Sort(all)
	var want []int
	for v := 1; v <= Version; v++ {
		want = append(want, v)
	}
	if !slices.Equal(all, want) {
		t.Fatalf("versions applied by the eight: %v, want each of %v once", all, want)
	}
	if again, err := Migrate(ctx, dsn); err != nil || len(again) != 0 {
		t.Fatalf("migrating a migrated database applied %v, %v", again, err)
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// A schema newer than this build's is refused, by Open and Migrate.
	if _, err := s.pool.Exec(ctx, "INSERT INTO waisteer.schema_versions (version) VALUES ($1)", Version+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
	if _, err := Migrate(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Migrate of a newer schema: %v", err)
	}
}

// A DSN that does not read, and a server that does not answer, are
// refused with the reason.
func TestOpenRefuses(t *testing.T) {
	ctx := bg(t)
	if _, err := Open(ctx, "postgres://[::1"); err == nil {
		t.Fatal("a DSN that does not parse was accepted")
	}
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := Open(ctx2, "postgres://waisteer@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", WithMigrate()); err == nil {
		t.Fatal("a server that does not listen was accepted")
	}
}

// Records, decisions and changes are numbered from one sequence in commit
// order (package doc), so that an instance that follows a feed by number,
// asking for what is above the last number it saw, misses nothing: a
// follower polling while four writers commit must see every record.
// Without the feed's lock a record numbered below one already seen can
// commit after it, and such a follower skips it.
func TestFeedFollowerMissesNothing(t *testing.T) {
	s, _ := open(t)
	ctx := bg(t)
	room := sig.Digest([]byte("room"))
	done := make(chan struct{})
	seen := map[int64]bool{}
	var last int64
	follow := func() error {
		rows, err := s.pool.Query(ctx, "SELECT seq FROM waisteer.records WHERE seq > $1 ORDER BY seq", last)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, n := range got {
			seen[n], last = true, n
		}
		return err
	}
	var fwg sync.WaitGroup
	fwg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := follow(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				r := store.Record{Digest: sig.Digest(fmt.Appendf(nil, "r%d-%d", w, i)), Room: room, Start: uint64(i), End: uint64(i + 1), Raw: []byte{byte(i)}}
				if _, err := s.PutRecords(ctx, []store.Record{r}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	fwg.Wait()
	if err := follow(); err != nil {
		t.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, "SELECT seq FROM waisteer.records")
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 200 {
		t.Fatalf("%d records stored, want 200", len(all))
	}
	for _, n := range all {
		if !seen[n] {
			t.Errorf("the follower never saw record %d", n)
		}
	}
}

// The store suite every engine passes (store/storetest), on PostgreSQL.
func TestSuite(t *testing.T) {
	storetest.Run(t, storetest.Engine{
		Name: "postgres",
		Open: func(t *testing.T, chunk int) store.Store {
			s, _ := open(t, WithPruneChunk(chunk))
			return s
		},
		Snapshots: func(t testing.TB, st store.Store) int {
			var n int
			if err := st.(*Store).pool.QueryRow(context.Background(), "SELECT count(*) FROM waisteer.snapshots").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

// The store's connections plan its prepared statements once (issue 31:
// replanning a group's insert at each execution was 11 % of PostgreSQL's
// CPU), unless the DSN says otherwise: an operator's setting is kept.
func TestPlanCacheMode(t *testing.T) {
	ctx := bg(t)
	s, dsn := open(t)
	var mode string
	if err := s.pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode %q, %v; want force_generic_plan", mode, err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	other, err := Open(ctx, dsn+sep+"plan_cache_mode=force_custom_plan")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "force_custom_plan" {
		t.Fatalf("with the DSN's plan_cache_mode: %q, %v; want force_custom_plan", mode, err)
	}
}
