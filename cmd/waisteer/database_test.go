package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/pgtest"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/postgres"
)

// TestServeRefusesDatabase (issue 26 item 6, "Must show"): `waisteer
// serve` on a database it must not run on exits with the reason, rather
// than hang or take it:
//   - one that takes connections and never answers, within 10 s (the
//     default connect timeout, 5 s); on bd4ceba serve hung without a word
//     for more than 30 s;
//   - one that holds another deployment's room, at once, naming it and the
//     key that keeps it; on bd4ceba serve took it without a word.
func TestServeRefusesDatabase(t *testing.T) {
	_, cfg := testRoomFiles(t, t.TempDir())
	cfg = onPostgres(t, cfg)

	t.Run("silent", func(t *testing.T) {
		addr := pgtest.Silent(t)
		t.Setenv("WAISTEER_TEST_DSN", "postgres://waisteer@"+addr+"/w?sslmode=disable")
		type result struct {
			errs string
			code int
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			_, errs, code := waisteer(t, "", "serve", "-c", cfg)
			done <- result{errs, code}
		}()
		select {
		case r := <-done:
			took := time.Since(start)
			if r.code != 1 || !strings.Contains(r.errs, "the database did not answer within the connect timeout, 5s") {
				t.Errorf("exit %d after %v:\n%s", r.code, took, r.errs)
			}
			t.Logf("serve exited %d after %v:\n%s", r.code, took.Round(time.Millisecond), r.errs)
		case <-time.After(10 * time.Second):
			t.Fatal("serve on a silent database had not exited after 10 s")
		}
	})

	t.Run("foreign", func(t *testing.T) {
		pg := pgtest.Start(t)
		dsn := pg.Database(t)
		t.Setenv("WAISTEER_TEST_DSN", dsn)
		// Another deployment's room, as its own server stored it.
		other, err := demo.NewRoom("another deployment", "http://127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		st, err := postgres.Open(ctx, dsn, postgres.WithMigrate())
		if err != nil {
			t.Fatal(err)
		}
		err = st.PutRoom(ctx, store.Room{ID: other.ID, Descriptor: other.Descriptor, KeyLogHead: other.Head})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			errs string
			code int
		}
		done := make(chan result, 1)
		go func() {
			_, errs, code := waisteer(t, "", "serve", "-c", cfg)
			done <- result{errs, code}
		}()
		var errs string
		var code int
		select {
		case r := <-done:
			errs, code = r.errs, r.code
		case <-time.After(20 * time.Second):
			t.Fatal("serve took a database holding another deployment's room: still serving after 20 s")
		}
		want := "the store holds rooms this configuration does not name: " + other.ID.String() + "; set keep_foreign_rooms = true in [store] to serve beside them"
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("exit %d:\n%s\nwant it to hold %q", code, errs, want)
		}
		// With keep_foreign_rooms it starts: TestForeignRooms.
	})
}
