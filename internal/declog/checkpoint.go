// Package declog is a room's log of decisions as it is served and read
// (issue 16): the signed checkpoint, the tiles and the proofs. The tree is
// RFC 6962's, as golang.org/x/mod/sumdb/tlog computes it; the checkpoint
// is a signed note (golang.org/x/mod/sumdb/note, C2SP signed-note) in the
// layout of C2SP tlog-checkpoint; the tiles are C2SP tlog-tiles'. Each
// leaf is a decision's digest and its t (store.LogEntry).
package declog

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/sig"
)

// Origin is the checkpoint's first line, which names the log: the room's
// id after a prefix of the server's own. It is also the name in the
// note's signature line. It is the origin of the room's log 0, issue 16's
// one log (LogOrigin).
func Origin(room sig.Hash) string { return "waisteer/rooms/" + room.String() + "/log" }

// LogOrigin is the origin of log n of the room (issue 31: one log per
// server and room): Origin for log 0, so that every checkpoint of issue
// 16 handed out still verifies, and "<Origin>/<n>" for each later one, so
// that a checkpoint of one log never verifies as another's.
func LogOrigin(room sig.Hash, n int64) string {
	if n == 0 {
		return Origin(room)
	}
	return Origin(room) + "/" + strconv.FormatInt(n, 10)
}

// MaxLogDigits bounds a log's number as it is written: a log number of
// more digits is refused before it is read.
const MaxLogDigits = 18

// ParseLogNumber reads a log's number as a URL path or a checkpoint writes
// it: decimal digits only, no sign, no leading zero (but "0" itself), at
// most MaxLogDigits of them.
func ParseLogNumber(s string) (int64, error) {
	if s == "" || len(s) > MaxLogDigits {
		return 0, fmt.Errorf("declog: %q is not a log's number: 1 to %d decimal digits", clip(s), MaxLogDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("declog: %q is not a log's number: not a decimal digit at byte %d", clip(s), i)
		}
	}
	if s[0] == '0' && len(s) > 1 {
		return 0, fmt.Errorf("declog: %q is not a log's number: a leading zero", clip(s))
	}
	// At most 18 digits: below 10^18, within an int64.
	n, _ := strconv.ParseInt(s, 10, 64)
	return n, nil
}

// MaxHostBytes bounds the host a server line names.
const MaxHostBytes = 253

// ParseServer reads a log's server as the store names it (store.LogInfo)
// and a checkpoint's server line writes it: "<host> <pid>", the host 1 to
// MaxHostBytes printable ASCII bytes and no space, the pid a count in
// decimal.
func ParseServer(s string) (host string, pid int64, err error) {
	host, p, ok := strings.Cut(s, " ")
	if !ok || host == "" || len(host) > MaxHostBytes {
		return "", 0, fmt.Errorf("declog: the server %q is not \"<host> <pid>\"", clip(s))
	}
	for i := 0; i < len(host); i++ {
		if host[i] <= ' ' || host[i] > '~' {
			return "", 0, fmt.Errorf("declog: the server %q: its host is not printable ASCII with no space", clip(s))
		}
	}
	if pid, err = decimal(p); err != nil {
		return "", 0, fmt.Errorf("declog: the server %q: its pid is %v", clip(s), err)
	}
	return host, pid, nil
}

// Epoch is the key log head in force when a checkpoint was signed: its
// seq, and the size of the log when the server installed it. A decision
// at index i is checked against the head whose epoch is the last to start
// at or before i (SPEC-NOTES, "Issue 16").
type Epoch struct {
	Seq  uint64
	From int64
}

// Checkpoint is what a signed checkpoint states.
type Checkpoint struct {
	Room sig.Hash
	// Log is the log's number in the room: 0 for issue 16's one log.
	Log int64
	// Server is the server that appends to a log of number 1 or more,
	// "<host> <pid>" (ParseServer); "" for log 0.
	Server string
	Size   int64
	Root   tlog.Hash
	// Keys is the head in force, nil for a room with no origin, which has
	// no key log (COMPANION §4).
	Keys *Epoch
}

// MaxCheckpointBytes bounds a signed checkpoint a reader takes.
const MaxCheckpointBytes = 4096

// Text is the note's text: the origin, the size in decimal, the root in
// standard base64 (C2SP tlog-checkpoint), then, for a room with a key log,
// the extension line "keylog <seq> <from>", then, for a log of number 1
// or more, the extension line "server <n> <host> <pid>" (issue 31).
func (c Checkpoint) Text() string {
	var b strings.Builder
	b.WriteString(LogOrigin(c.Room, c.Log))
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(c.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(c.Root[:]))
	b.WriteByte('\n')
	if c.Keys != nil {
		fmt.Fprintf(&b, "keylog %d %d\n", c.Keys.Seq, c.Keys.From)
	}
	if c.Log != 0 {
		fmt.Fprintf(&b, "server %d %s\n", c.Log, c.Server)
	}
	return b.String()
}

