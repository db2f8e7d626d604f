package report

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refRead is a straightforward reading of §4 and COMPANION §6, built on
// refQuery (the standard library's decoder, maps) and refDictionary (the
// second RFC 9651 reading): what Read must agree with; and what the
// request carried that did not read, by the rules of Unread's doc.
func refRead(target string, lines []string, ids []string) (Protocol, Report, Unread) {
	q := refQuery(target)
	index := func(s string) (uint8, bool) {
		for i, id := range ids {
			if i < 256 && id == s {
				return uint8(i), true
			}
		}
		return 0, false
	}
	unquote := func(s string) string {
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			return s[1 : len(s)-1]
		}
		return s
	}
	integer := func(s string) (uint64, bool) {
		if len(s) < 1 || len(s) > 20 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseUint(s, 10, 64)
		return n, err == nil
	}
	var r Report
	var u Unread
	named := func(s string) bool { return s != "" && s != "." }
	setC := func(s string) bool {
		i, ok := index(s)
		if ok {
			r = with(r, c(i))
		}
		return ok
	}
	setT := func(s string) {
		if n, ok := integer(s); ok {
			r = with(r, T(n))
		} else if s != "" {
			u |= ThroughputUnreadable
		}
	}
	p := HLS
	_, dp := q[nameDASHPathway]
	_, dt := q[nameDASHThroughput]
	if dp || dt {
		p = DASH
		j := 0
		if v, ok := q[nameDASHPathway]; ok {
			items := strings.Split(unquote(v), ",")
			found := false
			for pos, item := range items {
				if setC(item) {
					j, found = pos, true
					break
				}
			}
			if !found && slices.ContainsFunc(items, named) {
				u |= UnknownPathway
			}
		}
		if v, ok := q[nameDASHThroughput]; ok {
			if items := strings.Split(v, ","); j < len(items) {
				setT(items[j])
			}
		}
	} else {
		if v, ok := q[nameHLSPathway]; ok && !setC(unquote(v)) && named(unquote(v)) {
			u |= UnknownPathway
		}
		if v, ok := q[nameHLSThroughput]; ok {
			setT(v)
		}
	}
	text, ok := q[nameCMCD]
	if !ok && lines != nil {
		text, ok = strings.Join(lines, ", "), true
	}
	if !ok {
		return p, r, u
	}
	d, err := refDictionary(text)
	if err != nil {
		return p, r, u | CMCDUnreadable
	}
	given := func(key string) bool {
		return slices.ContainsFunc(d, func(m refMember) bool { return m.key == key })
	}
	if bl, ok := refKey(d, "bl"); ok {
		r = with(r, B(bl))
	} else if given("bl") {
		u |= BufferUnreadable
	}
	if mtp, ok := refKey(d, "mtp"); ok && r.Present&HasThroughput == 0 {
		r = with(r, T(mtp*1000)) // mtp < 10^15 (RFC 9651 §3.3.1)
	} else if !ok && given("mtp") {
		u |= ThroughputUnreadable
	}
	return p, r, u
}

// readSeeds are requests from the table tests.
var readSeeds = []struct{ target, header string }{
	{`/s?_HLS_pathway="beta"&_HLS_throughput=5000000`, ""},
	{`/s?_HLS_pathway=alp%ha&_HLS_pathway=alpha&_HLS_throughput=18446744073709551615`, ""},
	{`/s?_DASH_pathway="omega,beta,alpha"&_DASH_throughput=100,200,300`, ""},
	{`/s?_DASH_pathway=",,beta"&_DASH_throughput=,,42&_HLS_pathway=alpha`, ""},
	{`/s?_DASH_throughput=9,8#x`, "mtp=1"},
	{`/s?CMCD=bl%3D21300%2Cmtp%3D48100&wai_session=00112233445566778899aabbccddeeff`, "bl=1"},
	{`/s?CMCD=bl%3D1%`, `bl=(300;ot=v 100;ot=a),mtp=(25400;ot=v 3000;ot=a);x=1`},
	{`/s`, "d=@1692859242,e=%\"f%c3%bc\",b=:YQ:,bl=4\nmtp=2"},
	{`/s#?_HLS_pathway=alpha`, `bl=1,b=:YR==:`},
	{`/s?_HLS_throughput="5"&CMCD=bl=0,mtp=15.26`, ""},
	// Issue 26 item 3's values.
	{`/s?_HLS_pathway=alpha&_HLS_throughput=18446744073709551616`, ""},
	{`/s?_HLS_pathway=alpha&_HLS_throughput=-5`, ""},
	{`/s?_HLS_pathway=.&_HLS_throughput=fast`, ""},
	{`/s?_DASH_pathway="x,beta"&_DASH_throughput=1,-5`, ""},
	{`/s?_DASH_pathway=",."&_DASH_throughput=,`, ""},
	{`/s?CMCD=mtp%3D-5%2Cbl%3D-1`, ""},
	{`/s?_HLS_pathway=omega`, "mtp=-5,bl=(1 -2)"},
	{`/s`, "bl=1;,"},
}

