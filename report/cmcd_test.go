package report

import (
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/shared"
)

// TestReadCMCD44 is §4.4 with COMPANION §6's readings: where the Dictionary
// comes from, what parses, what a key gives.
func TestReadCMCD44(t *testing.T) {
	hdr := func(lines ...string) []string { return lines }
	runRead(t, []readCase{
		// Where: the CMCD part, or the header when the query has none.
		{"query", "/s?CMCD=bl%3D21300%2Cmtp%3D48100", nil, HLS, with(B(21300), T(48100000))},
		{"header", "/s", hdr("bl=21300,mtp=48100"), HLS, with(B(21300), T(48100000))},
		{"query wins over header", "/s?CMCD=bl%3D1", hdr("bl=2,mtp=3"), HLS, B(1)},
		{"empty CMCD part still wins", "/s?CMCD=", hdr("bl=2"), HLS, Report{}},
		{"CMCD part without = wins", "/s?CMCD", hdr("bl=2"), HLS, Report{}},
		{"failing CMCD part still wins", "/s?CMCD=bl%3D1%2C", hdr("bl=2"), HLS, Report{}},
		{"skipped CMCD part sends to the header (COMPANION §6)", "/s?CMCD=bl%3D1%", hdr("bl=2"), HLS, B(2)},
		{"skipped then next CMCD part", "/s?CMCD=%zz&CMCD=bl%3D3", hdr("bl=2"), HLS, B(3)},
		{"first CMCD part wins", "/s?CMCD=bl%3D3&CMCD=bl%3D4", nil, HLS, B(3)},
		{"CMCD after # is not in the query", "/s?x#CMCD=bl%3D1", hdr("bl=2"), HLS, B(2)},
		{"lowercase cmcd is another name", "/s?cmcd=bl%3D1", hdr("bl=2"), HLS, B(2)},
		{"header lines combined with \", \"", "/s", hdr("bl=5", "mtp=6"), HLS, with(B(5), T(6000))},
		{"combined lines: last duplicate wins", "/s", hdr("bl=5", "bl=6"), HLS, B(6)},
		{"combined lines: one bad line fails all", "/s", hdr("bl=5", "mtp=="), HLS, Report{}},
		{"unencoded query dictionary (Go-style split at first =)", `/s?CMCD=bl=7,mtp=8`, nil, HLS, with(B(7), T(8000))},
		{"+ in the query is not a space", "/s?CMCD=bl%3D1,+mtp%3D2", nil, HLS, Report{}},
		{"%20 in the query is a space", "/s?CMCD=bl%3D1,%20mtp%3D2", nil, HLS, with(B(1), T(2000))},
		// T from mtp only when §4.2 or §4.3 gave none.
		{"HLS T wins over mtp", "/s?_HLS_throughput=5&CMCD=mtp%3D9", nil, HLS, T(5)},
		{"HLS T not an integer: mtp", "/s?_HLS_throughput=x&CMCD=mtp%3D9", nil, HLS, T(9000)},
		{"DASH T wins over mtp", "/s?_DASH_throughput=5", hdr("mtp=9"), DASH, T(5)},
		{"DASH T item missing: mtp", "/s?_DASH_pathway=x,beta&_DASH_throughput=5", hdr("mtp=9,bl=1"), DASH, with(c(1), T(9000), B(1))},
		{"mtp 0", "/s", hdr("mtp=0"), HLS, T(0)},
		{"mtp at RFC 9651's 15 digits: exact", "/s", hdr("mtp=999999999999999"), HLS, T(999999999999999000)},
		{"16 digits fail the Dictionary: neither key", "/s", hdr("bl=1,mtp=1000000000000000"), HLS, Report{}},
		{"leading zeros", "/s", hdr("bl=000000000000007"), HLS, B(7)},
		// What a key gives.
		{"negative: absent", "/s", hdr("bl=-1,mtp=2"), HLS, T(2000)},
		{"-0 is the Integer 0", "/s", hdr("bl=-0"), HLS, B(0)},
		{"decimal: absent", "/s", hdr("bl=1.5,mtp=2.0"), HLS, Report{}},
		{"string: absent", "/s", hdr(`bl="1"`), HLS, Report{}},
		{"token: absent", "/s", hdr(`bl=a1`), HLS, Report{}},
		{"bare key (true): absent", "/s", hdr(`bl,mtp`), HLS, Report{}},
		{"boolean: absent", "/s", hdr(`bl=?0`), HLS, Report{}},
		{"integer with parameters (COMPANION §6)", "/s", hdr(`bl=5;a=1;b="x";c=:YQ==:`), HLS, B(5)},
		{"inner list: least", "/s", hdr(`bl=(300 100 200)`), HLS, B(100)},
		{"inner list with parameters on items and list", "/s", hdr(`bl=(300;ot=v 100;ot=a)`, `mtp=(25400;ot=v 3000;ot=a);x=1`), HLS, with(B(100), T(3000000))},
		{"inner list of one", "/s", hdr(`mtp=(7)`), HLS, T(7000)},
		{"empty inner list: absent", "/s", hdr(`bl=()`), HLS, Report{}},
		{"inner list with a negative: absent", "/s", hdr(`bl=(5 -1)`), HLS, Report{}},
		{"inner list with a decimal: absent", "/s", hdr(`bl=(5 1.0)`), HLS, Report{}},
		{"inner list with a string: absent", "/s", hdr(`bl=(5 "6")`), HLS, Report{}},
		{"nested inner list does not parse", "/s", hdr(`bl=((5)),mtp=1`), HLS, Report{}},
		{"inner list extra spaces", "/s", hdr(`bl=(  5   6  )`), HLS, B(5)},
		{"duplicate keys: last wins (RFC 9651)", "/s", hdr(`bl=1,mtp=2,bl=3`), HLS, with(B(3), T(2000))},
		{"duplicate keys: last wins even when it does not read", "/s", hdr(`bl=1,bl=x`), HLS, Report{}},
		// The whole grammar parses, Dates and Display Strings included.
		{"date in the Dictionary", "/s", hdr(`d=@1692859242,bl=4`), HLS, B(4)},
		{"negative date", "/s", hdr(`d=@-1,bl=4`), HLS, B(4)},
		{"date as a key's value: absent", "/s", hdr(`bl=@5`), HLS, Report{}},
		{"decimal date fails", "/s", hdr(`d=@1.5,bl=4`), HLS, Report{}},
		{"display string", "/s", hdr(`d=%"f%c3%bc%c3%bc",bl=4`), HLS, B(4)},
		{"display string as parameter", "/s", hdr(`bl=4;d=%"x"`), HLS, B(4)},
		{"display string uppercase hex fails", "/s", hdr(`d=%"f%C3%BC",bl=4`), HLS, Report{}},
		{"display string bad UTF-8 fails", "/s", hdr(`d=%"%ff",bl=4`), HLS, Report{}},
		{"display string with ':' is no byte sequence", "/s", hdr(`d=%":x:",bl=4`), HLS, B(4)},
		{"string with ':' is no byte sequence", "/s", hdr(`d=":x:",bl=4`), HLS, B(4)},
		{"token with ':' is no byte sequence", "/s", hdr(`d=a:x:,bl=4`), HLS, B(4)},
		{"string escapes around ':'", "/s", hdr(`d="\":x",bl=4`), HLS, B(4)},
		{"key case: uppercase key fails the Dictionary", "/s", hdr(`Bl=1,bl=4`), HLS, Report{}},
		{"non-ASCII fails", "/s", hdr("bl=4,s=\"\xc3\xbc\""), HLS, Report{}},
		{"leading spaces", "/s?CMCD=%20%20bl%3D4", nil, HLS, B(4)},
		{"leading tab fails", "/s?CMCD=%09bl%3D4", nil, HLS, Report{}},
		{"trailing spaces and tab", "/s?CMCD=bl%3D4%20%09", nil, HLS, B(4)},
		// Byte Sequences: padding supplied, exact base64 required
		// (COMPANION §6 "Byte Sequences").
		{"byte sequence padded", "/s", hdr(`b=:aGVsbG8=:,bl=4`), HLS, B(4)},
		{"byte sequence without padding accepted", "/s", hdr(`b=:aGVsbG8:,bl=4`), HLS, B(4)},
		{"byte sequence missing two =", "/s", hdr(`b=:YQ:,bl=4`), HLS, B(4)},
		{"byte sequence with one of two =", "/s", hdr(`b=:YQ=:,bl=4`), HLS, B(4)},
		{"empty byte sequence", "/s", hdr(`b=::,bl=4`), HLS, B(4)},
		{"byte sequence as a parameter, unpadded", "/s", hdr(`bl=4;b=:YQ:`), HLS, B(4)},
		{"byte sequences in an inner list, unpadded", "/s", hdr(`x=(:YQ: :YWI:),bl=4`), HLS, B(4)},
		{"several unpadded", "/s", hdr(`a=:YQ:`, `b=:YWI:;c=:YWJj:,bl=4`), HLS, B(4)},
		{"length 1 mod 4 refused", "/s", hdr(`b=:YWJjZ:,bl=4`), HLS, Report{}},
		{"non-zero pad bits refused", "/s", hdr(`b=:YR==:,bl=4`), HLS, Report{}},
		{"non-zero pad bits refused, unpadded", "/s", hdr(`b=:YWJ:,bl=4`), HLS, Report{}},
		{"three = refused", "/s", hdr(`b=:YQ===:,bl=4`), HLS, Report{}},
		{"= alone refused", "/s", hdr(`b=:=:,bl=4`), HLS, Report{}},
		{"= in the middle refused", "/s", hdr(`b=:Y=Q=:,bl=4`), HLS, Report{}},
		{"base64url refused", "/s", hdr(`b=:_-Ah:,bl=4`), HLS, Report{}},
		{"space inside refused", "/s", hdr(`b=:aGVs bG8=:,bl=4`), HLS, Report{}},
		{"unclosed byte sequence", "/s", hdr(`bl=4,b=:YQ==`), HLS, Report{}},
		{"bad byte sequence in the query", "/s?CMCD=bl%3D4%2Cb%3D%3AYR%3D%3D%3A", nil, HLS, Report{}},
		{"unpadded byte sequence in the query", "/s?CMCD=bl%3D4%2Cb%3D%3AYQ%3A", nil, HLS, B(4)},
	})
}

