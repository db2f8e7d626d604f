package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/store"
	"github.com/waisteer/waisteer/store/storetest"
)

// The tests of one log per server and room (issue 31; SPEC-NOTES "One log
// per server and room"; schema 5).

// openN opens n stores on one new database, as n servers do; the first
// migrates it. opts apply to every one.
func openN(t *testing.T, n int, opts ...Option) []*Store {
	t.Helper()
	first, dsn := open(t, opts...)
	ss := []*Store{first}
	for range n - 1 {
		s, err := Open(bg(t), dsn, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ss = append(ss, s)
	}
	return ss
}

// leafOf is a decision's leaf as issue 16 defines it, written here from the
// text: its digest, then its t as a big-endian u64.
func leafOf(d store.Decision) []byte {
	return binary.BigEndian.AppendUint64(slices.Clone(d.Digest[:]), d.T)
}

// checkLog checks log n of the room against the decisions it must hold,
// in order: its leaves, its size, its tree (tlog's over the stored hashes,
// against RFC 6962's MTH computed from the leaves by storetest) at its
// size and at a size short of it, and each decision's LogRef.
func checkLog(t *testing.T, s *Store, room sig.Hash, n int64, ds []store.Decision) {
	t.Helper()
	ctx := bg(t)
	size := int64(len(ds))
	if got, err := s.LogSize(ctx, room, n); err != nil || got != size {
		t.Fatalf("log %d: %d leaves, %v; want %d", n, got, err, size)
	}
	es, err := s.LogEntries(ctx, room, n, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	var leaves [][]byte
	for i, d := range ds {
		if es[i].Digest != d.Digest || es[i].T != d.T {
			t.Fatalf("log %d: leaf %d is not the decision put %d-th", n, i, i)
		}
		leaves = append(leaves, leafOf(d))
	}
	r := tlog.HashReaderFunc(func(xs []int64) ([]tlog.Hash, error) { return s.LogHashes(ctx, room, n, xs) })
	for _, m := range []int64{size, size / 2} {
		got, err := tlog.TreeHash(m, r)
		if err != nil || got != tlog.Hash(storetest.MTH(leaves[:m])) {
			t.Fatalf("log %d: the root of %d leaves %v, %v; RFC 6962's %x", n, m, got, err, storetest.MTH(leaves[:m]))
		}
	}
	for i, d := range ds {
		if i%7 != 0 && i != len(ds)-1 {
			continue
		}
		if gn, x, err := s.LogRef(ctx, room, d.Digest); err != nil || gn != n || x != int64(i) {
			t.Fatalf("LogRef of leaf %d of log %d: %d of %d, %v", i, n, x, gn, err)
		}
	}
}

// TestServersOwnLogs (issue 31, "servers that add up"; SPEC-NOTES "One log
// per server and room"): two, then three, servers on one database put
// decisions of one room at once, each in groups of 1 to 40. Each server's
// decisions are exactly the leaves of its own log, in the order it put
// them; every log's tree is RFC 6962's over its leaves; the logs' leaves
// together are all the decisions put, each once; each decision's LogRef is
// its server's log and its place there; Logs lists the logs 1 to n, each
// with its server and size, open. A server that closes seals its log at
// its size.
func TestServersOwnLogs(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			ctx := bg(t)
			ss := openN(t, n)
			room := ds0Room()
			put := make([][]store.Decision, n)
			var wg sync.WaitGroup
			for k, s := range ss {
				wg.Go(func() {
					from := uint64(k) * 1_000_000
					for g := range 30 {
						ds, ev := benchDecisions(1+(g*13+k*7)%40, from)
						from += uint64(len(ds))
						if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
							t.Error(err)
							return
						}
						put[k] = append(put[k], ds...)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			logs, err := ss[0].Logs(ctx, room)
			if err != nil || len(logs) != n {
				t.Fatalf("%d logs, %v; want %d", len(logs), err, n)
			}
			seen := map[sig.Hash]int{}
			numbers := map[int64]bool{}
			for k, s := range ss {
				own, err := s.OwnLog(ctx, room)
				if err != nil {
					t.Fatal(err)
				}
				numbers[own.N] = true
				i := slices.IndexFunc(logs, func(l store.LogInfo) bool { return l.N == own.N })
				if i < 0 || logs[i] != (store.LogInfo{N: own.N, Server: s.server, Size: int64(len(put[k]))}) || own != logs[i] {
					t.Fatalf("server %d's own log %+v; Logs lists %+v", k, own, logs)
				}
				checkLog(t, ss[(k+1)%n], room, own.N, put[k]) // read by another server
			}
			for l := int64(1); l <= int64(n); l++ {
				if !numbers[l] || logs[l-1].N != l {
					t.Fatalf("the logs are numbered %v; want 1 to %d", logs, n)
				}
			}
			// The union of the logs, read through Logs alone, is every
			// decision put, once.
			total := 0
			for _, l := range logs {
				es, err := ss[0].LogEntries(ctx, room, l.N, 0, l.Size)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					seen[e.Digest]++
				}
			}
			for k := range put {
				total += len(put[k])
				for _, d := range put[k] {
					if seen[d.Digest] != 1 {
						t.Fatalf("decision %s is in %d leaves", d.Digest, seen[d.Digest])
					}
				}
			}
			if len(seen) != total {
				t.Fatalf("%d digests in the logs; %d decisions put", len(seen), total)
			}
			// Closing seals: the server's log keeps its size, sealed.
			last := ss[n-1]
			own, err := last.OwnLog(ctx, room)
			if err != nil {
				t.Fatal(err)
			}
			if err := last.Close(); err != nil {
				t.Fatal(err)
			}
			logs, err = ss[0].Logs(ctx, room)
			if err != nil || logs[own.N-1] != (store.LogInfo{N: own.N, Server: last.server, Size: own.Size, Sealed: true}) {
				t.Fatalf("after its server closed, the logs are %+v, %v; want log %d sealed at %d", logs, err, own.N, own.Size)
			}
			for _, l := range logs {
				if l.N != own.N && l.Sealed {
					t.Fatalf("log %d of a server still open is sealed", l.N)
				}
			}
		})
	}
}

// TestOneServerGroupsAtOnce (group.go): groups of one server in one room
// at once append to its one log one after the other (its row's lock): no
// leaf twice, no hole, each goroutine's decisions in the order it put
// them, and the tree RFC 6962's.
func TestOneServerGroupsAtOnce(t *testing.T) {
	s, _ := open(t)
	ctx := bg(t)
	room := ds0Room()
	put := make([][]store.Decision, 4)
	var wg sync.WaitGroup
	for k := range put {
		wg.Go(func() {
			from := uint64(k) * 1_000_000
			for g := range 25 {
				ds, ev := benchDecisions(1+(g*11+k)%30, from)
				from += uint64(len(ds))
				if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
					t.Error(err)
					return
				}
				put[k] = append(put[k], ds...)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	logs, err := s.Logs(ctx, room)
	if err != nil || len(logs) != 1 || logs[0].N != 1 {
		t.Fatalf("logs %+v, %v; want one, 1", logs, err)
	}
	es, err := s.LogEntries(ctx, room, 1, 0, logs[0].Size)
	if err != nil {
		t.Fatal(err)
	}
	at := map[sig.Hash]int{}
	var inLog []store.Decision
	byDigest := map[sig.Hash]store.Decision{}
	for k := range put {
		for _, d := range put[k] {
			byDigest[d.Digest] = d
		}
	}
	for i, e := range es {
		if _, twice := at[e.Digest]; twice {
			t.Fatalf("decision %s is leaf %d and %d", e.Digest, at[e.Digest], i)
		}
		at[e.Digest] = i
		inLog = append(inLog, byDigest[e.Digest])
	}
	if len(at) != len(byDigest) {
		t.Fatalf("%d leaves; %d decisions put", len(at), len(byDigest))
	}
	for k := range put {
		for j := 1; j < len(put[k]); j++ {
			if at[put[k][j-1].Digest] > at[put[k][j].Digest] {
				t.Fatalf("goroutine %d's decisions %d and %d are out of order in the log", k, j-1, j)
			}
		}
	}
	checkLog(t, s, room, 1, inLog)
}

// TestLogNumbersAtOnce (SPEC-NOTES "One log per server and room": a
// server makes its log of a room at its first decision there): six servers
// making their logs of two rooms at once, each from four goroutines, make
// one log each per room, numbered 1 to 6 in each room, none twice.
func TestLogNumbersAtOnce(t *testing.T) {
	ss := openN(t, 6)
	ctx := bg(t)
	rooms := []sig.Hash{sig.Digest([]byte("room a")), sig.Digest([]byte("room b"))}
	type serverRoom struct {
		k    int
		room sig.Hash
	}
	got := map[serverRoom]map[int64]bool{} // the numbers each server's goroutines were given in a room
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k, s := range ss {
		for range 4 {
			wg.Go(func() {
				<-start
				for _, r := range rooms {
					l, err := s.OwnLog(ctx, r)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if got[serverRoom{k, r}] == nil {
						got[serverRoom{k, r}] = map[int64]bool{}
					}
					got[serverRoom{k, r}][l.N] = true
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for _, r := range rooms {
		logs, err := ss[0].Logs(ctx, r)
		if err != nil || len(logs) != len(ss) {
			t.Fatalf("room %s: %+v, %v; want %d logs", r, logs, err, len(ss))
		}
		for i, l := range logs {
			if l.N != int64(i+1) || l.Size != 0 || l.Sealed {
				t.Fatalf("room %s: log %d is %+v; want number %d, empty, open", r, i, l, i+1)
			}
		}
		// The writers, by instance: each server once.
		rows, err := ss[0].pool.Query(ctx, "SELECT writer FROM waisteer.logs WHERE room = $1 ORDER BY writer", r[:])
		if err != nil {
			t.Fatal(err)
		}
		writers, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		var want []int32
		for _, s := range ss {
			want = append(want, s.instance)
		}
		slices.Sort(want)
		if !slices.Equal(writers, want) {
			t.Fatalf("room %s: the logs' writers %v; want each server once, %v", r, writers, want)
		}
		// Each goroutine of a server was given the server's one log.
		for k := range ss {
			if ns := got[serverRoom{k, r}]; len(ns) != 1 {
				t.Fatalf("room %s: server %d's goroutines were given logs %v; want one", r, k, ns)
			}
		}
	}
}

// TestLogSealedForAServerGone (SPEC-NOTES "One log per server and room":
// "a server whose instance row has not been refreshed for 10 s is gone"):
// a server that stops refreshing its instance (paused; here, its beat an
// hour) has its log sealed at its committed size by the next server that
// lists the room once its seen is older than gone, not before, and not by
// itself, and by listing at most once a beat; a log whose row is locked
// (its writer mid-commit) is left open. The paused server's
// next group goes to a new log of its own, never to the sealed one, which
// keeps its leaves and size.
func TestLogSealedForAServerGone(t *testing.T) {
	const gone = 400 * time.Millisecond
	a, dsn := open(t, withLiveness(time.Hour, gone, 0))
	b, err := Open(bg(t), dsn, withLiveness(200*time.Millisecond, gone, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := bg(t)
	room := ds0Room()
	first, ev := benchDecisions(10, 0)
	if err := a.PutDecisions(ctx, []store.Evidence{ev}, first); err != nil {
		t.Fatal(err)
	}
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("before a is gone: %+v, %v; want its log open", logs, err)
	}
	time.Sleep(gone + 100*time.Millisecond)
	// a, its own beat late, does not take itself for gone.
	if logs, err := a.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("a listing the room itself: %+v, %v; want its log open", logs, err)
	}

	// a mid-commit: its log's row locked. b lists the room and leaves it.
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM waisteer.logs WHERE room = $1 AND n = 1 FOR NO KEY UPDATE", room[:]); err != nil {
		t.Fatal(err)
	}
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("a log locked by its writer: %+v, %v; want it left open", logs, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Listing seals at most once a beat (b's, 200 ms): the public routes
	// that list the logs must not turn a flood of GETs into as many
	// writes. Within the beat of the last, the log stays open.
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("listed again within a beat: %+v, %v; want the log open until the next beat", logs, err)
	}
	time.Sleep(250 * time.Millisecond)
	logs, err := b.Logs(ctx, room)
	if err != nil || len(logs) != 1 || logs[0] != (store.LogInfo{N: 1, Server: a.server, Size: 10, Sealed: true}) {
		t.Fatalf("a gone: %+v, %v; want its log 1 sealed at 10", logs, err)
	}

	// a comes back: its next group makes log 2.
	next, _ := benchDecisions(5, 100)
	if err := a.PutDecisions(ctx, []store.Evidence{ev}, next); err != nil {
		t.Fatal(err)
	}
	checkLog(t, b, room, 1, first)
	checkLog(t, b, room, 2, next)
	logs, err = b.Logs(ctx, room)
	if err != nil || len(logs) != 2 || logs[1] != (store.LogInfo{N: 2, Server: a.server, Size: 5}) {
		t.Fatalf("after a came back: %+v, %v; want log 2 of its 5, open", logs, err)
	}
	if own, err := a.OwnLog(ctx, room); err != nil || own.N != 2 {
		t.Fatalf("a's own log %+v, %v; want 2", own, err)
	}
	if a.metrics.sealedUnder.Load() != 1 || a.metrics.logsMade.Load() != 2 || b.metrics.sealedGone.Load() != 1 {
		t.Errorf("metrics: a found %d sealed under it and made %d; b sealed %d; want 1, 2, 1",
			a.metrics.sealedUnder.Load(), a.metrics.logsMade.Load(), b.metrics.sealedGone.Load())
	}
}

// TestLogSealedBySweep (live.go): the logs of a server gone are sealed by
// another's sweep with no one listing the room, and a server alive, which
// refreshes its seen, keeps its log open however long it is idle.
func TestLogSealedBySweep(t *testing.T) {
	const gone = 500 * time.Millisecond
	a, dsn := open(t, withLiveness(time.Hour, gone, 0))
	b, err := Open(bg(t), dsn, withLiveness(20*time.Millisecond, gone, 3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := bg(t)
	room := ds0Room()
	ds, ev := benchDecisions(3, 0)
	if err := a.PutDecisions(ctx, []store.Evidence{ev}, ds); err != nil {
		t.Fatal(err)
	}
	more, _ := benchDecisions(2, 50)
	if err := b.PutDecisions(ctx, []store.Evidence{ev}, more); err != nil {
		t.Fatal(err)
	}
	sealed := func(n int) bool {
		var s bool
		if err := b.pool.QueryRow(ctx, "SELECT sealed IS NOT NULL FROM waisteer.logs WHERE room = $1 AND n = $2", room[:], n).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(10 * time.Second)
	for !sealed(1) {
		if time.Now().After(deadline) {
			t.Fatal("a's log is not sealed 10 s after it went")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * gone)
	if sealed(2) {
		t.Fatal("b's log, its beat alive, was sealed")
	}
	var size, sealedAt int64
	if err := b.pool.QueryRow(ctx, "SELECT size, sealed FROM waisteer.logs WHERE room = $1 AND n = 1", room[:]).Scan(&size, &sealedAt); err != nil || size != 3 || sealedAt != 3 {
		t.Fatalf("a's log: size %d sealed at %d, %v; want 3", size, sealedAt, err)
	}
}

// TestSealedLogRefusesAppends (schema 5's check, logs_sealed): a sealed
// log's size cannot change, whoever writes it; and a group whose log was
// sealed by hand before its first batch goes to a new log.
func TestSealedLogRefusesAppends(t *testing.T) {
	s, _ := open(t)
	ctx := bg(t)
	room := ds0Room()
	ds, ev := benchDecisions(4, 0)
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE waisteer.logs SET sealed = size WHERE room = $1 AND n = 1", room[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE waisteer.logs SET size = 3 WHERE room = $1 AND n = 1", room[:]); err == nil {
		t.Fatal("a sealed log's size changed")
	}
	if err := s.PutDecisions(ctx, []store.Evidence{ev}, ds[2:]); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, room, 1, ds[:2])
	checkLog(t, s, room, 2, ds[2:])
}

// TestKeyEpochsPerLog (SPEC-NOTES "One log per server and room", "Keys over
// time"): a head's bytes are kept once for its seq, its start once for
// each (seq, log); KeyEpochs gives every start, by seq and then log; a
// start in a log the room has not is refused, naming it; a log made after
// the room has had heads starts under the latest, at 0.
func TestKeyEpochsPerLog(t *testing.T) {
	ss := openN(t, 2)
	a, b := ss[0], ss[1]
	ctx := bg(t)
	room := ds0Room()
	la, err := a.OwnLog(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	put := func(s *Store, e store.KeyEpoch) {
		t.Helper()
		if err := s.PutKeyEpoch(ctx, room, e); err != nil {
			t.Fatal(err)
		}
	}
	put(a, store.KeyEpoch{Seq: 3, Log: la.N, From: 0, Head: []byte("head 3")})
	put(a, store.KeyEpoch{Seq: 7, Log: la.N, From: 40, Head: []byte("head 7"), Handover: []byte("a's checkpoint at 40")})
	put(a, store.KeyEpoch{Seq: 7, Log: la.N, From: 41, Head: []byte("head 7")}) // kept already
	if err := a.PutKeyEpoch(ctx, room, store.KeyEpoch{Seq: 8, Log: 9, Head: []byte("head 8")}); err == nil {
		t.Fatal("a start in log 9, which the room has not, was kept")
	}
	// b's log, made now, starts under head 7 at 0.
	lb, err := b.OwnLog(ctx, room)
	if err != nil || lb.N != la.N+1 {
		t.Fatalf("b's log %+v, %v", lb, err)
	}
	put(b, store.KeyEpoch{Seq: 7, Log: lb.N, From: 5, Head: []byte("another head 7")}) // kept already, at 0
	put(b, store.KeyEpoch{Seq: 9, Log: lb.N, From: 12, Head: []byte("head 9"), Handover: []byte("b's checkpoint at 12")})
	put(a, store.KeyEpoch{Seq: 9, Log: la.N, From: 50, Head: []byte("head 9 again"), Handover: []byte("a's checkpoint at 50")})
	want := []store.KeyEpoch{
		{Seq: 3, Log: la.N, From: 0, Head: []byte("head 3")},
		{Seq: 7, Log: la.N, From: 40, Head: []byte("head 7"), Handover: []byte("a's checkpoint at 40")},
		{Seq: 7, Log: lb.N, From: 0, Head: []byte("head 7")},
		{Seq: 9, Log: la.N, From: 50, Head: []byte("head 9"), Handover: []byte("a's checkpoint at 50")},
		{Seq: 9, Log: lb.N, From: 12, Head: []byte("head 9"), Handover: []byte("b's checkpoint at 12")},
	}
	for _, s := range ss {
		got, err := s.KeyEpochs(ctx, room)
		if err != nil || len(got) != len(want) {
			t.Fatalf("epochs %+v, %v; want %d", got, err, len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Seq != w.Seq || g.Log != w.Log || g.From != w.From || string(g.Head) != string(w.Head) || string(g.Handover) != string(w.Handover) || (g.Handover == nil) != (w.Handover == nil) {
				t.Fatalf("epoch %d: %+v; want %+v", i, g, w)
			}
		}
	}
}

// TestCloseWaitsForAGroup (Close): a server closing while a group of its
// commits seals its log after the group: the group's leaves are in it, and
// nothing after.
func TestCloseWaitsForAGroup(t *testing.T) {
	ss := openN(t, 2)
	a, b := ss[0], ss[1]
	ctx := bg(t)
	room := ds0Room()
	var wg sync.WaitGroup
	var put []store.Decision
	errs := make(chan error, 1)
	wg.Go(func() {
		for g := 0; ; g++ {
			ds, ev := benchDecisions(20, uint64(g*20))
			if err := a.PutDecisions(context.Background(), []store.Evidence{ev}, ds); err != nil {
				errs <- err
				return
			}
			put = append(put, ds...)
		}
	})
	time.Sleep(300 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-errs; err == nil {
		t.Fatal("a group after Close committed")
	}
	logs, err := b.Logs(ctx, room)
	if err != nil || len(logs) != 1 || logs[0] != (store.LogInfo{N: 1, Server: a.server, Size: int64(len(put)), Sealed: true}) {
		t.Fatalf("after a closed: %+v, %v; want its log sealed at the %d it committed", logs, err, len(put))
	}
	checkLog(t, b, room, 1, put)
}

// TestNoSealingFreshFromAnOutage (live.go): a server that has not itself
// reached the database for all of the last gone (just opened, or back from
// an outage) takes nobody for gone, however old their seen: after an
// outage every server's seen is old, and each refreshes it within a beat.
func TestNoSealingFreshFromAnOutage(t *testing.T) {
	const gone = 500 * time.Millisecond
	a, dsn := open(t, withLiveness(time.Hour, gone, 0))
	ctx := bg(t)
	room := ds0Room()
	if _, err := a.OwnLog(ctx, room); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, "UPDATE waisteer.instances SET seen = now() - interval '1 hour' WHERE id = $1", a.instance); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, dsn, withLiveness(20*time.Millisecond, gone, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("b, just opened: %+v, %v; want a's log left open", logs, err)
	}
	time.Sleep(gone + 50*time.Millisecond)
	b.upSince.Store(0) // a beat of b's failed
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || logs[0].Sealed {
		t.Fatalf("b, back from an outage: %+v, %v; want a's log left open", logs, err)
	}
	time.Sleep(gone + 100*time.Millisecond) // b's beats reach the database again
	if logs, err := b.Logs(ctx, room); err != nil || len(logs) != 1 || !logs[0].Sealed {
		t.Fatalf("b, up for gone: %+v, %v; want a's log sealed", logs, err)
	}
}
