package conformance

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// small is a corpus file of one request and two vectors (one accepted, one
// refused) cut from the committed one: a seed, and a base for the reader's
// tests.
func small(t testing.TB, f *File) []byte {
	t.Helper()
	g := &File{Room: f.Room, Requests: f.Requests[2:3]}
	for _, v := range f.Vectors {
		if v.Name == "room with no origin: no figure, client held" || v.Name == "policy: version 2" {
			g.Vectors = append(g.Vectors, v)
		}
	}
	b, err := Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseRefuses: the reader takes COMPANION §8's shape and nothing else,
// with a *FormatError naming where (never a panic).
func TestParseRefuses(t *testing.T) {
	base := string(small(t, committed(t)))
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("%q is not in the small file", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	cases := map[string]string{
		"empty":                            "",
		"not JSON":                         "vectors.json: garbage",
		"an array":                         "[]",
		"truncated":                        base[:len(base)/2],
		"data after the value":             base + "{}",
		"not UTF-8":                        edit(`"name": "`, "\"name\": \"\xff"),
		"a member twice":                   edit(`"format": "wai-steering-vectors/1",`, `"format": "wai-steering-vectors/1", "format": "wai-steering-vectors/1",`),
		"another format":                   edit(Format, "wai-steering-vectors/2"),
		"an unknown member":                edit(`"format":`, `"comment": "x", "format":`),
		"a member in capitals":             edit(`"format":`, `"Format":`),
		"a member missing":                 edit(`"headers": {},`, ``),
		"hexadecimal in capitals":          edit(`"decision": "575344`, `"decision": "575344AB`),
		"an odd count of digits":           edit(`"decision": "575344`, `"decision": "57534`),
		"a protocol of 3":                  edit(`"protocol": 1`, `"protocol": 3`),
		"a protocol as a string":           edit(`"protocol": 1`, `"protocol": "1"`),
		"a protocol of 1.0":                edit(`"protocol": 1`, `"protocol": 1.0`),
		"a throughput as a number":         edit(`"throughput": "5000000"`, `"throughput": 5000000`),
		"a throughput with a leading zero": edit(`"throughput": "5000000"`, `"throughput": "05000000"`),
		"a throughput of 2^64":             edit(`"throughput": "5000000"`, `"throughput": "18446744073709551616"`),
		"a null name":                      edit(`"name": "hls: quoted pathway and throughput"`, `"name": null`),
		"a refusal with facts":             edit(`"outcome": "refuse",`, `"outcome": "refuse", "facts": {},`),
		"an acceptance with a reason":      edit(`"outcome": "accept",`, `"outcome": "accept", "reason": "bad_key",`),
		"an outcome of neither":            edit(`"outcome": "refuse"`, `"outcome": "refused"`),
		"a refusal with no reason":         edit(`"reason": "unknown_version",`, ``),
		"a ttl of 2^32":                    edit(`"ttl": 300`, `"ttl": 4294967296`),
		"a negative ttl":                   edit(`"ttl": 300`, `"ttl": -300`),
		"joules with a sign":               edit(`"joules": "0"`, `"joules": "+0"`),
		"a limit as a number":              edit(`"latency": true`, `"latency": 1`),
		"a header not a string":            edit(`"headers": {}`, `"headers": {"CMCD-Request": 5}`),
		"deep nesting":                     strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
	}
	for name, text := range cases {
		_, err := Parse([]byte(text))
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FormatError", name, err)
		}
	}
	if _, err := Parse([]byte(base)); err != nil {
		t.Fatalf("the small file: %v", err)
	}
}

// TestParseAnyLayout: a file of the format in another layout (no white
// space, members in another order) reads as the same corpus.
func TestParseAnyLayout(t *testing.T) {
	base := small(t, committed(t))
	var compact bytes.Buffer
	if err := compactJSON(&compact, base); err != nil {
		t.Fatal(err)
	}
	// The format last instead of first.
	head := []byte(`{"format":"wai-steering-vectors/1",`)
	rest, ok := bytes.CutPrefix(compact.Bytes(), head)
	if !ok {
		t.Fatalf("the compact file begins %.40s", compact.Bytes())
	}
	reordered := append(append([]byte("{"), rest[:len(rest)-1]...), `,"format":"wai-steering-vectors/1"}`...)
	for _, b := range [][]byte{compact.Bytes(), reordered} {
		f, err := Parse(b)
		if err != nil {
			t.Fatalf("%v\n%.200s", err, b)
		}
		again, err := Marshal(f)
		if err != nil || !bytes.Equal(again, base) {
			t.Errorf("read back as another corpus: %v", err)
		}
	}
}

// FuzzParse: the corpus reader never panics, and whatever it reads it writes
// as a file that reads as the same corpus and writes the same bytes again.
// Checking what it read never panics either.
func FuzzParse(f *testing.F) {
	// Small seeds of every shape: the fuzzer minimizes what it finds, and a
	// large input takes it minutes to minimize.
	f.Add([]byte(`{"format":"wai-steering-vectors/1","room":{"descriptor":"","key_log_head":null},"requests":[],"vectors":[]}`))
	f.Add([]byte(`{"format":"wai-steering-vectors/1","room":{"descriptor":"00","key_log_head":""},` +
		`"requests":[{"name":"x","policy":"5753503101","target":"/?_HLS_pathway=a&CMCD=bl%3D1","headers":{"CMCD-Request":"bl=1"},"protocol":1,` +
		`"report":{"pathway":null,"throughput":null,"buffer":"1"}}],` +
		`"vectors":[{"name":"v","policy":"575350","decision":"","records":["00"],"manifest":null,"outcome":"refuse","reason":"truncated","where":"policy"}]}`))
	f.Add([]byte(`{"format":"wai-steering-vectors/1","room":{"descriptor":"8240","key_log_head":null},"requests":[],` +
		`"vectors":[{"name":"a","room":{"descriptor":"","key_log_head":"82"},"policy":"","decision":"575344","records":[],"manifest":"{}","outcome":"accept",` +
		`"facts":{"digest":"00","priority":["a"],"ttl":30,"reason":"rank","pathways":[{"id":"a","status":"figure","class":2,"joules":"1","delivery":"2",` +
		`"limits":{"latency":true,"quality":false,"capacity":true}}],"manifest":"{}","record_uri":"u","hls_tag":"h","dash_element":"d"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%v is not a *FormatError", err)
			}
			return
		}
		out, err := Marshal(g)
		if err != nil {
			return // a request with a header twice, which JSON cannot hold twice either
		}
		h, err := Parse(out)
		if err != nil {
			t.Fatalf("what Marshal wrote does not read: %v", err)
		}
		again, err := Marshal(h)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("written twice, two texts")
		}
		Check(g)
	})
}
