package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
)

// roomKeygen runs `waisteer keygen` into dir/name and returns the file and
// the public key it printed, checked against the file.
func roomKeygen(t *testing.T, dir, name string) (string, sig.PublicKey) {
	t.Helper()
	path := filepath.Join(dir, name)
	out, errs, code := waisteer(t, "", "keygen", "-o", path)
	if code != 0 {
		t.Fatalf("keygen exited %d: %s", code, errs)
	}
	pub, err := sig.ParsePublicKey(out)
	if err != nil {
		t.Fatalf("keygen printed %q: %v", out, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := sig.ParsePrivateKey(b)
	if err != nil || k.Public() != pub {
		t.Fatalf("key file %q does not hold the printed key %s (%v)", b, pub, err)
	}
	return path, pub
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// keygen writes a private key file of mode 0600, refuses to overwrite one
// unless -f, and with -f replaces it with a fresh key, still 0600.
func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	path, pub := roomKeygen(t, dir, "a.key")
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode %o, not 0600", m)
	}
	before, _ := os.ReadFile(path)
	_, errs, code := waisteer(t, "", "keygen", "-o", path)
	if code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("overwrite without -f: exit %d, %q", code, errs)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the refused keygen changed the file")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := waisteer(t, "", "keygen", "-f", "-o", path)
	if code != 0 {
		t.Fatalf("keygen -f exited %d: %s", code, errs)
	}
	if strings.TrimSpace(out) == pub.String() {
		t.Error("keygen -f printed the old key")
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode after -f %o, not 0600", m)
	}
	if _, _, code := waisteer(t, "", "keygen"); code != 2 {
		t.Errorf("keygen with no -o exited %d, not 2", code)
	}
}

// room init writes a descriptor (COMPANION §4) that room show reads back
// field for field, with the room id room init printed.
func TestRoomInitShow(t *testing.T) {
	dir := t.TempDir()
	authFile, auth := roomKeygen(t, dir, "authority.key")
	_, origin := roomKeygen(t, dir, "origin.key")
	for _, tc := range []struct {
		file, origin, wantOrigin string
	}{
		{"with.cbor", origin.String(), origin.String()},
		{"without.cbor", "", "none"},
	} {
		path := filepath.Join(dir, tc.file)
		args := []string{"room", "init", "-key", authFile, "-name", "Main stage", "-o", path}
		if tc.origin != "" {
			args = append(args, "-origin", tc.origin)
		}
		id, errs, code := waisteer(t, "", args...)
		if code != 0 {
			t.Fatalf("room init exited %d: %s", code, errs)
		}
		b, _ := os.ReadFile(path)
		d, err := room.ParseDescriptor(b)
		if err != nil || strings.TrimSpace(id) != d.ID().String() {
			t.Fatalf("room init printed %q for %x (%v)", id, b, err)
		}
		out, errs, code := waisteer(t, "", "room", "show", path)
		want := "version    1\nauthority  " + auth.String() + "\norigin     " + tc.wantOrigin +
			"\nname       \"Main stage\"\nroom id    " + d.ID().String() + "\n"
		if code != 0 || out != want {
			t.Errorf("room show exited %d (%s):\n%s\nwant\n%s", code, errs, out, want)
		}
		if _, errs, code := waisteer(t, "", args...); code != 1 || !strings.Contains(errs, "exists") {
			t.Errorf("room init over an existing file: exit %d, %q", code, errs)
		}
	}

	// COMPANION §4.1 steps 1 and 2 in room show: the code, and exit 1.
	good, _ := os.ReadFile(filepath.Join(dir, "with.cbor"))
	bad := filepath.Join(dir, "bad.cbor")
	for _, tc := range []struct {
		b    []byte
		code string
	}{
		{append(bytes.Clone(good), 0), "room_invalid"},
		{good[:len(good)-1], "room_invalid"},
		{append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1), "bad_signature"},
	} {
		if err := os.WriteFile(bad, tc.b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := waisteer(t, "", "room", "show", bad)
		if code != 1 || out != "" || !strings.Contains(errs, tc.code) {
			t.Errorf("room show of a defect: exit %d, stdout %q, stderr %q; want %s", code, out, errs, tc.code)
		}
	}

	// What room init refuses: a name too long, an origin that is no key.
	for _, args := range [][]string{
		{"-name", strings.Repeat("n", 65)},
		{"-name", "r", "-origin", "0100000000000000000000000000000000000000000000000000000000000000"},
		{"-name", "r", "-origin", "abcd"},
	} {
		args = append([]string{"room", "init", "-key", authFile, "-o", filepath.Join(dir, "refused.cbor")}, args...)
		if _, errs, code := waisteer(t, "", args...); code != 1 {
			t.Errorf("%q: exit %d (%s)", args, code, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "refused.cbor")); err == nil {
		t.Error("a refused room init wrote its file")
	}
}

// keylog add, revoke and show (COMPANION §4): each new head is seq + 1 of
// the one it is derived from, the first seq 1; the room step passes and
// refuses as the head says.
func TestKeylog(t *testing.T) {
	dir := t.TempDir()
	authFile, auth := roomKeygen(t, dir, "authority.key")
	originFile, origin := roomKeygen(t, dir, "origin.key")
	otherFile, _ := roomKeygen(t, dir, "other.key")
	_, hop := roomKeygen(t, dir, "hop.key")
	desc := filepath.Join(dir, "room.cbor")
	if _, errs, code := waisteer(t, "", "room", "init", "-key", authFile, "-origin", origin.String(), "-name", "r", "-o", desc); code != 0 {
		t.Fatal(errs)
	}
	head := filepath.Join(dir, "keylog.cbor")
	run := func(want int, args ...string) string {
		t.Helper()
		out, errs, code := waisteer(t, "", args...)
		if code != want {
			t.Fatalf("%q: exit %d, not %d: %s%s", args, code, want, out, errs)
		}
		return out + errs
	}
	readHead := func() *room.KeyLogHead {
		t.Helper()
		b, err := os.ReadFile(head)
		if err != nil {
			t.Fatal(err)
		}
		h, err := room.ParseKeyLogHead(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Verify(); err != nil || h.Origin != origin {
			t.Fatalf("head by %s: %v", h.Origin, err)
		}
		return h
	}

	run(0, "keylog", "add", "-key", originFile, "-entry", auth.String(), "-may-sign", "live/steer,energy/ModelBased", "-o", head)
	if h := readHead(); h.Seq != 1 || len(h.Entries) != 1 || !h.Entries[0].Holds("energy/ModelBased") || !h.Entries[0].Holds(room.LiveSteer) {
		t.Fatalf("first head %+v", h)
	}
	out := run(0, "keylog", "show", head, "-room", desc)
	if !strings.Contains(out, "seq      1\n") || !strings.Contains(out, auth.String()+"  energy/ModelBased,live/steer\n") || !strings.Contains(out, "room step passes") {
		t.Errorf("keylog show:\n%s", out)
	}
	// Starting over a head that exists needs -f.
	run(1, "keylog", "add", "-key", originFile, "-entry", hop.String(), "-may-sign", "live/hop", "-o", head)

	run(0, "keylog", "add", "-key", originFile, "-head", head, "-entry", hop.String(), "-may-sign", "live/hop,energy/Estimator", "-o", head)
	h := readHead()
	if e := h.Entry(hop); h.Seq != 2 || len(h.Entries) != 2 || e == nil || !e.Holds(room.LiveHop) || e.Revoked {
		t.Fatalf("second head %+v", h)
	}
	// Replacing an entry.
	run(0, "keylog", "add", "-key", originFile, "-head", head, "-entry", hop.String(), "-may-sign", "live/hop", "-o", head)
	if h := readHead(); h.Seq != 3 || len(h.Entries) != 2 || h.Entry(hop).Holds("energy/Estimator") {
		t.Fatalf("third head %+v", h)
	}
	run(0, "keylog", "revoke", "-key", originFile, "-head", head, "-entry", hop.String(), "-o", head)
	if h := readHead(); h.Seq != 4 || !h.Entry(hop).Revoked || h.Entry(auth).Revoked {
		t.Fatalf("fourth head %+v", h)
	}
	out = run(0, "keylog", "show", head)
	if !strings.Contains(out, "seq      4\n") || !strings.Contains(out, hop.String()+"  live/hop  revoked\n") || strings.Contains(out, "room step") {
		t.Errorf("keylog show:\n%s", out)
	}

	// What keylog refuses, naming the reason, and leaving the head as it was.
	before, _ := os.ReadFile(head)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"keylog", "add", "-key", otherFile, "-head", head, "-entry", hop.String(), "-may-sign", "live/hop", "-o", head}, "not of the given key"},
		{[]string{"keylog", "add", "-key", originFile, "-head", head, "-entry", hop.String(), "-may-sign", "live/hop", "-o", head}, "revoked"},
		{[]string{"keylog", "add", "-key", originFile, "-head", head, "-entry", origin.String(), "-may-sign", "live/hops", "-o", head}, "not an authority"},
		{[]string{"keylog", "add", "-key", originFile, "-head", head, "-entry", origin.String(), "-may-sign", "live/hop,live/hop", "-o", head}, "twice"},
		{[]string{"keylog", "add", "-key", originFile, "-head", head, "-entry", "00", "-may-sign", "live/hop", "-o", head}, "64 hexadecimal"},
		{[]string{"keylog", "revoke", "-key", originFile, "-head", head, "-entry", hop.String(), "-o", head}, "already"},
		{[]string{"keylog", "revoke", "-key", originFile, "-head", head, "-entry", origin.String(), "-o", head}, "no entry"},
		{[]string{"keylog", "revoke", "-key", otherFile, "-head", head, "-entry", auth.String(), "-o", head}, "not of the given key"},
		{[]string{"keylog", "add", "-key", originFile, "-head", desc, "-entry", hop.String(), "-may-sign", "live/hop", "-o", head}, "key_log_invalid"},
	} {
		if out := run(1, tc.args...); !strings.Contains(out, tc.says) {
			t.Errorf("%q: %q does not say %q", tc.args, out, tc.says)
		}
	}
	if after, _ := os.ReadFile(head); !bytes.Equal(before, after) {
		t.Error("a refused keylog command changed the head")
	}
	run(2, "keylog", "revoke", "-key", originFile, "-entry", hop.String(), "-o", head)

	// COMPANION §4.1 step 6 through keylog show -room: the authority revoked.
	run(0, "keylog", "revoke", "-key", originFile, "-head", head, "-entry", auth.String(), "-o", head)
	if out := run(1, "keylog", "show", head, "-room", desc); !strings.Contains(out, "authority_revoked") || !strings.Contains(out, "seq      5\n") {
		t.Errorf("keylog show -room of a revoked authority:\n%s", out)
	}
	// Step 4: a head of another origin, for this room.
	other := filepath.Join(dir, "other.cbor")
	run(0, "keylog", "add", "-key", otherFile, "-entry", auth.String(), "-may-sign", "live/steer", "-o", other)
	if out := run(1, "keylog", "show", other, "-room", desc); !strings.Contains(out, "key_log_invalid") {
		t.Errorf("keylog show -room of another origin's head:\n%s", out)
	}
	// A head that does not verify under its origin.
	b, _ := os.ReadFile(other)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(1, "keylog", "show", other); !strings.Contains(out, "bad_signature") {
		t.Errorf("keylog show of a bad signature:\n%s", out)
	}
}

