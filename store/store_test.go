package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
)

var bg = context.Background()

func hash(label string) sig.Hash { return sig.Digest([]byte(label)) }

func sameRoom(a, b Room) bool {
	return a.ID == b.ID && bytes.Equal(a.Descriptor, b.Descriptor) &&
		bytes.Equal(a.KeyLogHead, b.KeyLogHead) && (a.KeyLogHead == nil) == (b.KeyLogHead == nil)
}

func sameDecision(a, b Decision) bool {
	return a.Digest == b.Digest && a.Room == b.Room && a.Policy == b.Policy && a.T == b.T &&
		a.Session == b.Session && a.Protocol == b.Protocol && a.Report == b.Report &&
		slices.Equal(a.Loads, b.Loads) && a.Evidence == b.Evidence && a.Signer == b.Signer && a.Sig == b.Sig
}

// testRecord is a record of room with the given span; the store reads no
// record, so its bytes need only be distinct.
func testRecord(room sig.Hash, hop byte, start, end uint64) Record {
	raw := fmt.Appendf(nil, "WMH1 %s %d %d %d", room, hop, start, end)
	return Record{Digest: sig.Digest(raw), Room: room, Hop: sig.PublicKey{0: hop}, Start: start, End: end, Raw: raw}
}

// checkRebuild reads m back from s and rebuilds its bytes.
func checkRebuild(t *testing.T, s Store, sc *scenario.Scenario, m made) {
	t.Helper()
	row, err := s.Decision(bg, m.row.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDecision(row, m.row) {
		t.Fatalf("decision %s: got %+v, want %+v", m.row.Digest, row, m.row)
	}
	body, err := s.EvidenceSnapshot(bg, row.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rebuild(sc.Policy, sc.Policy.Digest(), row, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, m.bytes) {
		t.Fatalf("decision %s: rebuilt %d bytes differ from the %d signed", m.row.Digest, len(got), len(m.bytes))
	}
}

// TestBoltReopen: what Bolt stores survives closing and opening the file,
// contexts and snapshots included, and still rebuilds byte for byte (§7.1).
func TestBoltReopen(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	ms := makeDecisions(t, sc, 2, 200, 6*scenario.Period, scenario.Period/40)
	path := filepath.Join(t.TempDir(), "reopen.db")
	s := openTestBolt(t, path)
	putAll(t, s, ms[:100], 16)
	room := Room{ID: sc.Room.ID(), Descriptor: []byte("d"), KeyLogHead: []byte("h")}
	if err := s.PutRoom(bg, room); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPolicy(bg, room.ID, sc.Policy.Digest(), sc.PolicyBytes, true); err != nil {
		t.Fatal(err)
	}
	rec := testRecord(room.ID, 1, 0, 10)
	if _, err := s.PutRecords(bg, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path)
	putAll(t, s, ms[100:], 16) // the contexts of the first half are found again
	for _, m := range ms {
		checkRebuild(t, s, sc, m)
	}
	if rs, err := s.Rooms(bg); err != nil || len(rs) != 1 || !sameRoom(rs[0], room) {
		t.Errorf("rooms after reopening: %v, %v", rs, err)
	}
	if d, raw, err := s.ActivePolicy(bg, room.ID); err != nil || d != sc.Policy.Digest() || !bytes.Equal(raw, sc.PolicyBytes) {
		t.Errorf("active policy after reopening: %s, %v", d, err)
	}
	if raw, err := s.Record(bg, rec.Digest); err != nil || !bytes.Equal(raw, rec.Raw) {
		t.Errorf("record after reopening: %v", err)
	}
	s.mu.RLock()
	contexts := len(s.contexts)
	s.mu.RUnlock()
	if contexts != 1 {
		t.Errorf("%d contexts for one room, policy and signer", contexts)
	}

	// A reader or writer that misses the cache of contexts (a commit not
	// yet published to it) finds them in the file, and adds none.
	s.mu.Lock()
	s.contexts, s.contextIDs = map[decisionContext]uint64{}, map[uint64]decisionContext{}
	s.mu.Unlock()
	checkRebuild(t, s, sc, ms[0])
	more := makeDecisions(t, sc, 13, 5, 7*scenario.Period, 1000)
	putAll(t, s, more, 5)
	checkRebuild(t, s, sc, more[4])
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketContexts).Stats().KeyN; n != 1 {
			t.Errorf("%d contexts in the file for one room, policy and signer", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildRefuses_7_3: a row that does not rebuild to its digest is
// refused, never served: another loads, report or signer changes the bytes.
func TestRebuildRefuses_7_3(t *testing.T) {
	sc := pathwaysScenario(t, 3, 12)
	m := makeDecisions(t, sc, 11, 1, 7*scenario.Period, 0)[0]
	p, pd := sc.Policy, sc.Policy.Digest()
	if _, err := Rebuild(p, pd, m.row, m.ev.Body); err != nil {
		t.Fatal(err)
	}
	edits := map[string]func(r *Decision){
		"loads":    func(r *Decision) { r.Loads = slices.Clone(r.Loads); r.Loads[0]++ },
		"t":        func(r *Decision) { r.T++ },
		"session":  func(r *Decision) { r.Session[0] ^= 1 },
		"protocol": func(r *Decision) { r.Protocol = 3 - r.Protocol },
		"signer":   func(r *Decision) { r.Signer[0] ^= 1 },
		"digest":   func(r *Decision) { r.Digest[0] ^= 1 },
	}
	for name, edit := range edits {
		r := m.row
		edit(&r)
		if _, err := Rebuild(p, pd, r, m.ev.Body); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s changed: %v, want ErrMismatch", name, err)
		}
	}
	// A signature changed is not covered by the digest (§7.3): the bytes
	// rebuild with the stored signature, which a verifier then refuses.
	r := m.row
	r.Sig[0] ^= 1
	b, err := Rebuild(p, pd, r, m.ev.Body)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decision.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.VerifySignature() == nil {
		t.Errorf("a changed signature verifies")
	}
	// Evidence of another window, a policy other than the row's, and loads
	// for another count of pathways are refused before any bytes.
	other := makeDecisions(t, sc, 12, 1, 9*scenario.Period, 0)[0]
	if _, err := Rebuild(p, pd, m.row, other.ev.Body); !errors.Is(err, ErrMismatch) {
		t.Errorf("another window's evidence: %v, want ErrMismatch", err)
	}
	if _, err := Rebuild(p, hash("other"), m.row, m.ev.Body); err == nil {
		t.Errorf("another policy's digest: rebuilt")
	}
	r = m.row
	r.Loads = r.Loads[:2]
	if _, err := Rebuild(p, pd, r, m.ev.Body); err == nil || errors.Is(err, ErrMismatch) {
		t.Errorf("two loads for three pathways: %v", err)
	}
}

// TestBoltSecretReopen: a secret is the same in the bolt file after it is
// reopened (the rest of Secret's promise is the suite's, storetest).
func TestBoltSecretReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.db")
	s := openTestBolt(t, path)
	a, err := s.Secret(bg, "pool", 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestBolt(t, path)
	if b, err := s.Secret(bg, "pool", 16); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("after reopening: %x, %v; before %x", b, err, a)
	}
}