// Sign signs the checkpoint with key, as an Ed25519 note signature under
// the origin's name.
func Sign(c Checkpoint, key sig.PrivateKey) ([]byte, error) {
	if c.Size < 0 || c.Keys != nil && (c.Keys.From < 0 || c.Keys.From > c.Size) {
		return nil, fmt.Errorf("declog: a checkpoint of size %d and epoch %+v", c.Size, c.Keys)
	}
	if c.Log < 0 || c.Log == 0 && c.Server != "" {
		return nil, fmt.Errorf("declog: a checkpoint of log %d and server %q", c.Log, clip(c.Server))
	}
	if c.Log > 0 {
		if _, _, err := ParseServer(c.Server); err != nil {
			return nil, err
		}
	}
	return note.Sign(&note.Note{Text: c.Text()}, signer{name: LogOrigin(c.Room, c.Log), key: key})
}

// algEd25519 is the note format's algorithm byte of an Ed25519 key.
const algEd25519 = 1

// KeyHash is the note key hash of key under name: the first four bytes of
// SHA-256 over the name, a newline, the algorithm byte and the key.
func KeyHash(name string, key sig.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{algEd25519})
	h.Write(key[:])
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// VerifierKey is key as the note format writes a verifier key,
// "<name>+<hash>+<base64 of the algorithm byte and the key>", for tools
// that read notes (note.NewVerifier).
func VerifierKey(room sig.Hash, key sig.PublicKey) string {
	return LogVerifierKey(room, 0, key)
}

// LogVerifierKey is VerifierKey for log n of the room, whose name is its
// origin.
func LogVerifierKey(room sig.Hash, n int64, key sig.PublicKey) string {
	name := LogOrigin(room, n)
	return fmt.Sprintf("%s+%08x+%s", name, KeyHash(name, key), base64.StdEncoding.EncodeToString(append([]byte{algEd25519}, key[:]...)))
}

type signer struct {
	name string
	key  sig.PrivateKey
}

func (s signer) Name() string    { return s.name }
func (s signer) KeyHash() uint32 { return KeyHash(s.name, s.key.Public()) }
func (s signer) Sign(msg []byte) ([]byte, error) {
	sg := s.key.SignRaw(msg)
	return sg[:], nil
}

// verifier checks a note signature strictly (COMPANION §2), as every
// signature of the extension is checked.
type verifier struct {
	name string
	key  sig.PublicKey
}

func (v verifier) Name() string    { return v.name }
func (v verifier) KeyHash() uint32 { return KeyHash(v.name, v.key) }
func (v verifier) Verify(msg, s []byte) bool {
	return len(s) == sig.SignatureSize && sig.VerifyRaw(v.key, msg, sig.Signature(s)) == nil
}

type verifiers []verifier

func (vs verifiers) Verifier(name string, hash uint32) (note.Verifier, error) {
	for _, v := range vs {
		if v.name == name && v.KeyHash() == hash {
			return v, nil
		}
	}
	return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
}

// Open reads a signed checkpoint of room's log 0 and checks that one of
// keys signed it. It returns what it states and the key that signed it. A
// checkpoint that is not exactly the layout Text writes is refused.
func Open(b []byte, room sig.Hash, keys []sig.PublicKey) (Checkpoint, sig.PublicKey, error) {
	return OpenLog(b, room, 0, keys)
}

// OpenLog is Open for log n of the room: a checkpoint of another log, or
// of another room, does not open.
func OpenLog(b []byte, room sig.Hash, log int64, keys []sig.PublicKey) (Checkpoint, sig.PublicKey, error) {
	if len(b) > MaxCheckpointBytes {
		return Checkpoint{}, sig.PublicKey{}, fmt.Errorf("declog: a checkpoint of %d bytes, more than %d", len(b), MaxCheckpointBytes)
	}
	name := LogOrigin(room, log)
	vs := make(verifiers, len(keys))
	for i, k := range keys {
		vs[i] = verifier{name, k}
	}
	n, err := note.Open(b, vs)
	var unverified *note.UnverifiedNoteError
	switch {
	case errors.As(err, &unverified):
		return Checkpoint{}, sig.PublicKey{}, fmt.Errorf("declog: the checkpoint is signed by no key that may sign for room %s, log %d", room, log)
	case err != nil:
		return Checkpoint{}, sig.PublicKey{}, fmt.Errorf("declog: the checkpoint is not a signed note: %v", err)
	}
	c, err := ParseLogText(n.Text, room, log)
	if err != nil {
		return Checkpoint{}, sig.PublicKey{}, err
	}
	var by sig.PublicKey
	for _, s := range n.Sigs {
		for _, v := range vs {
			if s.Name == v.name && s.Hash == v.KeyHash() {
				by = v.key
			}
		}
	}
	return c, by, nil
}

