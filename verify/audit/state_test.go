package audit

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
)

// The state an auditor keeps between audits (issue 31: one checkpoint per
// log; issue 16's file, one checkpoint, still read).

func checkpointOf(t testing.TB, n int64, server string, size int64) string {
	t.Helper()
	k := sig.NewPrivateKey(sha256.Sum256([]byte("state test")))
	b, err := declog.Sign(declog.Checkpoint{Room: sig.Digest([]byte("room")), Log: n, Server: server, Size: size,
		Root: tlog.Hash(sha256.Sum256([]byte("root"))), Keys: &declog.Epoch{Seq: 1}}, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStateOfIssue16: a file that is one signed checkpoint, as `waisteer
// audit` kept it before issue 31, reads as the state of log 0, open.
func TestStateOfIssue16(t *testing.T) {
	cp := checkpointOf(t, 0, "", 5)
	s, err := ParseState([]byte(cp))
	if err != nil || len(s.Logs) != 1 || s.Logs[0] != (SeenLog{Log: 0, Checkpoint: cp}) {
		t.Fatalf("ParseState(issue 16's file) = %+v, %v", s, err)
	}
}

// TestStateRoundTrip: AppendState's JSON, written out by hand, reads back.
func TestStateRoundTrip(t *testing.T) {
	s := State{Logs: []SeenLog{{Log: 0, Checkpoint: "a\nb\n"}, {Log: 3, Sealed: true, Checkpoint: "c"}}}
	b := AppendState(nil, s)
	if want := `{"logs":[{"log":0,"sealed":false,"checkpoint":"a\nb\n"},{"log":3,"sealed":true,"checkpoint":"c"}]}` + "\n"; string(b) != want {
		t.Fatalf("AppendState = %q, want %q", b, want)
	}
	got, err := ParseState(b)
	if err != nil || len(got.Logs) != 2 || got.Logs[0] != s.Logs[0] || got.Logs[1] != s.Logs[1] {
		t.Fatalf("ParseState(AppendState) = %+v, %v", got, err)
	}
	if got, err := ParseState([]byte(`{"logs":[]}`)); err != nil || len(got.Logs) != 0 {
		t.Errorf("an empty state: %+v, %v", got, err)
	}
}

// TestStateRefuses: what AppendState does not write is refused, with the
// reason.
func TestStateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, b, want string }{
		{"logs out of order", `{"logs":[{"log":3,"sealed":false,"checkpoint":"c"},{"log":1,"sealed":false,"checkpoint":"c"}]}`, "ascending"},
		{"a log twice", `{"logs":[{"log":1,"sealed":false,"checkpoint":"c"},{"log":1,"sealed":false,"checkpoint":"c"}]}`, "ascending"},
		{"a negative log", `{"logs":[{"log":-1,"sealed":false,"checkpoint":"c"}]}`, "ascending"},
		{"an empty checkpoint", `{"logs":[{"log":1,"sealed":false,"checkpoint":""}]}`, "bytes"},
		{"a checkpoint too long", `{"logs":[{"log":1,"sealed":false,"checkpoint":"` + strings.Repeat("x", declog.MaxCheckpointBytes+1) + `"}]}`, "bytes"},
		{"an unknown field", `{"logs":[],"x":1}`, "does not read"},
		{"keys in another order", `{"logs":[{"sealed":false,"log":1,"checkpoint":"c"}]}`, "not the JSON"},
		{"a field left out", `{"logs":[{"log":1,"checkpoint":"c"}]}`, "not the JSON"},
		{"more after", `{"logs":[]} {}`, "more after"},
		{"not JSON", `{logs}`, "does not read"},
		{"one checkpoint too long", strings.Repeat("x", declog.MaxCheckpointBytes+1), "one checkpoint"},
		{"too long", "{" + strings.Repeat(" ", MaxStateBytes), "more than"},
	} {
		s, err := ParseState([]byte(tc.b))
		if err == nil || !strings.HasPrefix(err.Error(), "audit: ") || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 400 {
			t.Errorf("%s: ParseState = %+v, %v, want an error that says %q", tc.name, s, err, tc.want)
		}
	}
}

// FuzzParseState: a state read never panics, is by ascending log, and
// written again reads the same (for JSON: is the bytes read).
func FuzzParseState(f *testing.F) {
	f.Add([]byte(checkpointOf(f, 0, "", 5)))
	f.Add(AppendState(nil, State{Logs: []SeenLog{{Log: 0, Checkpoint: checkpointOf(f, 0, "", 5)}, {Log: 2, Sealed: true, Checkpoint: checkpointOf(f, 2, "h 1", 7)}}}))
	f.Add([]byte(`{"logs":[{"log":1,"sealed":false,"checkpoint":"c"},{"log":1,"sealed":false,"checkpoint":"c"}]}`))
	f.Add([]byte(`{"logs":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseState(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "audit: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("an unclear error: %q", err)
			}
			return
		}
		for i, l := range s.Logs {
			if l.Log < 0 || i > 0 && l.Log <= s.Logs[i-1].Log || len(l.Checkpoint) > declog.MaxCheckpointBytes {
				t.Fatalf("ParseState(%q) = %+v", b, s)
			}
		}
		again := AppendState(nil, s)
		if bytes.HasPrefix(b, []byte("{")) && !bytes.Equal(bytes.TrimSuffix(again, []byte("\n")), bytes.TrimSuffix(b, []byte("\n"))) {
			t.Fatalf("ParseState(%q) written again is %q", b, again)
		}
		if s2, err := ParseState(again); err != nil || len(s2.Logs) != len(s.Logs) {
			t.Fatalf("ParseState(%q) written again does not read: %v", b, err)
		}
	})
}

// FuzzParseLogs: the list of a room's logs (issue 31's /logs) read never
// panics, and what it takes is by strictly ascending number, of sizes not
// below 0 and servers that read.
func FuzzParseLogs(f *testing.F) {
	f.Add([]byte(`[{"log":0,"server":"","size":4,"sealed":false}]` + "\n"))
	f.Add([]byte(`[{"log":1,"server":"host-a 101","size":30,"sealed":false},{"log":3,"server":"h 1","size":0,"sealed":true}]`))
	f.Add([]byte(`[{"log":2,"server":"h 1","size":1,"sealed":false},{"log":2,"server":"h 1","size":1,"sealed":false}]`))
	f.Add([]byte(`[{"log":1,"server":"h","size":1,"sealed":false}]`))
	f.Add([]byte(`[] []`))
	f.Add([]byte(`[{"log":1,"x":1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		logs, err := parseLogs(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || len(err.Error()) > 600 {
				t.Fatalf("an unclear error: %q", err)
			}
			return
		}
		for i, l := range logs {
			if l.Log < 0 || i > 0 && l.Log <= logs[i-1].Log || l.Size < 0 {
				t.Fatalf("parseLogs(%q) = %+v", b, logs)
			}
			if _, _, err := declog.ParseServer(l.Server); l.Log > 0 && err != nil {
				t.Fatalf("parseLogs(%q) = %+v: log %d's server: %v", b, logs, l.Log, err)
			}
		}
	})
}
