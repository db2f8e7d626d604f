package declog_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
)

// seqRoom is a room id whose bytes are 0x00, 0x01, … 0x1f, so that its
// hex is easy to write by hand.
func seqRoom() sig.Hash {
	var h sig.Hash
	for i := range h {
		h[i] = byte(i)
	}
	return h
}

func seed(label string) [sig.SeedSize]byte { return sha256.Sum256([]byte("seed " + label)) }

func key(label string) sig.PrivateKey { return sig.NewPrivateKey(seed(label)) }

// c2spRoot is the root hash of C2SP tlog-checkpoint's example.
const c2spRoot = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="

func unb64(t testing.TB, s string) tlog.Hash {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		t.Fatalf("%q: %v", s, err)
	}
	return tlog.Hash(b)
}

func sameCheckpoint(a, b declog.Checkpoint) bool {
	if a.Room != b.Room || a.Log != b.Log || a.Server != b.Server || a.Size != b.Size || a.Root != b.Root || (a.Keys == nil) != (b.Keys == nil) {
		return false
	}
	return a.Keys == nil || *a.Keys == *b.Keys
}

func show(c declog.Checkpoint) string {
	if c.Keys == nil {
		return fmt.Sprintf("{%s log %d %q %d %s no keys}", c.Room, c.Log, c.Server, c.Size, c.Root)
	}
	return fmt.Sprintf("{%s log %d %q %d %s keylog %+v}", c.Room, c.Log, c.Server, c.Size, c.Root, *c.Keys)
}

