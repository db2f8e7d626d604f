package bench

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"time"
)

// A small protobuf writer for the tests, apart from the reader: the
// profile below is written field by field from profile.proto's numbers
// (github.com/google/pprof, proto/profile.proto), not by any code the
// bench runs.
type pbw []byte

func (b pbw) varint(v uint64) pbw {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
func (b pbw) num(field, v uint64) pbw { return b.varint(field << 3).varint(v) }
func (b pbw) msg(field uint64, m []byte) pbw {
	return append(b.varint(field<<3|2).varint(uint64(len(m))), m...)
}
func (b pbw) packed(field uint64, vs ...uint64) pbw {
	var m pbw
	for _, v := range vs {
		m = m.varint(v)
	}
	return b.msg(field, m)
}

// The synthetic profile's functions, by their index in its string table.
var testProfileStrings = []string{
	"", "samples", "count", "cpu", "nanoseconds",
	"crypto/ed25519.Sign", // 5
	"github.com/waisteer/waisteer/internal/commit.(*Decisions).Run", // 6
	"go.etcd.io/bbolt.fdatasync",                                    // 7
	"github.com/valyala/fasthttp.(*Server).serveConn",               // 8
	"runtime.mcall",  // 9
	"main.elsewhere", // 10
	"github.com/waisteer/waisteer/report.ParseQuery", // 11
}

// testProfile is a CPU profile of six samples whose CPU is known: 30 ms
// in a signature (its frame inlined into the HTTP engine's), 10 ms in the
// commit's fdatasync, 20 ms elsewhere in the commit, 40 ms in the HTTP
// engine alone, 10 ms in the scheduler, 10 ms nowhere named, and 5 ms
// reading a report inside the engine; 125 ms in all. Sample 2's locations
// are packed, sample 3's written one by one (both are valid protobuf).
func testProfile() []byte {
	var p pbw
	p = p.msg(1, pbw{}.num(1, 1).num(2, 2)) // samples/count
	p = p.msg(1, pbw{}.num(1, 3).num(2, 4)) // cpu/nanoseconds
	ms := uint64(time.Millisecond)
	p = p.msg(2, pbw{}.packed(1, 1).packed(2, 3, 30*ms))
	p = p.msg(2, pbw{}.packed(1, 2, 3).packed(2, 1, 10*ms))
	p = p.msg(2, pbw{}.num(1, 3).num(2, 2).num(2, 20*ms))
	p = p.msg(2, pbw{}.packed(1, 4).packed(2, 4, 40*ms))
	p = p.msg(2, pbw{}.packed(1, 5).packed(2, 1, 10*ms))
	p = p.msg(2, pbw{}.packed(1, 6).packed(2, 1, 10*ms))
	p = p.msg(2, pbw{}.packed(1, 7, 4).packed(2, 1, 5*ms))
	// Location 1: the signature inlined into serveConn (innermost first).
	p = p.msg(4, pbw{}.num(1, 1).num(3, 0x1000).msg(4, pbw{}.num(1, 1).num(2, 10)).msg(4, pbw{}.num(1, 4).num(2, 20)))
	for loc, fn := range []uint64{2: 3, 3: 2, 4: 4, 5: 5, 6: 6, 7: 7} {
		if fn != 0 {
			p = p.msg(4, pbw{}.num(1, uint64(loc)).msg(4, pbw{}.num(1, fn)))
		}
	}
	for id, name := range []uint64{1: 5, 2: 6, 3: 7, 4: 8, 5: 9, 6: 10, 7: 11} {
		if name != 0 {
			p = p.msg(5, pbw{}.num(1, uint64(id)).num(2, name).num(4, 0))
		}
	}
	for _, s := range testProfileStrings {
		p = p.msg(6, []byte(s))
	}
	p = p.num(10, uint64(time.Second)).num(12, 10_000_000)
	return p
}

func gzipped(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestParseProfile reads the synthetic profile, raw and gzipped as
// runtime/pprof writes it: its types, each sample's stack leaf first
// (an inlined frame before its caller) and values.
func TestParseProfile(t *testing.T) {
	for _, raw := range [][]byte{testProfile(), gzipped(t, testProfile())} {
		p, err := parseProfile(raw)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(p.types, " ") != "samples/count cpu/nanoseconds" || p.valueIndex("cpu") != 1 || p.valueIndex("alloc_space") != -1 {
			t.Errorf("types %q", p.types)
		}
		if p.duration != int64(time.Second) || p.period != 10_000_000 || len(p.samples) != 7 {
			t.Fatalf("duration %d, period %d, %d samples", p.duration, p.period, len(p.samples))
		}
		if got := strings.Join(p.samples[0].stack, " < "); got != "crypto/ed25519.Sign < github.com/valyala/fasthttp.(*Server).serveConn" {
			t.Errorf("sample 1's stack: %s", got)
		}
		if got := strings.Join(p.samples[1].stack, " < "); got != "go.etcd.io/bbolt.fdatasync < github.com/waisteer/waisteer/internal/commit.(*Decisions).Run" {
			t.Errorf("sample 2's stack: %s", got)
		}
		if v := p.samples[2].values; len(v) != 2 || v[0] != 2 || v[1] != 20_000_000 {
			t.Errorf("sample 3's values (written unpacked): %v", v)
		}
	}
}

// TestBenchStages charges the synthetic profile to the stages over 1 000
// decisions: µs per decision = the stage's ms (above) / 1 000 decisions
// × 1 000 µs/ms, so the ms figures themselves.
func TestBenchStages(t *testing.T) {
	p, err := parseProfile(testProfile())
	if err != nil {
		t.Fatal(err)
	}
	st := newBenchStages(p, 1000)
	want := map[string]time.Duration{
		"signature": 30, "commit": 30, "HTTP": 40, "report": 5, "scheduler": 10, "other": 10,
	}
	for i, d := range st.by {
		name := "other"
		if i < len(benchStageList) {
			name, _, _ = strings.Cut(benchStageList[i].name, " ")
		}
		if got := st.perDecision(d); got != want[name]*time.Microsecond {
			t.Errorf("%s: %s a decision, want %d µs", name, got, want[name])
		}
	}
	if st.total != 125*time.Millisecond || st.perDecision(st.total) != 125*time.Microsecond {
		t.Errorf("total %s", st.total)
	}
	if st.perDecision(st.fdatasync) != 10*time.Microsecond {
		t.Errorf("fdatasync %s a decision, want 10 µs", st.perDecision(st.fdatasync))
	}
	var out strings.Builder
	st.write(&out, "3 pathways, fasthttp", 200*time.Microsecond, 30)
	if strings.Contains(out.String(), "from /proc") {
		t.Errorf("a turn whose CPU was not read says what /proc counted:\n%s", out.String())
	}
	// The turn's CPU from /proc, 160 ms over 1 000 decisions: 160 µs a
	// decision, of which the samples' 125 ms are 78.125 %, printed 78 %.
	st.cpu = 160 * time.Millisecond
	out.Reset()
	st.write(&out, "3 pathways, fasthttp", 200*time.Microsecond, 30)
	for _, line := range []string{
		"  3 pathways, fasthttp: 1000 decisions, 125.0 µs of CPU samples each",
		"    (the server's CPU over the turn, from /proc: 160.0 µs a decision; the samples hold 78 % of it)",
		"signature (Ed25519 of the decision)               30.0 µs  24.0 %",
		"of which fdatasync, CPU                         10.0 µs   8.0 %",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("no %q in\n%s", line, out.String())
		}
	}
	if (&benchStages{}).perDecision(time.Second) != 0 {
		t.Errorf("no decisions: a cost")
	}
}

// TestParseProfileRefuses: each malformed profile has its reason.
func TestParseProfileRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"truncated", pbw{}.msg(2, pbw{}.packed(1, 1))[:3], "past the message's end"},
		{"a missing location", pbw{}.msg(1, pbw{}.num(1, 0).num(2, 0)).msg(2, pbw{}.packed(1, 9).packed(2, 1)).msg(6, nil), "location 9"},
		{"a missing function", pbw{}.msg(1, pbw{}.num(1, 0).num(2, 0)).msg(2, pbw{}.packed(1, 1).packed(2, 1)).msg(4, pbw{}.num(1, 1).msg(4, pbw{}.num(1, 3))).msg(6, nil), "function 3"},
		{"a string past the table", pbw{}.msg(1, pbw{}.num(1, 5).num(2, 0)).msg(6, nil), "string 5 of a table of 1"},
		{"values for no type", pbw{}.msg(2, pbw{}.packed(2, 1, 2)), "2 values, for 0 types"},
		{"a sample not a message", pbw{}.num(2, 7), "not a message"},
		{"wire type 3", []byte{0x0b}, "wire type 3"},
		{"field 0", []byte{0x00, 0x01}, "numbered 0"},
		{"not gzip", []byte{0x1f, 0x8b, 0x00}, "profile:"},
	} {
		if _, err := parseProfile(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzParseProfile: no input makes the reader panic, and what it reads
// has as many values in each sample as types.
func FuzzParseProfile(f *testing.F) {
	f.Add(testProfile())
	f.Add(gzipped(f, testProfile()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parseProfile(raw)
		if err != nil {
			return
		}
		for _, s := range p.samples {
			if len(s.values) != len(p.types) {
				t.Fatalf("%d values for %d types", len(s.values), len(p.types))
			}
		}
		newBenchStages(p, 1)
	})
}

// TestBenchProfilesTrace: the child's profiles serve the runtime's
// execution trace for the seconds asked (the file format begins "go 1.";
// runtime/trace), the CPU profile (gzipped), a named profile, a 404 for a name that is none, and
// refuse an address that is not loopback.
func TestBenchProfilesTrace(t *testing.T) {
	if _, err := benchProfiles(t.Context(), "0.0.0.0:0"); err == nil {
		t.Error("a profile server on every address was started")
	}
	base, err := benchProfiles(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(base, "http://")
	tr, err := benchGet(t.Context(), addr, "/debug/pprof/trace?seconds=1")
	if err != nil || !bytes.HasPrefix(tr, []byte("go 1.")) {
		t.Fatalf("the trace: %d bytes beginning %q, %v", len(tr), tr[:min(len(tr), 16)], err)
	}
	if cpu, err := benchGet(t.Context(), addr, "/debug/pprof/profile?seconds=1"); err != nil || !bytes.HasPrefix(cpu, []byte{0x1f, 0x8b}) {
		t.Fatalf("the CPU profile (gzipped, RFC 1952's magic): %d bytes, %v", len(cpu), err)
	}
	if g, err := benchGet(t.Context(), addr, "/debug/pprof/goroutine"); err != nil || len(g) == 0 {
		t.Fatalf("the goroutine profile: %d bytes, %v", len(g), err)
	}
	if _, err := benchGet(t.Context(), addr, "/debug/pprof/nothing"); err == nil {
		t.Error("a profile of no name was served")
	}
}
