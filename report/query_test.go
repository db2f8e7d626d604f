package report

import (
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

// decodedParts reads a Query back as decoded values, one per name read,
// with "-" for a name the query has no part for.
func decodedParts(q *Query) [6]string {
	vals := [6]string{q.hlsPathway, q.hlsThroughput, q.dashPathway, q.dashThroughput, q.cmcd, q.session}
	for i := range vals {
		if q.has&(1<<i) == 0 {
			vals[i] = "-"
		} else {
			vals[i] = string(appendDecoded(nil, vals[i]))
		}
	}
	return vals
}

var partNames = [6]string{nameHLSPathway, nameHLSThroughput, nameDASHPathway, nameDASHThroughput, nameCMCD, nameSession}

// TestQuery41 is §4.1 and COMPANION §6 "The query": where the query is, how
// it is cut, decoded, which part is read.
func TestQuery41(t *testing.T) {
	const none = "-"
	for _, tc := range []struct {
		name   string
		target string
		// the decoded value of _HLS_pathway, and of CMCD
		hls, cmcd string
	}{
		{"no query: no ?", "/steer", none, none},
		{"empty query", "/steer?", none, none},
		{"query after first ?", "/steer?_HLS_pathway=a?b=c", "a?b=c", none},
		{"# ends the query", "/steer?_HLS_pathway=a#_HLS_pathway=b&CMCD=x", "a", none},
		{"# before the first ? means no query (COMPANION §6)", "/steer#frag?_HLS_pathway=a", none, none},
		{"# right after ?", "/steer?#_HLS_pathway=a", none, none},
		{"no = gives an empty value", "/steer?_HLS_pathway&CMCD", "", ""},
		{"cut at the first = only", "/s?_HLS_pathway=a=b&CMCD=bl=1,mtp=2", "a=b", "bl=1,mtp=2"},
		{"first part read, later ignored", "/s?_HLS_pathway=a&_HLS_pathway=b", "a", none},
		{"percent-decoded value", "/s?_HLS_pathway=%41%62%2c%2C", "Ab,,", none},
		{"percent-decoded name", "/s?%5FHLS%5fpathway=x&%43MCD=y", "x", "y"},
		{"+ is not a space", "/s?_HLS_pathway=a+b&CMCD=bl%3D1+", "a+b", "bl=1+"},
		{"decoding is one pass: %2541 is %41", "/s?_HLS_pathway=%2541", "%41", none},
		{"decoded & and = are data", "/s?_HLS_pathway=a%26b%3Dc", "a&b=c", none},
		{"bad % skipped, next read", "/s?_HLS_pathway=%zz&_HLS_pathway=ok", "ok", none},
		{"% at end skipped", "/s?_HLS_pathway=a%&_HLS_pathway=b%4", none, none},
		{"% one digit skipped", "/s?_HLS_pathway=%4g&_HLS_pathway=c", "c", none},
		{"bad % in the name skips the part", "/s?_HLS%_pathway=a&_HLS_pathway=b", "b", none},
		{"bad % anywhere in the part skips it", "/s?CMCD=bl=1%&CMCD=bl=2", none, "bl=2"},
		{"names are bytewise: case matters", "/s?_hls_pathway=a&cmcd=b", none, none},
		{"empty parts", "/s?&&_HLS_pathway=a&&", "a", none},
		{"long name is none of ours", "/s?_HLS_pathwayxxxxxxxxxxx=a", none, none},
		{"name decoding to ours with many %", "/s?%5F%48%4C%53%5F%70%61%74%68%77%61%79=z", "z", none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ParseQuery(tc.target)
			got := decodedParts(&q)
			if got[0] != tc.hls || got[4] != tc.cmcd {
				t.Errorf("ParseQuery(%q): _HLS_pathway %q, CMCD %q; want %q, %q", tc.target, got[0], got[4], tc.hls, tc.cmcd)
			}
		})
	}
}

// TestInteger41 is §4.1's integer: 1 to 20 ASCII digits, at most 2^64 − 1.
func TestInteger41(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  uint64
		ok bool
	}{
		{"0", 0, true},
		{"5", 5, true},
		{"00000000000000000001", 1, true}, // 20 digits
		{"000000000000000000001", 0, false},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.0", 0, false},
		{"0x10", 0, false},
		{`"5"`, 0, false},
		{"١", 0, false}, // not ASCII
	} {
		n, ok := integer([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("integer(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

// TestUnquote41 is §4.1's unquoting with COMPANION §6's reading: at least
// two bytes, one " removed at each end.
func TestUnquote41(t *testing.T) {
	for in, want := range map[string]string{
		`"a"`:   "a",
		`""`:    "",
		`"`:     `"`,
		`"""`:   `"`,
		`""a""`: `"a"`,
		`"a`:    `"a`,
		`a"`:    `a"`,
		`a`:     `a`,
		``:      ``,
	} {
		if got := string(unquote([]byte(in))); got != want {
			t.Errorf("unquote(%q) = %q; want %q", in, got, want)
		}
	}
}

// refQuery is a straightforward reading of §4.1 with the standard library:
// url.PathUnescape decodes %XX, keeps + and refuses a bad %.
func refQuery(target string) map[string]string {
	before, after, found := strings.Cut(target, "?")
	if !found || strings.Contains(before, "#") {
		return nil
	}
	raw, _, _ := strings.Cut(after, "#")
	first := map[string]string{}
	for _, part := range strings.Split(raw, "&") {
		if _, err := url.PathUnescape(part); err != nil {
			continue // skipped: no part at all
		}
		n, v, _ := strings.Cut(part, "=")
		name, err1 := url.PathUnescape(n)
		value, err2 := url.PathUnescape(v)
		if err1 != nil || err2 != nil {
			panic("a well-encoded part has well-encoded halves")
		}
		if _, seen := first[name]; !seen {
			first[name] = value
		}
	}
	return first
}

// escapeAll percent-encodes every byte but RFC 3986's unreserved ones.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// FuzzQuery checks the splitter and decoder (§4.1) against refQuery, and
// that decoding is a function of the bytes: re-encoding each value read and
// reading it again gives the same value.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"/s?_HLS_pathway=%22a%22&_HLS_throughput=5",
		"/s?_DASH_pathway=a,b&_DASH_throughput=1,2",
		"/s?CMCD=bl%3D1%2Cmtp%3D2&wai_session=00112233445566778899aabbccddeeff",
		"/s#?CMCD=x", "/s?%zz&CMCD=%2", "/s?a+b=c+d&&=&", "?%5FHLS_pathway=x#y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		q := ParseQuery(target)
		got := decodedParts(&q)
		ref := refQuery(target)
		for i, name := range partNames {
			want, ok := ref[name]
			if !ok {
				want = "-"
			}
			if got[i] != want {
				t.Fatalf("%q: part %s = %q; reference %q", target, name, got[i], want)
			}
			if want == "-" {
				continue
			}
			again := ParseQuery("?" + name + "=" + escapeAll(want))
			if v := decodedParts(&again)[i]; v != want {
				t.Fatalf("%q: %s re-encoded reads %q; want %q", target, name, v, want)
			}
		}
	})
}
