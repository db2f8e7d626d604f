package declog_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
)

// A room's several logs (issue 31, SPEC-NOTES "One log per server and
// room"): log 0 keeps issue 16's origin; a log n of 1 or more has the
// origin "<room's>/log/<n>" and names its server after the keylog line.

// TestLogCheckpointText: the text of a checkpoint of log 3, written out by
// hand from the design: the origin with "/3", then C2SP tlog-checkpoint's
// size and root, then "keylog", then "server 3 <host> <pid>".
func TestLogCheckpointText(t *testing.T) {
	c := declog.Checkpoint{Room: seqRoom(), Log: 3, Server: "edge-1.example 4242", Size: 20852163, Root: unb64(t, c2spRoot), Keys: &declog.Epoch{Seq: 7, From: 1000}}
	want := "waisteer/rooms/000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f/log/3\n" +
		"20852163\n" + c2spRoot + "\nkeylog 7 1000\nserver 3 edge-1.example 4242\n"
	if got := c.Text(); got != want {
		t.Fatalf("Text() = %q, want %q", got, want)
	}
	if got, err := declog.ParseLogText(want, seqRoom(), 3); err != nil || !sameCheckpoint(got, c) {
		t.Fatalf("ParseLogText = %s, %v", show(got), err)
	}
	// A room with no origin has no keylog line: the server line follows
	// the root.
	c.Keys = nil
	want = strings.Replace(want, "keylog 7 1000\n", "", 1)
	if got, err := declog.ParseLogText(want, seqRoom(), 3); err != nil || !sameCheckpoint(got, c) || c.Text() != want {
		t.Fatalf("ParseLogText(no keylog) = %s, %v", show(got), err)
	}
	// Log 0 is issue 16's text, byte for byte: no number, no server line.
	c0 := declog.Checkpoint{Room: seqRoom(), Size: 5, Root: unb64(t, c2spRoot), Keys: &declog.Epoch{Seq: 1, From: 0}}
	if got := c0.Text(); got != "waisteer/rooms/000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f/log\n5\n"+c2spRoot+"\nkeylog 1 0\n" {
		t.Fatalf("log 0's text %q is not issue 16's", got)
	}
}