// TestCMCDHeaderName is COMPANION §6 "CMCD-Request": the field name is
// case-insensitive, and its lines are combined.
func TestCMCDHeaderName(t *testing.T) {
	h := http.Header{}
	h.Add("cmcd-request", "bl=1") // canonicalised by Add
	h.Add("CMCD-REQUEST", "mtp=2")
	if _, r := Read("/s", h, testIDs); r != with(B(1), T(2000)) {
		t.Errorf("canonical: %+v", r)
	}
	// A header built by hand with other spellings: the canonical key's
	// lines first, then the others in bytewise order of their keys.
	canonical := make([]string, 1, 4) // room that combining must not write into
	canonical[0] = "bl=3,mtp=1"
	h = http.Header{"CMCD-Request": {"bl=1"}, "cmcd-request": {"bl=2"}, "Cmcd-Request": canonical}
	if _, r := Read("/s", h, testIDs); r != with(B(2), T(1000)) {
		t.Errorf("hand-built: %+v", r)
	}
	if canonical[:2][1] != "" {
		t.Errorf("combining wrote into the header's slice")
	}
	h = http.Header{"CMCD-Object": {"bl=1"}, "Cmcd-Requests": {"bl=1"}}
	if _, r := Read("/s", h, testIDs); r != (Report{}) {
		t.Errorf("other fields read: %+v", r)
	}
}

