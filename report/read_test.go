package report

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// testIDs are a policy's pathway IDs (§3.3's characters).
var testIDs = []string{"alpha", "beta", "gamma.1", "d-e_f", "Z"}

type readCase struct {
	name   string
	target string
	cmcd   []string // CMCD-Request field lines, nil for none
	p      Protocol
	r      Report
}

func runRead(t *testing.T, cases []readCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.cmcd != nil {
				h["Cmcd-Request"] = tc.cmcd
			}
			p, r := Read(tc.target, h, testIDs)
			if p != tc.p || r != tc.r {
				t.Errorf("Read(%q, %q) = %d, %+v; want %d, %+v", tc.target, tc.cmcd, p, r, tc.p, tc.r)
			}
		})
	}
}

// c, T and B build a report's values (§7.1: absent is 0 with its bit clear).
func c(i uint8) Report  { return Report{Present: HasPathway, Pathway: i} }
func T(n uint64) Report { return Report{Present: HasThroughput, Throughput: n} }
func B(n uint64) Report { return Report{Present: HasBuffer, Buffer: n} }
func with(rs ...Report) Report {
	var out Report
	for _, r := range rs {
		out.Present |= r.Present
		out.Pathway |= r.Pathway
		out.Throughput |= r.Throughput
		out.Buffer |= r.Buffer
	}
	return out
}

// TestReadHLS42 is §4.2 with §4.1's query rules.
func TestReadHLS42(t *testing.T) {
	runRead(t, []readCase{
		{"no report", "/steer", nil, HLS, Report{}},
		{"quoted pathway and throughput", `/s?_HLS_pathway="beta"&_HLS_throughput=5000000`, nil, HLS, with(c(1), T(5000000))},
		{"percent-encoded quotes", "/s?_HLS_pathway=%22gamma.1%22", nil, HLS, c(2)},
		{"unquoted pathway is read too", "/s?_HLS_pathway=d-e_f", nil, HLS, c(3)},
		{"pathway not in the policy", `/s?_HLS_pathway="omega"`, nil, HLS, Report{}},
		{"id compared bytewise", `/s?_HLS_pathway="Alpha"`, nil, HLS, Report{}},
		{"id with a space is not an id", `/s?_HLS_pathway="alpha "`, nil, HLS, Report{}},
		{"empty quotes", `/s?_HLS_pathway=""`, nil, HLS, Report{}},
		{"one quote removed at each end only", `/s?_HLS_pathway=""alpha""`, nil, HLS, Report{}},
		{"quote at one end only", `/s?_HLS_pathway="alpha`, nil, HLS, Report{}},
		{"first part wins though it does not read", "/s?_HLS_pathway=omega&_HLS_pathway=alpha", nil, HLS, Report{}},
		{"skipped part is no part: the next is read", "/s?_HLS_pathway=alp%ha&_HLS_pathway=alpha", nil, HLS, c(0)},
		{"+ kept: a+b is not an id", "/s?_HLS_pathway=gamma+1", nil, HLS, Report{}},
		{"throughput quoted is not an integer (COMPANION §6)", `/s?_HLS_throughput="5"`, nil, HLS, Report{}},
		{"throughput 20 digits", "/s?_HLS_throughput=00000000000000000001", nil, HLS, T(1)},
		{"throughput 21 digits", "/s?_HLS_throughput=000000000000000000001", nil, HLS, Report{}},
		{"throughput 2^64-1", "/s?_HLS_throughput=18446744073709551615", nil, HLS, T(1<<64 - 1)},
		{"throughput 2^64", "/s?_HLS_throughput=18446744073709551616", nil, HLS, Report{}},
		{"throughput 0 is present", "/s?_HLS_throughput=0", nil, HLS, T(0)},
		{"throughput negative", "/s?_HLS_throughput=-1", nil, HLS, Report{}},
		{"throughput decimal", "/s?_HLS_throughput=1.5", nil, HLS, Report{}},
		{"throughput empty", "/s?_HLS_throughput=", nil, HLS, Report{}},
		{"throughput + kept", "/s?_HLS_throughput=+5", nil, HLS, Report{}},
		{"throughput percent-encoded digits", "/s?_HLS_throughput=%35%30", nil, HLS, T(50)},
		{"throughput first wins", "/s?_HLS_throughput=7&_HLS_throughput=8", nil, HLS, T(7)},
		{"throughput bad % skipped", "/s?_HLS_throughput=7%&_HLS_throughput=8", nil, HLS, T(8)},
		{"list is not HLS's", "/s?_HLS_pathway=alpha,beta", nil, HLS, Report{}},
		{"one-byte id", "/s?_HLS_pathway=Z", nil, HLS, c(4)},
	})
}