// Peek reads what a signed checkpoint of the room's log 0 states without
// checking its signature, so that a reader learns which head it names
// before it knows the keys (Open checks it then).
func Peek(b []byte, room sig.Hash) (Checkpoint, error) { return PeekLog(b, room, 0) }

// PeekLog is Peek for log n of the room.
func PeekLog(b []byte, room sig.Hash, log int64) (Checkpoint, error) {
	if len(b) > MaxCheckpointBytes {
		return Checkpoint{}, fmt.Errorf("declog: a checkpoint of %d bytes, more than %d", len(b), MaxCheckpointBytes)
	}
	text, _, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		return Checkpoint{}, errors.New("declog: the checkpoint has no signatures after its text")
	}
	return ParseLogText(string(text)+"\n", room, log)
}

// ParseText reads a checkpoint's text of the room's log 0, exactly as Text
// writes it.
func ParseText(text string, room sig.Hash) (Checkpoint, error) { return ParseLogText(text, room, 0) }

// ParseLogText reads a checkpoint's text of log n of the room, exactly as
// Text writes it.
func ParseLogText(text string, room sig.Hash, log int64) (Checkpoint, error) {
	if log < 0 {
		return Checkpoint{}, fmt.Errorf("declog: no log %d: a log's number is not negative", log)
	}
	lines := strings.Split(text, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		return Checkpoint{}, errors.New("declog: a checkpoint's text is an origin, a size and a root, each on a line")
	}
	lines = lines[:len(lines)-1]
	if lines[0] != LogOrigin(room, log) {
		return Checkpoint{}, fmt.Errorf("declog: the checkpoint's origin %q is not log %d of room %s", clip(lines[0]), log, room)
	}
	c := Checkpoint{Room: room, Log: log}
	size, err := decimal(lines[1])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("declog: the checkpoint's size %q: %v", clip(lines[1]), err)
	}
	c.Size = size
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return Checkpoint{}, fmt.Errorf("declog: the checkpoint's root %q is not 32 bytes in base64", clip(lines[2]))
	}
	c.Root = tlog.Hash(root)
	ext := lines[3:]
	if len(ext) > 0 && strings.HasPrefix(ext[0], "keylog ") {
		f := strings.Split(ext[0], " ")
		seq, err1 := strconv.ParseUint(f[1], 10, 64)
		var from int64
		var err2 error
		if len(f) == 3 {
			from, err2 = decimal(f[2])
		}
		if len(f) != 3 || err1 != nil || strconv.FormatUint(seq, 10) != f[1] || err2 != nil || from > size {
			return Checkpoint{}, fmt.Errorf("declog: the checkpoint's line %q does not name a head's seq and a size up to %d", clip(ext[0]), size)
		}
		c.Keys = &Epoch{Seq: seq, From: from}
		ext = ext[1:]
	}
	// A log of number 1 or more names its server after the keylog line
	// (issue 31); log 0 names none.
	if log > 0 {
		if len(ext) == 0 {
			return Checkpoint{}, fmt.Errorf("declog: the checkpoint of log %d has no line \"server %d <host> <pid>\"", log, log)
		}
		n, server, _ := strings.Cut(strings.TrimPrefix(ext[0], "server "), " ")
		if !strings.HasPrefix(ext[0], "server ") || n != strconv.FormatInt(log, 10) {
			return Checkpoint{}, fmt.Errorf("declog: the checkpoint's line %q is not \"keylog <seq> <from>\" or \"server %d <host> <pid>\"", clip(ext[0]), log)
		}
		if _, _, err := ParseServer(server); err != nil {
			return Checkpoint{}, err
		}
		c.Server = server
		ext = ext[1:]
	}
	if len(ext) > 0 {
		return Checkpoint{}, fmt.Errorf("declog: the checkpoint has %d lines after its root, not at most a keylog line and, in a log of number 1 or more, a server line: %q", len(lines)-3, clip(ext[0]))
	}
	return c, nil
}

// decimal reads a non-negative int64 in decimal with no leading zero.
func decimal(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, errors.New("not a count in decimal")
	}
	return n, nil
}

// clip shortens outside text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