// TestBase64Padding checks the Byte Sequence rule (COMPANION §6) against
// encoding/base64's strict decoder applied to the content padded by hand.
func TestBase64Padding(t *testing.T) {
	alphabet := "AQgw/+=Yz9_. "
	var contents []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		contents = append(contents, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 5)
	for _, s := range contents {
		padded := s
		for len(padded)%4 != 0 {
			padded += "="
		}
		_, err := base64.StdEncoding.Strict().DecodeString(padded)
		want := err == nil && !strings.ContainsAny(s, "\r\n")
		pad, ok := base64Padding(s)
		if ok != want || ok && pad != len(padded)-len(s) {
			t.Fatalf("base64Padding(%q) = %d, %v; strict decoding of %q: %v", s, pad, ok, padded, err)
		}
	}
}

// cmcdExample is one string quoted from testdata/cmcd/examples.md, and the
// report §4.4 reads from it.
type cmcdExample struct {
	name   string
	query  string // the query part, as quoted; "" for header mode
	header string // the CMCD-Request line, as quoted; "" for query mode
	r      Report
}

// TestCMCDExamples44 reads the public examples of testdata/cmcd/examples.md
// in query and header modes (§4.4). Each string must occur in the file
// exactly as written here.
func TestCMCDExamples44(t *testing.T) {
	raw, err := os.ReadFile(shared.Path(t, "testdata", "cmcd", "examples.md"))
	if err != nil {
		t.Fatal(err)
	}
	file := string(raw)
	for _, ex := range []cmcdExample{
		{"A1 sid only", "CMCD=sid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22", "", Report{}},
		{"A2 query", "CMCD=br%3D3200%2Cbs%2Cd%3D4004%2Cmtp%3D25400%2Cot%3Dv%2Crtp%3D15000%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Ctb%3D6000", "", T(25400000)},
		{"A2 header", "", "CMCD-Request: mtp=25400", T(25400000)},
		{"A4 header", "", "CMCD-Request: su", Report{}},
		{"A5 uppercase custom key fails SF", "CMCD=com.example-myNumericKey%3D500%2Ccom.example-myStringKey%3D%22myStringValue%22%2Cd%3D4004", "", Report{}},
		{"A6 double-encoded nor", "CMCD=nor%3D%22..%252F300kbps%252Fsegment35.m4v%22%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22", "", Report{}},
		{"A9 all keys query", "CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22faec5fc2-ac30-11ea-bb37-0242ac130002%22%2Cd%3D4004%2Cdl%3D18500%2Cmtp%3D48100%2Cnor%3D%22..%252F300kbps%252Ftrack.m4v%22%2Cnrr%3D%2212323-48763%22%2Cot%3Dv%2Cpr%3D1.08%2Crtp%3D12000%2Csf%3Dd%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Cst%3Dv%2Csu%2Ctb%3D6000", "", with(B(21300), T(48100000))},
		{"A9 all keys header", "", `CMCD-Request: bl=21300,dl=18500,mtp=48100,nor="..%2F300kbps%2Ftrack.m4v",nrr="12323-48763",su`, with(B(21300), T(48100000))},
		{"B v2 inner lists", "", `CMCD-Request: bl=(5000),com.example-quote="\"Quote\"",com.example-token=s,cs="123456",dfa=5,dl=10000,ltc=1500,mtp=(10000),nor=("../testing/3.m4v"),pb=(1000),sn=1,sta=p,su,tbl=(8000)`, with(B(5000), T(10000000))},
		{"B query with ( ) and %20", "CMCD=br%3D1000%2Ccom.example-hello%3D%22world%22%2Cec%3D(%22ERR001%22%20%22ERR002%22)%2Csu", "", Report{}},
		{"C dash.js media segment", "CMCD=bl%3D11500%2Cbr%3D14931%2Ccid%3D%2221cf726cfe3d937b5f974f72bb5bd06a%22%2Cd%3D4000%2Cdl%3D11500%2Cmtp%3D99300%2Cnor%3D%22bbb_30fps_3840x2160_12000k_3.m4v%22%2Cot%3Dv%2Crtp%3D26000%2Csf%3Dd%2Csid%3D%22b248658d-1d1a-4039-91d0-8c08ba597da5%22%2Cst%3Dv%2Ctb%3D14932", "", with(B(11500), T(99300000))},
		{"C dash.js header", "", `CMCD-Request: bl=31700,dl=31700,mtp=10600,nor="bbb_a64k_11.m4a"`, with(B(31700), T(10600000))},
		// Bitmovin leaves = and , unencoded; the part is cut at its first
		// =, so the value is the Dictionary. bl=0 is present; mtp=15.26 is
		// a Decimal, absent.
		{"D Bitmovin bl=0, decimal mtp", "CMCD=bl=0,cid=%221111-111111-111111-11111%22,dl=0,mtp=15.26,ot=a,sf=h,sid=%226e2fb550-c457-11e9-bb97-0800200c9a66%22,st=v,su", "", B(0)},
		{"D Bitmovin 4+ fraction digits fail SF", "CMCD=bl=3993.8321995464853,cid=%221111-111111-111111-11111%22,dl=3993.8321995464853,mtp=203.5,ot=a,sf=h,sid=%226e2fb550-c457-11e9-bb97-0800200c9a66%22,st=v,su", "", Report{}},
		{"D Bitmovin header fails SF", "", "CMCD-Request: bl=3890.1140000000005,dl=3890.1140000000005,mtp=97.58,su", Report{}},
		{"E unencoded quotes read", `CMCD=cid="21cf726cfe3d937b5f974f72bb5bd06a",ot=i,sf=d,sid="b248658d-1d1a-4039-91d0-8c08ba597da5",st=v,su`, "", Report{}},
	} {
		t.Run(ex.name, func(t *testing.T) {
			quoted := ex.query + ex.header
			if !strings.Contains(file, quoted) {
				t.Fatalf("not quoted from examples.md: %q", quoted)
			}
			target := "/steer"
			h := http.Header{}
			if ex.query != "" {
				target += "?" + ex.query
				// A header the query's CMCD part must override.
				h.Set("CMCD-Request", "bl=1,mtp=1")
			} else {
				name, value, _ := strings.Cut(ex.header, ": ")
				h.Add(name, value)
			}
			p, r := Read(target, h, testIDs)
			if p != HLS || r != ex.r {
				t.Errorf("Read = %d, %+v; want %d, %+v", p, r, HLS, ex.r)
			}
		})
	}
	// The header form of A9, all four shards as the example sends them:
	// only CMCD-Request is read.
	h := http.Header{}
	for _, line := range []string{
		"CMCD-Object: br=3200,d=4004,ot=v,tb=6000",
		`CMCD-Request: bl=21300,dl=18500,mtp=48100,nor="..%2F300kbps%2Ftrack.m4v",nrr="12323-48763",su`,
		`CMCD-Session: cid="faec5fc2-ac30-11ea-bb37-0242ac130002",pr=1.08,sf=d,sid="6e2fb550-c457-11e9-bb97-0800200c9a66",st=v`,
		"CMCD-Status: bs,rtp=12000",
	} {
		if !strings.Contains(file, line) {
			t.Fatalf("not quoted from examples.md: %q", line)
		}
		name, value, _ := strings.Cut(line, ": ")
		h.Add(name, value)
	}
	if _, r := Read("/steer", h, testIDs); r != with(B(21300), T(48100000)) {
		t.Errorf("A9 shards: %+v", r)
	}
}