// TestLogCheckpointBinding (issue 31: "a checkpoint of log n does not
// verify as log m's"): a checkpoint signed for log 2 opens as log 2's
// only, and a note of log 2's text signed under log 3's name (the same
// key) does not open as either.
func TestLogCheckpointBinding(t *testing.T) {
	steer := key("steering")
	pub := []sig.PublicKey{steer.Public()}
	c := declog.Checkpoint{Room: seqRoom(), Log: 2, Server: "h 1", Size: 1, Root: tlog.Hash(sha256.Sum256([]byte("x"))), Keys: &declog.Epoch{Seq: 1, From: 0}}
	b := mustSign(t, c, steer)
	if got, by, err := declog.OpenLog(b, seqRoom(), 2, pub); err != nil || by != steer.Public() || !sameCheckpoint(got, c) {
		t.Fatalf("OpenLog(log 2's, 2) = %s, %v", show(got), err)
	}
	for _, n := range []int64{0, 1, 3, 20} {
		if got, _, err := declog.OpenLog(b, seqRoom(), n, pub); err == nil {
			t.Errorf("log 2's checkpoint opens as log %d's: %s", n, show(got))
		}
		if got, err := declog.PeekLog(b, seqRoom(), n); err == nil {
			t.Errorf("log 2's checkpoint peeks as log %d's: %s", n, show(got))
		}
	}
	if _, _, err := declog.Open(b, seqRoom(), pub); err == nil {
		t.Error("log 2's checkpoint opens as issue 16's log")
	}
	// The text of log 2 signed under the name of log 3: its signature is
	// by a key that log 2's verifier does not name.
	other := declog.LogVerifierKey(seqRoom(), 3, steer.Public())
	v, err := note.NewVerifier(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(b, note.VerifierList(v)); err == nil {
		t.Error("log 2's checkpoint opens with log 3's verifier key")
	}
	if v2, _ := note.NewVerifier(declog.LogVerifierKey(seqRoom(), 2, steer.Public())); v2 == nil {
		t.Fatal("log 2's verifier key does not read")
	} else if _, err := note.Open(b, note.VerifierList(v2)); err != nil {
		t.Errorf("log 2's checkpoint does not open with its verifier key, by golang.org/x/mod/sumdb/note: %v", err)
	}
}

// TestParseLogTextRefuses: each way a server line can be wrong.
func TestParseLogTextRefuses(t *testing.T) {
	origin3 := declog.LogOrigin(seqRoom(), 3)
	line := func(origin string, ext ...string) string {
		s := origin + "\n5\n" + c2spRoot + "\n"
		for _, e := range ext {
			s += e + "\n"
		}
		return s
	}
	for _, tc := range []struct {
		name string
		text string
		n    int64
		want string
	}{
		{"no server line", line(origin3, "keylog 1 2"), 3, "no line"},
		{"no lines after the root", line(origin3), 3, "no line"},
		{"another log's number", line(origin3, "keylog 1 2", "server 4 h 1"), 3, "server 3"},
		{"a number with a leading zero", line(origin3, "keylog 1 2", "server 03 h 1"), 3, "server 3"},
		{"server before keylog", line(origin3, "server 3 h 1", "keylog 1 2"), 3, "lines after its root"},
		{"two server lines", line(origin3, "keylog 1 2", "server 3 h 1", "server 3 h 1"), 3, "lines after its root"},
		{"no pid", line(origin3, "keylog 1 2", "server 3 h"), 3, "server"},
		{"no host", line(origin3, "keylog 1 2", "server 3  1"), 3, "server"},
		{"a pid with a sign", line(origin3, "keylog 1 2", "server 3 h +1"), 3, "pid"},
		{"a pid with a leading zero", line(origin3, "keylog 1 2", "server 3 h 01"), 3, "pid"},
		{"a host with a tab", line(origin3, "keylog 1 2", "server 3 h\tx 1"), 3, "host"},
		{"a host with a space", line(origin3, "keylog 1 2", "server 3 h x 1"), 3, "pid"},
		{"a host not ASCII", line(origin3, "keylog 1 2", "server 3 hé 1"), 3, "host"},
		{"a host too long", line(origin3, "keylog 1 2", "server 3 "+strings.Repeat("h", declog.MaxHostBytes+1)+" 1"), 3, "server"},
		{"a trailing space", line(origin3, "keylog 1 2", "server 3 h 1 "), 3, "pid"},
		{"a server line in log 0", line(declog.Origin(seqRoom()), "keylog 1 2", "server 0 h 1"), 0, "lines after its root"},
		{"log 3's origin read as log 0's", line(origin3, "keylog 1 2", "server 3 h 1"), 0, "origin"},
		{"log 0's origin read as log 3's", line(declog.Origin(seqRoom()), "keylog 1 2", "server 3 h 1"), 3, "origin"},
		{"origin /log/03", line(declog.Origin(seqRoom())+"/03", "server 3 h 1"), 3, "origin"},
		{"origin /log/0", line(declog.Origin(seqRoom()) + "/0"), 0, "origin"},
		{"a negative log", line(origin3), -3, "negative"},
	} {
		c, err := declog.ParseLogText(tc.text, seqRoom(), tc.n)
		if err == nil {
			t.Errorf("%s: ParseLogText(%q, %d) = %s, want an error", tc.name, tc.text, tc.n, show(c))
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "declog: ") || !strings.Contains(msg, tc.want) || len(msg) > 300 || strings.Contains(msg, "\n") {
			t.Errorf("%s: ParseLogText: %v, want a one-line error that says %q", tc.name, err, tc.want)
		}
	}
	// Sign refuses what ParseLogText would: a log 0 with a server, a log
	// of 1 or more without one.
	for _, c := range []declog.Checkpoint{
		{Room: seqRoom(), Log: 0, Server: "h 1"},
		{Room: seqRoom(), Log: 1, Server: ""},
		{Room: seqRoom(), Log: 1, Server: "h  1"},
		{Room: seqRoom(), Log: -1},
	} {
		if _, err := declog.Sign(c, key("steering")); err == nil {
			t.Errorf("Sign(%s) succeeded", show(c))
		}
	}
}

// TestParseLogNumber: a log's number in a URL, read strictly (issue 31's
// routes): decimal, no sign, no leading zero, at most 18 digits.
func TestParseLogNumber(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1": 1, "10": 10, "999999999999999999": 999_999_999_999_999_999} {
		if n, err := declog.ParseLogNumber(s); err != nil || n != want {
			t.Errorf("ParseLogNumber(%q) = %d, %v, want %d", s, n, err, want)
		}
	}
	for _, s := range []string{"", "00", "01", "+1", "-1", " 1", "1 ", "1x", "0x1", "1e3", "١", "1000000000000000000", "9223372036854775807", "99999999999999999999999"} {
		if n, err := declog.ParseLogNumber(s); err == nil {
			t.Errorf("ParseLogNumber(%q) = %d, want an error", s, n)
		} else {
			clearError(t, err)
		}
	}
}