// The heads keylog writes are what the room package reads for who may sign
// (COMPANION §4.2).
func TestKeylogGrants(t *testing.T) {
	dir := t.TempDir()
	authFile, auth := roomKeygen(t, dir, "authority.key")
	originFile, origin := roomKeygen(t, dir, "origin.key")
	_, hop := roomKeygen(t, dir, "hop.key")
	desc, head := filepath.Join(dir, "room.cbor"), filepath.Join(dir, "keylog.cbor")
	for _, args := range [][]string{
		{"room", "init", "-key", authFile, "-origin", origin.String(), "-name", "r", "-o", desc},
		{"keylog", "add", "-key", originFile, "-entry", auth.String(), "-may-sign", "live/steer", "-o", head},
		{"keylog", "add", "-key", originFile, "-head", head, "-entry", hop.String(), "-may-sign", "energy/OnChipCounter,live/hop", "-o", head},
	} {
		if _, errs, code := waisteer(t, "", args...); code != 0 {
			t.Fatalf("%q: %s", args, errs)
		}
	}
	d, _ := os.ReadFile(desc)
	h, _ := os.ReadFile(head)
	r, err := room.Open(d, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MaySignRecord(hop, evidence.OnChipCounter); err != nil {
		t.Error(err)
	}
	if err := r.MaySignRecord(hop, evidence.Estimator); err == nil {
		t.Error("a hop signs a class it was not granted")
	}
	if err := r.MaySignPolicy(auth); err != nil {
		t.Error(err)
	}
}