func mustSign(t testing.TB, c declog.Checkpoint, k sig.PrivateKey) []byte {
	t.Helper()
	b, err := declog.Sign(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTrips are checkpoints at the edges of what the text holds: an
// empty tree (whose root is SHA-256 of nothing, RFC 6962 §2.1), the
// largest size, the largest seq, an epoch from 0 and one from the size.
func roundTrips(t testing.TB) []declog.Checkpoint {
	empty := tlog.Hash(sha256.Sum256(nil))
	return []declog.Checkpoint{
		{Room: seqRoom(), Size: 0, Root: empty},
		{Room: seqRoom(), Size: 0, Root: empty, Keys: &declog.Epoch{Seq: 1, From: 0}},
		{Room: seqRoom(), Size: 20852163, Root: unb64(t, c2spRoot)},
		{Room: seqRoom(), Size: 20852163, Root: unb64(t, c2spRoot), Keys: &declog.Epoch{Seq: 7, From: 1000}},
		{Room: sig.Digest([]byte("room b")), Size: 1, Root: tlog.Hash(sha256.Sum256([]byte("x"))), Keys: &declog.Epoch{Seq: 0, From: 1}},
		{Room: sig.Digest([]byte("room c")), Size: math.MaxInt64, Root: tlog.Hash{0xff}, Keys: &declog.Epoch{Seq: math.MaxUint64, From: math.MaxInt64}},
	}
}

// TestSignOpen: what Sign signs, Open reads back, with the key that
// signed it among several, and Peek reads the same without a key.
func TestSignOpen(t *testing.T) {
	steer, other := key("steering"), key("other")
	for _, c := range roundTrips(t) {
		b := mustSign(t, c, steer)
		got, by, err := declog.Open(b, c.Room, []sig.PublicKey{other.Public(), steer.Public()})
		if err != nil || !sameCheckpoint(got, c) || by != steer.Public() {
			t.Errorf("Open(Sign(%s)) = %s by %s, %v", show(c), show(got), by, err)
		}
		peeked, err := declog.Peek(b, c.Room)
		if err != nil || !sameCheckpoint(peeked, c) {
			t.Errorf("Peek(Sign(%s)) = %s, %v", show(c), show(peeked), err)
		}
	}
}

// TestSignRefuses: a size no tree has, or an epoch that starts before the
// log or after the tree, is not signed.
func TestSignRefuses(t *testing.T) {
	for _, c := range []declog.Checkpoint{
		{Room: seqRoom(), Size: -1},
		{Room: seqRoom(), Size: 5, Keys: &declog.Epoch{Seq: 1, From: 6}},
		{Room: seqRoom(), Size: 5, Keys: &declog.Epoch{Seq: 1, From: -1}},
	} {
		if b, err := declog.Sign(c, key("steering")); err == nil {
			t.Errorf("Sign(%s) = %q, want an error", show(c), b)
		}
	}
}

// TestCheckpointBytes: the signed checkpoint is byte for byte the note
// that C2SP tlog-checkpoint and signed-note describe, written here by
// hand: origin, size in decimal, root in standard base64, the extension
// line, a blank line, then "— <name> base64(key ID ‖ Ed25519 signature of
// the text)", the key ID being the first four bytes of SHA-256(name ‖
// 0x0A ‖ 0x01 ‖ public key) (signed-note, "Ed25519 signatures").
func TestCheckpointBytes(t *testing.T) {
	const origin = "waisteer/rooms/000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f/log"
	if got := declog.Origin(seqRoom()); got != origin {
		t.Fatalf("Origin = %q, want %q", got, origin)
	}
	s := seed("steering")
	priv := ed25519.NewKeyFromSeed(s[:])
	pub := priv.Public().(ed25519.PublicKey)
	id := sha256.Sum256(append([]byte(origin+"\n\x01"), pub...))

	for _, tc := range []struct {
		keys *declog.Epoch
		text string
	}{
		{nil, origin + "\n20852163\n" + c2spRoot + "\n"},
		{&declog.Epoch{Seq: 7, From: 1000}, origin + "\n20852163\n" + c2spRoot + "\nkeylog 7 1000\n"},
	} {
		c := declog.Checkpoint{Room: seqRoom(), Size: 20852163, Root: unb64(t, c2spRoot), Keys: tc.keys}
		if got := c.Text(); got != tc.text {
			t.Errorf("Text = %q, want %q", got, tc.text)
		}
		sigLine := base64.StdEncoding.EncodeToString(append(id[:4:4], ed25519.Sign(priv, []byte(tc.text))...))
		want := tc.text + "\n\u2014 " + origin + " " + sigLine + "\n"
		if got := mustSign(t, c, key("steering")); string(got) != want {
			t.Errorf("Sign =\n%s\nwant\n%s", got, want)
		}
	}
}

// TestKeyHash: the key hash is signed-note's key ID, by hand, and by the
// vector of golang.org/x/mod/sumdb/note's documentation (the key
// PeterNeumann+c74f20a3+ARpc…).
func TestKeyHash(t *testing.T) {
	k := key("steering").Public()
	for _, name := range []string{"a", declog.Origin(seqRoom())} {
		h := sha256.Sum256(append([]byte(name+"\n\x01"), k[:]...))
		if got, want := declog.KeyHash(name, k), binary.BigEndian.Uint32(h[:4]); got != want {
			t.Errorf("KeyHash(%q) = %08x, want %08x", name, got, want)
		}
	}
	raw, err := base64.StdEncoding.DecodeString("ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")
	if err != nil || len(raw) != 33 || raw[0] != 1 {
		t.Fatalf("the vector's key: %x, %v", raw, err)
	}
	if got := declog.KeyHash("PeterNeumann", sig.PublicKey(raw[1:])); got != 0xc74f20a3 {
		t.Errorf("KeyHash(PeterNeumann) = %08x, want c74f20a3", got)
	}
}

// TestNoteVerifies: a note reader that knows nothing of this package
// opens a signed checkpoint with the verifier key VerifierKey writes
// (note.NewVerifier checks the key hash in it against the key itself).
func TestNoteVerifies(t *testing.T) {
	steer := key("steering")
	for _, c := range roundTrips(t) {
		vkey := declog.VerifierKey(c.Room, steer.Public())
		v, err := note.NewVerifier(vkey)
		if err != nil {
			t.Fatalf("note.NewVerifier(%q): %v", vkey, err)
		}
		if v.Name() != declog.Origin(c.Room) {
			t.Errorf("the verifier's name %q, want the origin", v.Name())
		}
		n, err := note.Open(mustSign(t, c, steer), note.VerifierList(v))
		if err != nil {
			t.Fatalf("note.Open: %v", err)
		}
		if n.Text != c.Text() || len(n.Sigs) != 1 || n.Sigs[0].Name != declog.Origin(c.Room) || n.Sigs[0].Hash != v.KeyHash() {
			t.Errorf("note.Open = %q %+v", n.Text, n.Sigs)
		}
	}
	// And the other way: a note signed by a note.Signer, from a private
	// key written as the note format writes one, opens.
	c := roundTrips(t)[3]
	s := seed("steering")
	name := declog.Origin(c.Room)
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, declog.KeyHash(name, steer.Public()), base64.StdEncoding.EncodeToString(append([]byte{1}, s[:]...)))
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := note.Sign(&note.Note{Text: c.Text()}, signer)
	if err != nil {
		t.Fatal(err)
	}
	got, by, err := declog.Open(b, c.Room, []sig.PublicKey{steer.Public()})
	if err != nil || !sameCheckpoint(got, c) || by != steer.Public() {
		t.Errorf("Open(a note.Signer's note) = %s by %s, %v", show(got), by, err)
	}
}

// noteSigner signs text under any name with the steering key, for notes
// that Sign would not write.
func noteSigner(t testing.TB, name string, k string) note.Signer {
	t.Helper()
	s := seed(k)
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, declog.KeyHash(name, sig.NewPrivateKey(s).Public()), base64.StdEncoding.EncodeToString(append([]byte{1}, s[:]...)))
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

func noteSign(t testing.TB, text string, signers ...note.Signer) []byte {
	t.Helper()
	b, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenRefuses: a checkpoint is opened only for its own room, by a key
// given, over the very text signed (signed-note: a signature from a known
// key that fails rejects the note; none from a known key, and it is
// rejected).
func TestOpenRefuses(t *testing.T) {
	steer, authority, stranger := key("steering"), key("authority"), key("stranger")
	c := declog.Checkpoint{Room: seqRoom(), Size: 20852163, Root: unb64(t, c2spRoot), Keys: &declog.Epoch{Seq: 7, From: 1000}}
	b := mustSign(t, c, steer)
	text := c.Text()
	other := sig.Digest([]byte("another room"))
	tampered := func(from, to string) []byte {
		if !bytes.Contains(b, []byte(from)) {
			t.Fatalf("%q is not in the checkpoint", from)
		}
		return bytes.Replace(b, []byte(from), []byte(to), 1)
	}
	// A root that is another canonical 32 bytes: its first character
	// changed.
	root2 := "D" + c2spRoot[1:]
	// A signature with one base64 character changed, inside its data.
	badSig := bytes.Clone(b)
	badSig[len(b)-5] ^= 'A' ^ 'B'
	big := append(bytes.Clone(b), strings.Repeat("\u2014 witness.example/w AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", 60)...)

	for _, tc := range []struct {
		name string
		b    []byte
		room sig.Hash
		keys []sig.PublicKey
		want string // in the error
	}{
		{"another room's checkpoint", mustSign(t, declog.Checkpoint{Room: other, Size: 1, Root: c.Root}, steer), seqRoom(), []sig.PublicKey{steer.Public()}, "signed by no key"},
		{"the room's checkpoint read as another's", b, other, []sig.PublicKey{steer.Public()}, "signed by no key"},
		{"an unknown key", mustSign(t, c, stranger), seqRoom(), []sig.PublicKey{steer.Public()}, "signed by no key"},
		{"a key of the room not in the list", mustSign(t, c, authority), seqRoom(), []sig.PublicKey{steer.Public()}, "signed by no key"},
		{"no keys", b, seqRoom(), nil, "signed by no key"},
		{"the size tampered", tampered("\n20852163\n", "\n20852164\n"), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"the root tampered", tampered(c2spRoot, root2), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"the seq tampered", tampered("keylog 7 ", "keylog 8 "), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"the epoch tampered", tampered(" 1000\n", " 999\n"), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"the extension line dropped", tampered("keylog 7 1000\n", ""), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"an extension line added", tampered("keylog 7 1000\n", "keylog 7 1000\nkeylog 8 1000\n"), seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"the signature tampered", badSig, seqRoom(), []sig.PublicKey{steer.Public()}, "signature"},
		{"no signature", []byte(text), seqRoom(), []sig.PublicKey{steer.Public()}, "not a signed note"},
		{"not a note", []byte("hello"), seqRoom(), []sig.PublicKey{steer.Public()}, "not a signed note"},
		{"over MaxCheckpointBytes", big, seqRoom(), []sig.PublicKey{steer.Public()}, "more than 4096"},
		// Signed by a room's key under its origin, but stating another
		// room's origin, or a text ParseText refuses: the signature is
		// good and the text is still refused.
		{"another origin under the room's name", noteSign(t, strings.Replace(text, seqRoom().String(), other.String(), 1), noteSigner(t, declog.Origin(seqRoom()), "steering")), seqRoom(), []sig.PublicKey{steer.Public()}, "origin"},
		{"a size with a leading zero, signed", noteSign(t, strings.Replace(text, "\n20852163\n", "\n020852163\n", 1), noteSigner(t, declog.Origin(seqRoom()), "steering")), seqRoom(), []sig.PublicKey{steer.Public()}, "size"},
	} {
		got, by, err := declog.Open(tc.b, tc.room, tc.keys)
		if err == nil {
			t.Errorf("%s: Open = %s by %s, want an error", tc.name, show(got), by)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "declog: ") {
			t.Errorf("%s: Open: %v, want an error that says %q", tc.name, err, tc.want)
		}
	}
	if len(big) <= declog.MaxCheckpointBytes {
		t.Fatalf("the big checkpoint is %d bytes", len(big))
	}

	// Unknown signatures are ignored (signed-note): a witness's beside
	// the steering key's does not stop the note opening.
	cosigned := noteSign(t, text, noteSigner(t, declog.Origin(seqRoom()), "steering"), noteSigner(t, "witness.example/w", "stranger"))
	if got, by, err := declog.Open(cosigned, seqRoom(), []sig.PublicKey{steer.Public()}); err != nil || !sameCheckpoint(got, c) || by != steer.Public() {
		t.Errorf("Open(cosigned) = %s by %s, %v", show(got), by, err)
	}
}

// TestParseTextRefuses: the text is read exactly as C2SP tlog-checkpoint
// lays it out and Text writes it, and each refusal says what is wrong.
func TestParseTextRefuses(t *testing.T) {
	origin := declog.Origin(seqRoom())
	line := func(size, root string, ext ...string) string {
		s := origin + "\n" + size + "\n" + root + "\n"
		for _, e := range ext {
			s += e + "\n"
		}
		return s
	}
	raw := make([]byte, 33)
	for _, tc := range []struct {
		name, text, want string
	}{
		// The size: decimal, with no leading zeroes (tlog-checkpoint).
		{"size with a leading zero", line("05", c2spRoot), "size"},
		{"size 00", line("00", c2spRoot), "size"},
		{"negative size", line("-1", c2spRoot), "size"},
		{"size -0", line("-0", c2spRoot), "size"},
		{"size with a plus", line("+5", c2spRoot), "size"},
		{"hexadecimal size", line("0x10", c2spRoot), "size"},
		{"size with a letter", line("12a", c2spRoot), "size"},
		{"size with a space", line(" 5", c2spRoot), "size"},
		{"empty size", line("", c2spRoot), "size"},
		{"size past int64", line("9223372036854775808", c2spRoot), "size"},
		{"size with an underscore", line("1_000", c2spRoot), "size"},
		// The root: 32 bytes in standard, padded, canonical base64 (RFC
		// 4648 §4).
		{"root of 31 bytes", line("5", base64.StdEncoding.EncodeToString(raw[:31])), "root"},
		{"root of 33 bytes", line("5", base64.StdEncoding.EncodeToString(raw)), "root"},
		{"root not canonical", line("5", c2spRoot[:42]+"J="), "root"},
		{"root unpadded", line("5", strings.TrimSuffix(c2spRoot, "=")), "root"},
		{"root in URL base64", line("5", base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))), "root"},
		{"root in hex", line("5", strings.Repeat("ab", 32)), "root"},
		{"root with a space", line("5", c2spRoot+" "), "root"},
		// Strict base64 decoding still skips CR and LF (encoding/base64).
		{"root with a CR inside", line("5", c2spRoot[:20]+"\r"+c2spRoot[20:]), "root"},
		{"root ending in CR", line("5", c2spRoot+"\r"), "root"},
		{"empty root", line("5", ""), "root"},
		// The keylog extension line.
		{"keylog with no from", line("5", c2spRoot, "keylog 1"), "line"},
		{"keylog alone", line("5", c2spRoot, "keylog"), "line"},
		{"keylog with an extra field", line("5", c2spRoot, "keylog 1 2 3"), "line"},
		{"keylog with two spaces", line("5", c2spRoot, "keylog  1 2"), "line"},
		{"keylog with a trailing space", line("5", c2spRoot, "keylog 1 2 "), "line"},
		{"keylog with a leading space", line("5", c2spRoot, " keylog 1 2"), "line"},
		{"keylog with a tab", line("5", c2spRoot, "keylog\t1 2"), "line"},
		{"keylog from past the size", line("5", c2spRoot, "keylog 1 6"), "line"},
		{"keylog seq with a leading zero", line("5", c2spRoot, "keylog 01 2"), "line"},
		{"keylog from with a leading zero", line("5", c2spRoot, "keylog 1 02"), "line"},
		{"keylog negative seq", line("5", c2spRoot, "keylog -1 2"), "line"},
		{"keylog negative from", line("5", c2spRoot, "keylog 1 -2"), "line"},
		{"keylog seq with a plus", line("5", c2spRoot, "keylog +1 2"), "line"},
		{"keylog seq past u64", line("5", c2spRoot, "keylog 18446744073709551616 2"), "line"},
		{"keylog of another name", line("5", c2spRoot, "keylogs 1 2"), "line"},
		{"keylog capitalized", line("5", c2spRoot, "Keylog 1 2"), "line"},
		{"empty extension line", line("5", c2spRoot, ""), "line"},
		// The lines.
		{"extra lines", line("5", c2spRoot, "keylog 1 2", "keylog 1 2"), "lines after its root"},
		{"an unknown extension after keylog", line("5", c2spRoot, "keylog 1 2", "x"), "lines after its root"},
		{"no final newline", strings.TrimSuffix(line("5", c2spRoot), "\n"), "each on a line"},
		{"no final newline after keylog", strings.TrimSuffix(line("5", c2spRoot, "keylog 1 2"), "\n"), "line"},
		{"no root", origin + "\n5\n", "each on a line"},
		{"empty", "", "each on a line"},
		{"CRLF", strings.ReplaceAll(line("5", c2spRoot), "\n", "\r\n"), "origin"},
		{"another room", strings.Replace(line("5", c2spRoot), seqRoom().String(), sig.Digest([]byte("b")).String(), 1), "origin"},
		{"origin in capitals", strings.Replace(line("5", c2spRoot), "1a1b1c1d1e1f", "1A1B1C1D1E1F", 1), "origin"},
		{"origin with a trailing slash", strings.Replace(line("5", c2spRoot), "/log\n", "/log/\n", 1), "origin"},
		{"over MaxCheckpointBytes", line("5", c2spRoot, strings.Repeat("x", declog.MaxCheckpointBytes)), "…"},
	} {
		c, err := declog.ParseText(tc.text, seqRoom())
		if err == nil {
			t.Errorf("%s: ParseText(%q) = %s, want an error", tc.name, tc.text, show(c))
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "declog: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: ParseText: %v, want an error that says %q", tc.name, err, tc.want)
		}
		// Outside text is quoted clipped, so that an error stays a line.
		if len(msg) > 300 || strings.Contains(msg, "\n") {
			t.Errorf("%s: ParseText's error is %d bytes: %q", tc.name, len(msg), msg)
		}
	}
	// The accepted neighbours of the refusals: keylog from equal to the
	// size, seq 0, size 0 with from 0.
	for _, text := range []string{line("5", c2spRoot, "keylog 1 5"), line("5", c2spRoot, "keylog 0 0"), line("0", c2spRoot, "keylog 18446744073709551615 0")} {
		if _, err := declog.ParseText(text, seqRoom()); err != nil {
			t.Errorf("ParseText(%q): %v", text, err)
		}
	}
}

