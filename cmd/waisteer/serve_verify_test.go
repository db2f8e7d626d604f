package main

// `verify -url` and `audit` against a served room's routes.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/store"
)

// verifyURLServer serves a scenario's decision and everything a verifier
// needs at the server's /v1/ routes, with edit changing what is served.
func verifyURLServer(t *testing.T, edit func(files map[string][]byte)) (url string, sc *scenario.Scenario, m *scenario.Made) {
	t.Helper()
	sc, err := scenario.Build(scenario.Spec{Name: "verify url", Periods: 10})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := report.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err = sc.Decide(scenario.Request{T: 8*scenario.Period + 10_000_000, Session: sess})
	if err != nil {
		t.Fatal(err)
	}
	id := sc.Room.ID().String()
	files := map[string][]byte{
		"/v1/decisions/" + m.Digest.String():          m.Bytes,
		"/v1/rooms/" + id + "/descriptor":             sc.Room.DescriptorBytes,
		"/v1/rooms/" + id + "/keylog":                 sc.Room.HeadBytes,
		"/v1/policies/" + sc.Policy.Digest().String(): sc.PolicyBytes,
	}
	for _, r := range sc.Records {
		files["/v1/records/"+evidence.NamedDigest(r).String()] = r
	}
	// The room's log of one decision (issue 16): its checkpoint, signed by
	// the steering key under the room's one head (seq 1, from leaf 0), the
	// head by seq, and the inclusion of leaf 0 in a tree of one, whose
	// root is the leaf's hash (RFC 6962 §2.1) and whose proof is empty.
	leaf := store.LogEntry{Digest: m.Digest, T: m.Decision.T}.Leaf()
	cp, err := declog.Sign(declog.Checkpoint{Room: sc.Room.ID(), Size: 1, Root: tlog.Hash(sha256.Sum256(append([]byte{0}, leaf...))),
		Keys: &declog.Epoch{Seq: 1, From: 0}}, sc.SteerKey)
	if err != nil {
		t.Fatal(err)
	}
	files["/v1/rooms/"+id+"/log/checkpoint"] = cp
	files["/v1/rooms/"+id+"/log/epochs"] = []byte(`[{"seq":1,"from":0,"handover":""}]`)
	files["/v1/rooms/"+id+"/keylog/1"] = sc.Room.HeadBytes
	files["/v1/rooms/"+id+"/log/inclusion/"+m.Digest.String()] = []byte(`{"index":0,"size":1,"proof":[]}`)
	// Its tiles (C2SP tlog-tiles): the one entry after its length, and the
	// one leaf hash.
	rh := sha256.Sum256(append([]byte{0}, leaf...))
	files["/v1/rooms/"+id+"/log/tile/entries/000.p/1"] = append([]byte{0, 40}, leaf...)
	files["/v1/rooms/"+id+"/log/tile/0/000.p/1"] = rh[:]
	if edit != nil {
		edit(files)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, sc, m
}

// TestVerifyURL: `verify -url` fetches a decision's inputs (§9.1) from its
// server's routes; a record the server does not hold is refused
// record_missing at its place (§9.1 step 4.1); a pinned authority refuses
// another room; and what is not the decision the URL names is an error.
func TestVerifyURL(t *testing.T) {
	base, sc, m := verifyURLServer(t, nil)
	u := base + "/v1/decisions/" + m.Digest.String()
	authority := sc.Room.AuthorityKey.Public().String()
	out, errs, code := waisteer(t, "", "verify", "-url", u, "-authority", authority)
	if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) || !strings.Contains(out, m.Digest.String()) {
		t.Errorf("exit %d: %s %s", code, out, errs)
	}
	// With the manifest served with it (§9.1 step 7): the right one, then
	// another.
	dir := t.TempDir()
	mf := filepath.Join(dir, "manifest.json")
	os.WriteFile(mf, m.Manifest, 0o644)
	if out, errs, code := waisteer(t, "", "verify", "-url", u, "-manifest", mf); code != 0 {
		t.Errorf("with its manifest: exit %d: %s %s", code, out, errs)
	}
	os.WriteFile(mf, bytes.Replace(m.Manifest, []byte(`"TTL":`), []byte(`"TTL":1`), 1), 0o644)
	if out, _, code := waisteer(t, "", "verify", "-url", u, "-manifest", mf); code != 1 || !strings.Contains(out, `"reason":"manifest_mismatch"`) {
		t.Errorf("with another manifest: exit %d: %s", code, out)
	}

	other := strings.Repeat("01", 32)
	// Refused before anything else is fetched, with an outcome object like
	// any refusal.
	if out, errs, code := waisteer(t, "", "verify", "-url", u, "-authority", other); code != 1 ||
		out != `{"outcome":"refuse","reason":"authority_mismatch","where":"room"}`+"\n" || !strings.Contains(errs, "not the pinned "+other) {
		t.Errorf("another authority pinned: exit %d: %s %s", code, out, errs)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no digest", []string{"-url", base + "/v1/decisions/"}, 2, "does not end in a decision's digest"},
		{"not http", []string{"-url", "ftp://x/" + m.Digest.String()}, 2, "an http or https URL is needed"},
		{"unknown decision", []string{"-url", base + "/v1/decisions/" + strings.Repeat("0", 64)}, 1, "404"},
		{"files too", []string{"-url", u, "-room", "room.cbor"}, 2, "give none of them as files"},
		{"authority alone", []string{"-authority", authority, "-room", "r", "-policy", "p", "-decision", "d"}, 2, "-authority goes with -url"},
		{"bad authority", []string{"-url", u, "-authority", "xyz"}, 2, "-authority"},
	} {
		out, errs, code := waisteer(t, "", append([]string{"verify"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s %s", c.name, code, out, errs)
		}
	}

	// The log (issue 16): where the decision is, and the head it is
	// checked against.
	if out, errs, code := waisteer(t, "", "verify", "-url", u); code != 0 || !strings.Contains(out, `"log":{"index":0,"size":1,"key_log_seq":1}`) {
		t.Errorf("the log's facts: exit %d: %s %s", code, out, errs)
	}
	// A decision the log does not hold is refused, whatever §9 says.
	base2, _, m2 := verifyURLServer(t, func(f map[string][]byte) {
		for k := range f {
			if strings.Contains(k, "/log/inclusion/") {
				delete(f, k)
			}
		}
	})
	if out, errs, code := waisteer(t, "", "verify", "-url", base2+"/v1/decisions/"+m2.Digest.String()); code != 1 ||
		out != `{"outcome":"refuse","reason":"not_in_log","where":"log"}`+"\n" || !strings.Contains(errs, "404") {
		t.Errorf("not in the log: exit %d: %s %s", code, out, errs)
	}
	// Keys over time (issue 16 item 5): head 2 revokes the steering key
	// from leaf 1 on. The decision at leaf 0 was logged under head 1, and
	// still verifies; checked against today's head it would be
	// signer_revoked (§3.5).
	head2, seq2, err := room.Revoke(sc.Room.Room.Head(), sc.Room.OriginKey, sc.SteerKey.Public())
	if err != nil || seq2 != 2 {
		t.Fatal(seq2, err)
	}
	base3, _, m3 := verifyURLServer(t, func(f map[string][]byte) {
		id := sc.Room.ID().String()
		handover := f["/v1/rooms/"+id+"/log/checkpoint"] // of leaf 0, signed under head 1
		c, err := declog.Peek(handover, sc.Room.ID())
		if err != nil {
			t.Fatal(err)
		}
		c.Keys = &declog.Epoch{Seq: 2, From: 1}
		now, err := declog.Sign(c, sc.Room.AuthorityKey) // the steering key is revoked: the authority signs
		if err != nil {
			t.Fatal(err)
		}
		eps, _ := json.Marshal([]map[string]any{{"seq": 1, "from": 0, "handover": ""}, {"seq": 2, "from": 1, "handover": string(handover)}})
		f["/v1/rooms/"+id+"/log/checkpoint"], f["/v1/rooms/"+id+"/log/epochs"] = now, eps
		f["/v1/rooms/"+id+"/keylog/2"], f["/v1/rooms/"+id+"/keylog"] = head2, head2
	})
	u3 := base3 + "/v1/decisions/" + m3.Digest.String()
	if out, errs, code := waisteer(t, "", "verify", "-url", u3); code != 0 || !strings.Contains(out, `"key_log_seq":1}`) {
		t.Errorf("a decision logged before its signer's revocation: exit %d: %s %s", code, out, errs)
	}
	if out, _, code := waisteer(t, "", "verify", "-url", u3, "-log=false"); code != 1 || !strings.Contains(out, `"reason":"signer_revoked"`) {
		t.Errorf("the same against today's head: exit %d: %s", code, out)
	}

	// A record the server does not hold.
	first := m.Decision.Pathways[0].Records[0]
	base, _, m = verifyURLServer(t, func(f map[string][]byte) { delete(f, "/v1/records/"+first.String()) })
	out, _, code = waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
	if code != 1 || !strings.Contains(out, `"reason":"record_missing","where":"evidence/0/0"`) {
		t.Errorf("a record not held: exit %d: %s", code, out)
	}
	// Other bytes at the decision's URL, a policy not held, a record past
	// the limit: each an outcome object naming what could not be had, and
	// why on standard error.
	for _, c := range []struct {
		name    string
		edit    func(f map[string][]byte, m string)
		outcome string
		want    string
	}{
		{"other bytes", func(f map[string][]byte, d string) { f["/v1/decisions/"+d] = append(f["/v1/decisions/"+d], 0) },
			`{"outcome":"refuse","reason":"digest_mismatch","where":"decision"}`, "not the decision"},
		{"no policy", func(f map[string][]byte, _ string) {
			for k := range f {
				if strings.HasPrefix(k, "/v1/policies/") {
					delete(f, k)
				}
			}
		}, `{"outcome":"refuse","reason":"http_404","where":"policy"}`, "/v1/policies/"},
		{"big record", func(f map[string][]byte, _ string) {
			f["/v1/records/"+first.String()] = make([]byte, api.MaxRecordBytes+1)
		}, `{"outcome":"refuse","reason":"answer_too_large","where":"evidence/0/0"}`, "more than 4096 bytes"},
	} {
		var digest string
		base, _, m := verifyURLServer(t, func(f map[string][]byte) {
			for k := range f {
				if d, ok := strings.CutPrefix(k, "/v1/decisions/"); ok {
					digest = d
				}
			}
			c.edit(f, digest)
		})
		out, errs, code := waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
		if code != 1 || out != c.outcome+"\n" || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s %s", c.name, code, out, errs)
		}
	}
}

// postResults posts records and returns the server's result for each,
// refused ones included.
func postResults(ctx context.Context, hc *http.Client, target string, body []byte) ([]api.RecordResult, error) {
	a, err := (&client.Client{HTTP: hc}).PostRecords(ctx, target, body)
	if a == nil {
		return nil, err
	}
	return a.Results, nil
}

// TestAuditBadInput (issue 16): `audit` over a room's log served as files;
// a malformed checkpoint, one signed by a key the room does not list, a
// tile that is not the tree's or does not read, and `verify -url` given a
// malformed proof, each refused with the reason; the audit of the honest
// files holds, and a second one extends the checkpoint it kept.
func TestAuditBadInput(t *testing.T) {
	state := filepath.Join(t.TempDir(), "cp")
	base, sc, _ := verifyURLServer(t, nil)
	args := []string{"audit", "-url", base, "-room", sc.Room.ID().String(), "-state", state}
	for range 2 {
		if out, errs, code := waisteer(t, "", args...); code != 0 || !strings.Contains(out, "a log of 1 decisions") || !strings.Contains(out, "outcome: every check holds") {
			t.Fatalf("the honest log: exit %d: %s %s", code, out, errs)
		}
	}
	if out, _, _ := waisteer(t, "", args...); !strings.Contains(out, "consistent with the checkpoint seen before (1 decisions)") {
		t.Errorf("the second audit does not say it extends the first's checkpoint: %s", out)
	}
	id := sc.Room.ID().String()
	other, err := declog.Sign(declog.Checkpoint{Room: sc.Room.ID(), Size: 1, Keys: &declog.Epoch{Seq: 1}}, room.TestKey("not the room's"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		file string
		body []byte
		want string
	}{
		{"a checkpoint that is no note", "/log/checkpoint", []byte("hello\n"), "no signatures after its text"},
		{"a checkpoint with a size of 01", "/log/checkpoint", []byte("waisteer/rooms/" + id + "/log\n01\nAAAA\n\n— x AAAA\n"), "not a count in decimal"},
		{"a checkpoint by another key", "/log/checkpoint", other, "signed by no key that may sign for room"},
		{"a tile of entries cut short", "/log/tile/entries/000.p/1", []byte{0, 40, 1, 2}, "cut short"},
		{"a tile of entries not the tree's", "/log/tile/entries/000.p/1", append([]byte{0, 40}, make([]byte, 40)...), "leaf 0 is not the tree's"},
		{"epochs that do not read", "/log/epochs", []byte(`[{"seq":"1"}]`), "not the JSON expected"},
	} {
		base, _, _ := verifyURLServer(t, func(f map[string][]byte) { f["/v1/rooms/"+id+c.file] = c.body })
		out, errs, code := waisteer(t, "", "audit", "-url", base, "-room", id, "-state", filepath.Join(t.TempDir(), "cp"))
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q: %s %s", c.name, code, c.want, out, errs)
		}
	}
	// verify -url given a proof that does not read, or does not prove.
	for _, c := range []struct {
		name string
		body string
		want string
	}{
		{"a proof that is no JSON", "{", "an inclusion proof"},
		{"a proof with a field more", `{"index":0,"size":1,"proof":[],"x":1}`, "unknown field"},
		{"a proof of another size", `{"index":0,"size":2,"proof":[]}`, "asked in 1"},
		{"a proof that does not prove", `{"index":0,"size":1,"proof":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]}`, "is not the decision in the checkpoint's tree"},
	} {
		base, _, m := verifyURLServer(t, func(f map[string][]byte) {
			for k := range f {
				if strings.Contains(k, "/log/inclusion/") {
					f[k] = []byte(c.body)
				}
			}
		})
		out, errs, code := waisteer(t, "", "verify", "-url", base+"/v1/decisions/"+m.Digest.String())
		if code != 1 || !strings.Contains(out, `"reason":"not_in_log"`) || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q: %s %s", c.name, code, c.want, out, errs)
		}
	}
	// Usage.
	for _, c := range [][]string{{"-url", "ftp://x", "-room", id}, {"-url", base, "-room", "xyz"}, {"-url", base + "/v1", "-room", id}} {
		if _, _, code := waisteer(t, "", append([]string{"audit"}, c...)...); code != 2 {
			t.Errorf("audit %v: exit %d, want 2", c, code)
		}
	}
}