// TestReadDASH43 is §4.3: the list, the position j, quoted or not.
func TestReadDASH43(t *testing.T) {
	runRead(t, []readCase{
		{"quoted list, first id of the policy at j=1", `/s?_DASH_pathway="omega,beta,alpha"&_DASH_throughput=100,200,300`, nil, DASH, with(c(1), T(200))},
		{"unquoted list (the clause's example)", `/s?_DASH_pathway=alpha,beta&_DASH_throughput=100,200`, nil, DASH, with(c(0), T(100))},
		{"percent-encoded quotes and commas", `/s?_DASH_pathway=%22x%2Cgamma.1%22&_DASH_throughput=1%2C2`, nil, DASH, with(c(2), T(2))},
		{"empty items count for j", `/s?_DASH_pathway=",,beta"&_DASH_throughput=,,42`, nil, DASH, with(c(1), T(42))},
		{"empty throughput item at j", `/s?_DASH_pathway=",beta"&_DASH_throughput=42,`, nil, DASH, c(1)},
		{"throughput item at j missing", `/s?_DASH_pathway=",,beta"&_DASH_throughput=1,2`, nil, DASH, c(1)},
		{"no pathway current: item 0", `/s?_DASH_pathway="x,y"&_DASH_throughput=9,8`, nil, DASH, T(9)},
		{"no pathway part: item 0", `/s?_DASH_throughput=9,8`, nil, DASH, T(9)},
		{"pathway part alone", `/s?_DASH_pathway=d-e_f`, nil, DASH, c(3)},
		{"items are not trimmed", `/s?_DASH_pathway="x, beta"&_DASH_throughput=1,2`, nil, DASH, T(1)},
		{"items are not unquoted", `/s?_DASH_pathway=x,"beta"&_DASH_throughput=1,2`, nil, DASH, T(1)},
		{"quotes only outermost", `/s?_DASH_pathway="alpha","beta"`, nil, DASH, Report{}},
		{"throughput is not unquoted", `/s?_DASH_pathway=alpha&_DASH_throughput="5"`, nil, DASH, c(0)},
		{"throughput list quoted: item 1 is an integer", `/s?_DASH_pathway=x,beta&_DASH_throughput="5,6"`, nil, DASH, c(1)},
		{"throughput item not an integer", `/s?_DASH_pathway=alpha&_DASH_throughput=5.5`, nil, DASH, c(0)},
		{"throughput item 21 digits", `/s?_DASH_throughput=000000000000000000001`, nil, DASH, Report{}},
		{"throughput item 2^64-1", `/s?_DASH_throughput=18446744073709551615,1`, nil, DASH, T(1<<64 - 1)},
		{"first id wins even when a later one also is", `/s?_DASH_pathway=Z,alpha`, nil, DASH, c(4)},
		{"empty part", `/s?_DASH_pathway=`, nil, DASH, Report{}},
		{"first _DASH_pathway wins", `/s?_DASH_pathway=x&_DASH_pathway=alpha`, nil, DASH, Report{}},
		{"skipped _DASH_pathway is no part", `/s?_DASH_pathway=%&_DASH_pathway=alpha`, nil, DASH, c(0)},
		{"a long list decodes past the stack buffer",
			"/s?_DASH_pathway=" + strings.Repeat("x,", 300) + "beta&_DASH_throughput=" + strings.Repeat("1,", 300) + "77",
			nil, DASH, with(c(1), T(77))},
	})
}

// TestPathwayFitsU8 is §7.1: c is a u8, so only the first 256 IDs can be
// it (a policy has at most 32, §3.3).
func TestPathwayFitsU8(t *testing.T) {
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = "p" + strconv.Itoa(i)
	}
	if _, r := Read("/s?_HLS_pathway=p255", nil, ids); r != c(255) {
		t.Errorf("p255: %+v", r)
	}
	if _, r := Read("/s?_HLS_pathway=p256", nil, ids); r != (Report{}) {
		t.Errorf("p256: %+v", r)
	}
	if _, r := Read("/s?_HLS_pathway=alpha", nil, nil); r != (Report{}) {
		t.Errorf("no ids: %+v", r)
	}
}