// TestPeek: Peek reads what Open reads, before the keys are known, and
// refuses what has no signature lines or is too big; it does not check
// the signature (Open does).
func TestPeek(t *testing.T) {
	c := declog.Checkpoint{Room: seqRoom(), Size: 20852163, Root: unb64(t, c2spRoot), Keys: &declog.Epoch{Seq: 7, From: 1000}}
	b := mustSign(t, c, key("stranger"))
	if got, err := declog.Peek(b, c.Room); err != nil || !sameCheckpoint(got, c) {
		t.Errorf("Peek(a stranger's checkpoint) = %s, %v", show(got), err)
	}
	if _, _, err := declog.Open(b, c.Room, []sig.PublicKey{key("steering").Public()}); err == nil {
		t.Errorf("Open(a stranger's checkpoint) succeeded")
	}
	for _, tc := range []struct {
		name string
		b    []byte
		room sig.Hash
		want string
	}{
		{"another room", b, sig.Digest([]byte("b")), "origin"},
		{"no signatures", []byte(c.Text()), c.Room, "no signatures"},
		{"a text ParseText refuses", []byte(strings.Replace(string(b), "keylog 7 1000", "keylog 7 1000 ", 1)), c.Room, "line"},
		{"over MaxCheckpointBytes", append(bytes.Clone(b), make([]byte, declog.MaxCheckpointBytes)...), c.Room, "more than 4096"},
	} {
		if got, err := declog.Peek(tc.b, tc.room); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Peek = %s, %v, want an error that says %q", tc.name, show(got), err, tc.want)
		}
	}
}