// FuzzRead checks that Read never panics, that its report keeps §7.1's
// invariants (protocol 1 or 2, no bit of present above 2, an absent value
// 0, a present pathway below the count of pathways), and that it agrees
// with refRead. header, cut at each newline, is the CMCD-Request field's
// lines when withHeader.
func FuzzRead(f *testing.F) {
	for _, s := range readSeeds {
		f.Add(s.target, s.header, s.header != "")
	}
	f.Fuzz(func(t *testing.T, target, header string, withHeader bool) {
		var lines []string
		h := http.Header{}
		if withHeader {
			lines = strings.Split(header, "\n")
			h["Cmcd-Request"] = lines
		}
		q := ParseQuery(target)
		p, r, u := q.ReportUnread(h, testIDs)
		if rp, rr := Read(target, h, testIDs); rp != p || rr != r {
			t.Fatalf("Read %d, %+v; ReportUnread %d, %+v", rp, rr, p, r)
		}
		// Issue 26 item 3: every reason is one of the known set.
		if u >= 1<<len(UnreadReasons()) {
			t.Fatalf("unread %#x, beyond the %d reasons", u, len(UnreadReasons()))
		}
		for _, why := range u.Reasons() {
			if !slices.Contains(UnreadReasons(), why) {
				t.Fatalf("reason %q", why)
			}
		}
		if p != HLS && p != DASH {
			t.Fatalf("protocol %d", p)
		}
		if r.Present&^(HasPathway|HasThroughput|HasBuffer) != 0 {
			t.Fatalf("present %#x", r.Present)
		}
		if r.Present&HasPathway == 0 && r.Pathway != 0 ||
			r.Present&HasThroughput == 0 && r.Throughput != 0 ||
			r.Present&HasBuffer == 0 && r.Buffer != 0 {
			t.Fatalf("absent value not 0: %+v", r)
		}
		if r.Present&HasPathway != 0 && int(r.Pathway) >= len(testIDs) {
			t.Fatalf("pathway %d of %d", r.Pathway, len(testIDs))
		}
		wp, wr, wu := refRead(target, lines, testIDs)
		if p != wp || r != wr || u != wu {
			t.Fatalf("Read(%q, %q) = %d, %+v, unread %v; reference %d, %+v, %v", target, lines, p, r, u.Reasons(), wp, wr, wu.Reasons())
		}
		if q := ParseQuery(target); q.Protocol() != p {
			t.Fatalf("Protocol() = %d; Read %d", q.Protocol(), p)
		}
	})
}

// FuzzDictionary checks the CMCD reading (a scan for Byte Sequences, then
// httpsfv) against the reference RFC 9651 parser of sfref_test.go: they
// parse the same texts and read the same value for every key (§4.4).
func FuzzDictionary(f *testing.F) {
	for _, cases := range sfCases(f) {
		for _, tc := range cases {
			if tc.HeaderType == "dictionary" {
				f.Add(strings.Join(tc.Raw, ", "))
			}
		}
	}
	for _, s := range readSeeds {
		f.Add(s.header)
	}
	f.Add(`a=:YQ:, b=(:YWI: "x:y" tok:en:);p=%":"`)
	f.Fuzz(func(t *testing.T, text string) {
		d, ok := parseDictionary(text)
		ref, err := refDictionary(text)
		if ok != (err == nil) {
			t.Fatalf("%q: package parsed %v; reference: %v", text, ok, err)
		}
		if !ok {
			if k, parsed := readDictionary(text); parsed || k != (cmcdKeyValues{}) {
				t.Fatalf("%q: does not parse, reads %+v", text, k)
			}
			return
		}
		if got, want := len(d.Names()), len(ref); got != want {
			t.Fatalf("%q: %d keys; reference %d", text, got, want)
		}
		for _, m := range ref {
			dm, found := d.Get(m.key)
			if !found {
				t.Fatalf("%q: key %q missing", text, m.key)
			}
			v, has := keyValue(dm)
			wv, whas := refKey(ref, m.key)
			if v != wv || has != whas {
				t.Fatalf("%q: key %q reads %d, %v; reference %d, %v", text, m.key, v, has, wv, whas)
			}
		}
	})
}

// FuzzSimpleDictionary holds the CMCD reading's fast path to the full one
// (§4.4): for every text readSimpleDictionary reads, readDictionary's full
// parse (httpsfv, after the Byte Sequence rule) gives the same bl and mtp,
// and the reference parser of sfref_test.go parses it too.
func FuzzSimpleDictionary(f *testing.F) {
	for _, cases := range sfCases(f) {
		for _, tc := range cases {
			if tc.HeaderType == "dictionary" {
				f.Add(strings.Join(tc.Raw, ", "))
			}
		}
	}
	for _, s := range readSeeds {
		f.Add(s.header)
	}
	for _, s := range []string{
		"", " ", "bl=21300,mtp=48100", " bl=1 , mtp=-0\t", "bl=-5,mtp=999999999999999", "bl=1000000000000000",
		"bl=2,bl=x", `bl=3,sid="6e2f",ot=v,su,mtp=7`, "bl=1.5", "bl=1;p=2", "bl=(1 2)", "bl=?1", "bl=:YQ==:",
		"bl=1,", "bl=1,,mtp=2", "Bl=1", "*x=tok:en/a", `bl="a\"b"`, "bl=\t1", "\tbl=1", "bl=1 mtp=2", "bl=@1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		k, ok := readSimpleDictionary(text)
		if !ok {
			return
		}
		v, has := k.v, k.has
		d, parsed := parseDictionary(text)
		if !parsed {
			t.Fatalf("%q: the fast path reads %v %v; the full parse refuses it", text, v, has)
		}
		if _, err := refDictionary(text); err != nil {
			t.Fatalf("%q: the fast path reads it; the reference refuses it: %v", text, err)
		}
		var wv [2]uint64
		var whas, wgiven [2]bool
		for i, key := range cmcdKeys {
			if m, ok := d.Get(key); ok {
				wv[i], whas[i] = keyValue(m)
				wgiven[i] = true
			}
		}
		if v != wv || has != whas || k.given != wgiven {
			t.Fatalf("%q: the fast path reads %v %v %v; the full parse %v %v %v", text, v, has, k.given, wv, whas, wgiven)
		}
	})
}