// TestProtocolCompanion6 is COMPANION §6 "Protocol" and "Both protocols'
// parameters in one request".
func TestProtocolCompanion6(t *testing.T) {
	runRead(t, []readCase{
		{"no report is HLS", "/s?x=1", nil, HLS, Report{}},
		{"HLS parameters", "/s?_HLS_throughput=1", nil, HLS, T(1)},
		{"_DASH_pathway alone makes DASH", "/s?_DASH_pathway=", nil, DASH, Report{}},
		{"_DASH_throughput alone makes DASH", "/s?_DASH_throughput=x", nil, DASH, Report{}},
		{"both: DASH alone read", "/s?_HLS_pathway=alpha&_HLS_throughput=5&_DASH_pathway=beta", nil, DASH, c(1)},
		{"both: HLS throughput not used", "/s?_HLS_throughput=5&_DASH_throughput=x", nil, DASH, Report{}},
		{"skipped DASH part does not make DASH", "/s?_DASH_pathway=%g&_HLS_pathway=alpha", nil, HLS, c(0)},
		{"DASH part after # is not in the query", "/s?_HLS_pathway=alpha#&_DASH_pathway=beta", nil, HLS, c(0)},
		{"encoded DASH name", "/s?%5FDASH_throughput=3", nil, DASH, T(3)},
		{"both: CMCD still read", "/s?_HLS_throughput=5&_DASH_pathway=beta&CMCD=mtp%3D2", nil, DASH, with(c(1), T(2000))},
	})
}

// TestSessionCompanion6 is COMPANION §6 "Session": the first wai_session
// part, exactly 32 hexadecimal digits.
func TestSessionCompanion6(t *testing.T) {
	const hex32 = "00112233445566778899aabbccddeeff"
	want := Session{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{"lowercase", "/s?wai_session=" + hex32, true},
		{"uppercase read too", "/s?wai_session=" + strings.ToUpper(hex32), true},
		{"mixed case", "/s?wai_session=00112233445566778899AAbbCCddEEff", true},
		{"after other parts", "/s?_HLS_pathway=x&wai_session=" + hex32 + "&y", true},
		{"percent-encoded digits", "/s?wai_session=%30%30112233445566778899aabbccddeeff", true},
		{"first wins", "/s?wai_session=" + hex32 + "&wai_session=ffffffffffffffffffffffffffffffff", true},
		{"skipped part is no part", "/s?wai_session=%x&wai_session=" + hex32, true},
		{"first wins though it is no session", "/s?wai_session=zz&wai_session=" + hex32, false},
		{"31 digits", "/s?wai_session=" + hex32[:31], false},
		{"33 digits", "/s?wai_session=" + hex32 + "0", false},
		{"not hex", "/s?wai_session=g0112233445566778899aabbccddeeff", false},
		{"quoted is not unquoted", `/s?wai_session="` + hex32 + `"`, false},
		{"no query", "/s#?wai_session=" + hex32, false},
		{"name is bytewise", "/s?WAI_SESSION=" + hex32, false},
		{"none", "/s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := SessionOf(tc.target)
			if ok != tc.ok || ok && s != want || !ok && s != (Session{}) {
				t.Errorf("SessionOf(%q) = %x, %v; want ok %v", tc.target, s, ok, tc.ok)
			}
		})
	}
}

// TestSessionString81 is §8.1: the session as 32 lowercase hex digits, which
// SessionOf reads back; NewSession reads 16 bytes (§6).
func TestSessionString81(t *testing.T) {
	src := bytes.NewReader(bytes.Repeat([]byte{0xAB, 0x01}, 8))
	s, err := NewSession(src)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), strings.Repeat("ab01", 8); got != want {
		t.Fatalf("String() = %q; want %q", got, want)
	}
	back, ok := SessionOf("/s?wai_session=" + s.String())
	if !ok || back != s {
		t.Fatalf("SessionOf(String()) = %x, %v", back, ok)
	}
	if _, err := NewSession(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Fatal("NewSession with a failing reader: no error")
	}
	if _, err := NewSession(bytes.NewReader(make([]byte, 15))); err == nil {
		t.Fatal("NewSession with 15 bytes: no error")
	}
	a, err1 := NewSession(nil)
	b, err2 := NewSession(nil)
	if err1 != nil || err2 != nil || a == b {
		t.Fatalf("NewSession(nil) twice: %x %v, %x %v", a, err1, b, err2)
	}
}