// TestInclusionNamesItsLog: a proof in log 0 is issue 16's JSON (no "log"
// member); one in log 2 names it first.
func TestInclusionNamesItsLog(t *testing.T) {
	b0, _ := json.Marshal(declog.Inclusion{Index: 0, Size: 1, Proof: []tlog.Hash{}})
	b2, _ := json.Marshal(declog.Inclusion{Log: 2, Index: 0, Size: 1, Proof: []tlog.Hash{}})
	if string(b0) != `{"index":0,"size":1,"proof":[]}` || string(b2) != `{"log":2,"index":0,"size":1,"proof":[]}` {
		t.Fatalf("%s, %s", b0, b2)
	}
	if p, err := declog.ParseInclusion(b2); err != nil || p.Log != 2 {
		t.Errorf("ParseInclusion(%s) = %+v, %v", b2, p, err)
	}
	for _, s := range []string{`{"log":0,"index":0,"size":1,"proof":[]}`, `{"log":-1,"index":0,"size":1,"proof":[]}`, `{"index":0,"size":1,"proof":[],"log":2}`} {
		if p, err := declog.ParseInclusion([]byte(s)); err == nil {
			t.Errorf("ParseInclusion(%s) = %+v, want an error", s, p)
		}
	}
}

// FuzzParseLogText: a text of log n read is Text's, of log n, and names a
// server exactly when n is not 0.
func FuzzParseLogText(f *testing.F) {
	for _, c := range roundTrips(f) {
		f.Add(c.Text(), int64(0))
		c.Log, c.Server = 3, "host.example 77"
		f.Add(c.Text(), int64(3))
	}
	f.Add(declog.LogOrigin(seqRoom(), 3)+"\n5\n"+c2spRoot+"\nserver 3 h 01\n", int64(3))
	f.Add(declog.LogOrigin(seqRoom(), 3)+"\n5\n"+c2spRoot+"\nserver 3 h 1\nkeylog 1 2\n", int64(3))
	f.Fuzz(func(t *testing.T, text string, n int64) {
		c, err := declog.ParseLogText(text, seqRoom(), n)
		if err != nil {
			clearError(t, err)
			return
		}
		if got := c.Text(); got != text {
			t.Fatalf("ParseLogText(%q) = %s, whose text is %q", text, show(c), got)
		}
		if c.Log != n || (n == 0) != (c.Server == "") || c.Keys != nil && (c.Keys.From < 0 || c.Keys.From > c.Size) {
			t.Fatalf("ParseLogText(%q, %d) = %s", text, n, show(c))
		}
		if _, err := declog.Sign(c, key("steering")); err != nil {
			t.Fatalf("ParseLogText(%q) = %s, which Sign refuses: %v", text, show(c), err)
		}
	})
}

// FuzzParseLogNumber: a number read is written back as it was, and is
// never negative.
func FuzzParseLogNumber(f *testing.F) {
	for _, s := range []string{"0", "7", "00", "-1", "+1", "999999999999999999", "1000000000000000000", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := declog.ParseLogNumber(s)
		if err != nil {
			clearError(t, err)
			return
		}
		if n < 0 || declog.LogOrigin(seqRoom(), n) != declog.Origin(seqRoom())+map[bool]string{true: "", false: "/" + s}[n == 0] {
			t.Fatalf("ParseLogNumber(%q) = %d", s, n)
		}
	})
}

// FuzzParseServer: a server read is "<host> <pid>" again, byte for byte.
func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"h 1", "edge-1.example 4242", "h 01", "h", " 1", "h 1 2", "hé 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, pid, err := declog.ParseServer(s)
		if err != nil {
			clearError(t, err)
			return
		}
		if again := host + " " + itoa(pid); again != s || bytes.ContainsAny([]byte(host), " \t\n") {
			t.Fatalf("ParseServer(%q) = %q, %d", s, host, pid)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
