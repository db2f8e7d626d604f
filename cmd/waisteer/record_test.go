package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/sig"
)

const recordRoom = "5c5a3c2c3d0b1f4b5e6f7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9"

// recordTOML is a description of a record in TOML, its fields one a line so
// that a test can name the line of each.
const recordTOML = `room = "` + recordRoom + `"
start = 2024-03-01T12:00:00Z
end = "2024-03-01T13:01:00.000001+01:00"
class = "OnChipCounter"
joules = "12.5J"
sessions = 3

[[tracks]]
kind = "media"
direction = "in"
bytes = 1048576

[[tracks]]
kind = "other"
direction = "out"
bytes = 4096

[subscriber_us]
2 = 60000000
7 = 1
`

func recHopKey(t *testing.T, dir string) (string, sig.PrivateKey) {
	t.Helper()
	var seed [sig.SeedSize]byte
	seed[0] = 7
	k := sig.NewPrivateKey(seed)
	p := filepath.Join(dir, "hop.key")
	if err := os.WriteFile(p, sig.MarshalPrivateKey(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, k
}

func recWriteFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecordSignTOMLThenShow signs a TOML description and reads the record
// back with the library (COMPANION §5) and with `record show`.
func TestRecordSignTOMLThenShow(t *testing.T) {
	dir := t.TempDir()
	key, k := recHopKey(t, dir)
	in := recWriteFile(t, dir, "r.toml", recordTOML)
	out := filepath.Join(dir, "r.wmh1")
	stdout, stderr, code := waisteer(t, "", "record sign", "-key", key, "-o", out, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r, err := evidence.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	room, _ := sig.ParseHash(recordRoom)
	// The room clock is µs since the Unix epoch (COMPANION §4); an RFC 3339
	// time converts exactly, its offset applied.
	want := &evidence.Record{
		Room:     room,
		Hop:      k.Public(),
		Start:    uint64(time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()),
		End:      uint64(time.Date(2024, 3, 1, 12, 1, 0, 1000, time.UTC).UnixMicro()),
		Class:    evidence.OnChipCounter,
		Joules:   12_500_000,
		Sessions: 3,
		Tracks: []evidence.Track{
			{Kind: evidence.KindMedia, Direction: evidence.DirIn, Bytes: 1048576},
			{Kind: evidence.KindOther, Direction: evidence.DirOut, Bytes: 4096},
		},
		SubscriberUs: [8]uint64{2: 60_000_000, 7: 1},
		Sig:          r.Sig,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("signed %+v\nwant   %+v", r, want)
	}
	if err := r.Check(room); err != nil {
		t.Errorf("Check: %v", err)
	}
	if strings.TrimSpace(stdout) != r.Digest().String() {
		t.Errorf("printed %q, want the digest %s", stdout, r.Digest())
	}

	stdout, stderr, code = waisteer(t, "", "record show", "-room", recordRoom, out)
	if code != 0 {
		t.Fatalf("show exit %d: %s", code, stderr)
	}
	for _, line := range []string{
		"digest         " + r.Digest().String(),
		"hop            " + k.Public().String(),
		"class          4 OnChipCounter",
		"joules         12500000 µJ",
		"sessions       3",
		"tracks         2",
		"other out 4096 bytes",
		"subscriber_us  0 0 60000000 0 0 0 0 1",
		"check          accept in room " + recordRoom,
	} {
		if !strings.Contains(stdout, line) {
			t.Errorf("show does not print %q:\n%s", line, stdout)
		}
	}
}

// TestRecordSignJSONStdinThenShowJSON signs a JSON description read from
// standard input; the record goes to standard output, the digest to
// standard error; `record show -json` gives the fields back.
func TestRecordSignJSONStdinThenShowJSON(t *testing.T) {
	dir := t.TempDir()
	key, k := recHopKey(t, dir)
	desc := `{
  "room": "` + recordRoom + `",
  "hop": "` + k.Public().String() + `",
  "start": 1709294400000000,
  "end": "18446744073709551615",
  "class": 2,
  "joules": "40mJ",
  "sessions": "4294967295",
  "tracks": [{"kind": 1, "direction": "out", "bytes": "18446744073709551615"}],
  "subscriber_us": [1, 2, 3, 4, 5, 6, 7, 8]
}`
	stdout, stderr, code := waisteer(t, desc, "record sign", "-key", key, "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r, err := evidence.ParseRecord([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(stderr) != r.Digest().String() {
		t.Errorf("stderr %q, want the digest", stderr)
	}
	if r.Start != 1709294400000000 || r.End != 1<<64-1 || r.Class != evidence.ModelBased ||
		r.Joules != 40_000 || r.Sessions != 1<<32-1 || len(r.Tracks) != 1 ||
		r.Tracks[0] != (evidence.Track{Kind: 1, Direction: 2, Bytes: 1<<64 - 1}) ||
		r.SubscriberUs != [8]uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Errorf("signed %+v", r)
	}
	file := recWriteFile(t, dir, "r.wmh1", stdout)
	out, stderr, code := waisteer(t, "", "record show", "-json", "-room", recordRoom, file)
	if code != 0 {
		t.Fatalf("show exit %d: %s", code, stderr)
	}
	var j struct {
		Outcome, Digest, Hop, Start, End, Label, Joules string
		Class                                           int
		Sessions                                        uint32
		Tracks                                          []struct{ Kind, Direction, Bytes string }
		SubscriberUs                                    []string `json:"subscriber_us"`
		Check                                           struct{ Outcome string }
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if j.Outcome != "accept" || j.Digest != r.Digest().String() || j.Hop != k.Public().String() ||
		j.End != "18446744073709551615" || j.Class != 2 || j.Label != "ModelBased" || j.Joules != "40000" ||
		j.Sessions != 1<<32-1 || len(j.Tracks) != 1 || j.Tracks[0].Kind != "media" ||
		j.Tracks[0].Bytes != "18446744073709551615" || len(j.SubscriberUs) != 8 || j.SubscriberUs[7] != "8" ||
		j.Check.Outcome != "accept" {
		t.Errorf("show -json: %s", out)
	}
}

// TestRecordShowRefusesCompanion5 prints the refusal code and exits 1 for a
// record that does not read (COMPANION §1), or does not check (§5).
func TestRecordShowRefusesCompanion5(t *testing.T) {
	dir := t.TempDir()
	key, _ := recHopKey(t, dir)
	in := recWriteFile(t, dir, "r.json", `{"room": "`+recordRoom+`", "start": 0, "end": 60000000, "class": "unmetered"}`)
	rec := filepath.Join(dir, "r.wmh1")
	if _, stderr, code := waisteer(t, "", "record sign", "-key", key, "-o", rec, in); code != 0 {
		t.Fatalf("sign exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(rec)
	otherRoom := strings.Repeat("00", 32)
	cases := []struct {
		name string
		data []byte
		args []string
		want string
	}{
		{"truncated", b[:len(b)-1], nil, "refuse truncated"},
		{"malformed", append(bytes.Clone(b), 0), nil, "refuse malformed"},
		{"unknown_version", append([]byte("WMH1\x02"), b[5:]...), nil, "refuse unknown_version"},
		{"wrong_room", b, []string{"-room", otherRoom}, "refuse wrong_room"},
		{"bad_signature", append(bytes.Clone(b[:len(b)-1]), b[len(b)-1]^1), []string{"-room", recordRoom}, "refuse bad_signature"},
		{"json truncated", b[:10], []string{"-json"}, `"outcome":"refuse","reason":"truncated"`},
		{"json wrong_room", b, []string{"-json", "-room", otherRoom}, `"check":{"room":"` + otherRoom + `","outcome":"refuse","reason":"wrong_room"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "x")
			if err := os.WriteFile(f, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, code := waisteer(t, "", append(append([]string{"record show"}, c.args...), f)...)
			if code != 1 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, stdout %s; want %q", code, out, c.want)
			}
		})
	}
	// The unmetered record reads and shows its marker.
	out, _, code := waisteer(t, string(b), "record show", "-")
	if code != 0 || !strings.Contains(out, "class          0 unmetered") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// TestRecordShowSplit reads records written back to back, and refuses a
// tail that is not one.
func TestRecordShowSplit(t *testing.T) {
	dir := t.TempDir()
	key, _ := recHopKey(t, dir)
	var body []byte
	for i, span := range []string{`"start": 0, "end": 60000000`, `"start": 60000000, "end": 120000000`} {
		in := recWriteFile(t, dir, "r.json", `{"room": "`+recordRoom+`", `+span+`, "class": "Estimator", "joules": 5}`)
		out, stderr, code := waisteer(t, "", "record sign", "-key", key, in)
		if code != 0 {
			t.Fatalf("sign %d: exit %d: %s", i, code, stderr)
		}
		body = append(body, out...)
	}
	out, _, code := waisteer(t, string(body), "record show", "-split", "-")
	if code != 0 || strings.Count(out, "digest ") != 2 || !strings.Contains(out, "record 1, 227 bytes") {
		t.Errorf("exit %d: %s", code, out)
	}
	out, _, code = waisteer(t, string(body)+"WMH1\x01", "record show", "-split", "-json", "-")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 3 || !strings.Contains(lines[2], `"reason":"truncated"`) || !strings.Contains(lines[2], `"offset":454`) {
		t.Errorf("exit %d: %s", code, out)
	}
	// Without -split, two records are one record with bytes left over.
	out, _, code = waisteer(t, string(body), "record show", "-")
	if code != 1 || !strings.Contains(out, "refuse malformed") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// TestRecordSignErrorsNameTheField: every mistake in a description names its
// field and, where the file has one, its line.
func TestRecordSignErrorsNameTheField(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(recordTOML, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(recordTOML, old, new, 1)
	}
	toml := replace
	cases := []struct {
		name, file, text, want string
	}{
		{"room not hex", "r.toml", toml(recordRoom, "zz"), `r.toml:1: room: "zz" is not 64 hexadecimal digits`},
		{"local date-time", "r.toml", toml("start = 2024-03-01T12:00:00Z", "start = 2024-03-01T12:00:00"), "r.toml:2: start: a date-time with no offset"},
		{"finer than a µs", "r.toml", toml("start = 2024-03-01T12:00:00Z", "start = 2024-03-01T12:00:00.0000001Z"), "r.toml:2: start: is finer than a microsecond"},
		{"finer than a ns", "r.toml", toml("start = 2024-03-01T12:00:00Z", "start = 2024-03-01T12:00:00.0000000001Z"), "r.toml:2: start: is finer than a microsecond"},
		{"before the epoch", "r.toml", toml("start = 2024-03-01T12:00:00Z", "start = 1969-12-31T23:59:59Z"), "r.toml:2: start: is before the Unix epoch"},
		{"negative", "r.toml", toml("start = 2024-03-01T12:00:00Z", "start = -1"), "r.toml:2: start: -1 is negative"},
		{"not a class", "r.toml", toml(`class = "OnChipCounter"`, `class = "Measured"`), `r.toml:4: class: "Measured" is not ModelBased`},
		{"class 1, energy_invalid", "r.toml", toml(`class = "OnChipCounter"`, `class = 1`), "r.toml:4: energy_invalid: class 1 is not 0, 2, 3, 4 or 5"},
		{"unmetered with joules", "r.toml", toml(`class = "OnChipCounter"`, `class = "unmetered"`), "r.toml:5: energy_invalid: joules 12500000 with class 0"},
		{"no joules", "r.toml", toml(`joules = "12.5J"`, ``), "r.toml: energy_invalid: joules 0 with class 4"},
		{"joules not whole", "r.toml", toml(`"12.5J"`, `"12.5000001J"`), `r.toml:5: joules: "12.5000001J" is not a whole number of µJ`},
		{"joules a float", "r.toml", toml(`"12.5J"`, `12.5`), "r.toml:5: joules: is a float"},
		{"joules a unit", "r.toml", toml(`"12.5J"`, `"12.5kWh"`), `r.toml:5: joules: "12.5kWh" is not an integer of µJ`},
		{"joules past u64", "r.toml", toml(`"12.5J"`, `"18446744073709.551616J"`), "r.toml:5: joules: \"18446744073709.551616J\" is above the largest u64 of µJ"},
		{"sessions past u32", "r.toml", toml("sessions = 3", "sessions = 4294967296"), "r.toml:6: sessions: 4294967296 is above the largest u32"},
		{"kind", "r.toml", toml(`kind = "other"`, `kind = "video"`), `r.toml:14: tracks[1].kind: "video" is not "media" or "other"`},
		{"kind 3, record_invalid", "r.toml", toml(`kind = "other"`, `kind = 3`), "r.toml:14: record_invalid: tracks[1].kind is 3"},
		{"direction missing", "r.toml", toml("direction = \"out\"\n", ""), "r.toml:13: tracks[1].direction: missing"},
		{"track field", "r.toml", toml("bytes = 4096", "bytes = 4096\ncolour = 1"), "r.toml:17: tracks[1].colour: not a field of a track"},
		{"layer class 8", "r.toml", toml("7 = 1", "8 = 1"), "r.toml:20: subscriber_us.8: is not a layer class"},
		{"subscriber_us entries", "r.toml", "subscriber_us = [1, 2]\n" + toml("[subscriber_us]\n2 = 60000000\n7 = 1\n", ""), "r.toml:1: subscriber_us: has 2 entries, not 8"},
		{"unknown field", "r.toml", "colour = 1\n" + recordTOML, "r.toml:1: colour: not a field of a record"},
		// Issue 29: "did you mean", from the fields a record and a track have.
		{"a field misspelt", "r.toml", "jouls = 1\n" + recordTOML, `r.toml:1: jouls: not a field of a record; did you mean "joules"? (room, hop, start, end, class, joules, sessions, tracks, subscriber_us)`},
		{"a track's field misspelt", "r.toml", toml("bytes = 4096", "bytes = 4096\ndirecton = 1"), `r.toml:17: tracks[1].directon: not a field of a track; did you mean "direction"?`},
		{"missing room", "r.toml", toml(`room = "`+recordRoom+`"`, ""), "r.toml: room: missing"},
		{"toml syntax", "r.toml", toml("sessions = 3", "sessions = = 3"), "r.toml:6:"},
		{"toml key twice", "r.toml", toml("sessions = 3", "sessions = 3\nsessions = 4"), "r.toml:7:"},
		// The offset is applied: 12:30+01:00 is before 12:00Z.
		{"end not after start", "r.toml", toml(`end = "2024-03-01T13:01:00.000001+01:00"`, `end = "2024-03-01T12:30:00+01:00"`), "r.toml:3: record_invalid: end 1709292600000000 is not after start 1709294400000000"},
		{"33 tracks", "r.toml", recordTOML + strings.Repeat("[[tracks]]\nkind = 1\ndirection = 1\nbytes = 0\n", 31), "r.toml:8: record_invalid: tracks count 33 is above 32"},
		{"json key twice", "r.json", "{\"room\": \"" + recordRoom + "\",\n\"room\": \"" + recordRoom + "\"}", "r.json:2: room: given twice"},
		{"json syntax", "r.json", "{\n\"room\": }", "r.json:2:"},
		{"json float", "r.json", "{\"room\": \"" + recordRoom + "\", \"start\": 0,\n \"end\": 1e6, \"class\": 2}", "r.json:2: end: 1e6 is not an integer"},
		{"json track kind", "r.json", "{\"room\": \"" + recordRoom + "\", \"start\": 0, \"end\": 1, \"class\": 2, \"joules\": 1,\n\"tracks\": [\n{\"kind\": \"audio\", \"direction\": \"in\", \"bytes\": 1}]}", `r.json:3: tracks[0].kind: "audio" is not "media" or "other"`},
		{"json not an object", "r.json", "[1]", "r.json:1: the description is a JSON object"},
		{"json trailing", "r.json", "{\"room\": \"" + recordRoom + "\"}\n{}", "r.json:2: more after the JSON object"},
		{"hop not the key's", "r.json", "{\"room\": \"" + recordRoom + "\", \"start\": 0, \"end\": 1, \"class\": 2, \"joules\": 1,\n\"hop\": \"" + strings.Repeat("11", 32) + "\"}", "r.json:2: hop: is 1111"},
	}
	dir := t.TempDir()
	key, _ := recHopKey(t, dir)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := recWriteFile(t, t.TempDir(), c.file, c.text)
			out := filepath.Join(t.TempDir(), "out")
			_, stderr, code := waisteer(t, "", "record sign", "-key", key, "-o", out, in)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %q", code, stderr, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a record was written")
			}
		})
	}
}

func TestRecordSignUsage(t *testing.T) {
	dir := t.TempDir()
	key, _ := recHopKey(t, dir)
	in := recWriteFile(t, dir, "r.yaml", "room: x")
	for name, args := range map[string][]string{
		"no key":        {"record sign", recWriteFile(t, dir, "r.toml", recordTOML)},
		"no file":       {"record sign", "-key", key},
		"an extension":  {"record sign", "-key", key, in},
		"show no file":  {"record show"},
		"show bad room": {"record show", "-room", "12", in},
	} {
		if _, stderr, code := waisteer(t, "", args...); code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", name, code, stderr)
		}
	}
}
