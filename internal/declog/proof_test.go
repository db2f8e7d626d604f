package declog_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/waisteer/waisteer/internal/declog"
)

// Three hashes in standard base64, as a proof's JSON holds them: SHA-256
// of nothing, and two others.
const (
	h1 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	h2 = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
	h3 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

func hashes(t testing.TB, ss ...string) []tlog.Hash {
	var hs []tlog.Hash
	for _, s := range ss {
		hs = append(hs, unb64(t, s))
	}
	return hs
}

func sameHashes(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// proofJSON is a proof of n hashes as the log's routes write it.
func proofJSON(first, second string, a, b int64, n int) string {
	hs := make([]string, n)
	for i := range hs {
		hs[i] = `"` + h2 + `"`
	}
	return fmt.Sprintf(`{"%s":%d,"%s":%d,"proof":[%s]}`, first, a, second, b, strings.Join(hs, ","))
}

// TestParseInclusion: the JSON the inclusion route writes (RFC 6962
// §2.1.1's audit path, each hash in standard base64) is read, with or
// without the route's final newline; what it refuses, it says.
func TestParseInclusion(t *testing.T) {
	for _, tc := range []struct {
		json        string
		index, size int64
		proof       []tlog.Hash
	}{
		{`{"index":5,"size":8,"proof":["` + h1 + `","` + h2 + `","` + h3 + `"]}`, 5, 8, hashes(t, h1, h2, h3)},
		{`{"index":5,"size":8,"proof":["` + h1 + `","` + h2 + `","` + h3 + `"]}` + "\n", 5, 8, hashes(t, h1, h2, h3)},
		{`{"index":0,"size":1,"proof":[]}`, 0, 1, nil},
		{`{"index":9223372036854775806,"size":9223372036854775807,"proof":["` + h3 + `"]}`, 1<<63 - 2, 1<<63 - 1, hashes(t, h3)},
		{proofJSON("index", "size", 0, 1, 126), 0, 1, hashes(t, strings.Split(strings.Repeat(h2+" ", 126), " ")[:126]...)},
	} {
		p, err := declog.ParseInclusion([]byte(tc.json))
		if err != nil || p.Index != tc.index || p.Size != tc.size || !sameHashes(p.Proof, tc.proof) {
			t.Errorf("ParseInclusion(%.80q) = %+v, %v", tc.json, p, err)
		}
	}
	// The route writes with encoding/json: the layout is the one above.
	b, err := json.Marshal(declog.Inclusion{Index: 5, Size: 8, Proof: hashes(t, h1, h2, h3)})
	if want := `{"index":5,"size":8,"proof":["` + h1 + `","` + h2 + `","` + h3 + `"]}`; err != nil || string(b) != want {
		t.Errorf("json.Marshal(Inclusion) = %s, %v, want %s", b, err, want)
	}

	for _, tc := range []struct{ name, json, want string }{
		{"an unknown field", `{"index":0,"size":1,"proof":[],"leaf":"x"}`, "unknown field"},
		{"another object after", `{"index":0,"size":1,"proof":[]} {"index":0,"size":1,"proof":[]}`, "more after"},
		{"a word after", `{"index":0,"size":1,"proof":[]}x`, "more after"},
		{"a brace after", `{"index":0,"size":1,"proof":[]}}`, "more after"},
		{"a bracket after", `{"index":0,"size":1,"proof":[]}]`, "more after"},
		{"a number after", `{"index":0,"size":1,"proof":[]}1`, "more after"},
		{"index at the size", `{"index":1,"size":1,"proof":[]}`, "leaf 1 in a tree of 1"},
		{"index past the size", `{"index":9,"size":8,"proof":[]}`, "leaf 9 in a tree of 8"},
		{"an empty tree", `{"index":0,"size":0,"proof":[]}`, "leaf 0 in a tree of 0"},
		{"negative index", `{"index":-1,"size":8,"proof":[]}`, "leaf -1"},
		{"negative size", `{"index":0,"size":-8,"proof":[]}`, "tree of -8"},
		{"index past int64", `{"index":9223372036854775808,"size":8,"proof":[]}`, "inclusion proof"},
		{"a fractional index", `{"index":1.5,"size":8,"proof":[]}`, "inclusion proof"},
		{"an index in a string", `{"index":"1","size":8,"proof":[]}`, "inclusion proof"},
		{"a hash not in base64", `{"index":0,"size":8,"proof":["` + strings.Repeat("!", 43) + `="]}`, "hash"},
		{"a hash of 31 bytes", `{"index":0,"size":8,"proof":["` + base64.StdEncoding.EncodeToString(make([]byte, 31)) + `"]}`, "hash"},
		{"a hash of 33 bytes", `{"index":0,"size":8,"proof":["` + base64.StdEncoding.EncodeToString(make([]byte, 33)) + `"]}`, "hash"},
		{"a hash unpadded", `{"index":0,"size":8,"proof":["` + strings.TrimSuffix(h1, "=") + `"]}`, "hash"},
		{"a hash in hex", `{"index":0,"size":8,"proof":["` + strings.Repeat("ab", 32) + `"]}`, "hash"},
		{"a hash as a number", `{"index":0,"size":8,"proof":[1]}`, "inclusion proof"},
		{"a proof not a list", `{"index":0,"size":8,"proof":"` + h1 + `"}`, "inclusion proof"},
		{"127 hashes", proofJSON("index", "size", 0, 1, 127), "127 hashes"},
		{"over MaxProofBytes", `{"index":0,"size":1,"proof":[]}` + strings.Repeat(" ", declog.MaxProofBytes), "more than 16384"},
		{"a list", `[]`, "inclusion proof"},
		{"empty", ``, "inclusion proof"},
		{"cut", `{"index":0,"size":1,"proof":[`, "inclusion proof"},
		// What the decoder quotes from the input is clipped.
		{"a long unknown field", `{"` + strings.Repeat("a", 10000) + `":1}`, "unknown field"},
		{"a long number", `{"index":` + strings.Repeat("9", 10000) + `,"size":1,"proof":[]}`, "cannot unmarshal"},
	} {
		p, err := declog.ParseInclusion([]byte(tc.json))
		if err == nil {
			t.Errorf("%s: ParseInclusion = %+v, want an error", tc.name, p)
			continue
		}
		if !strings.HasPrefix(err.Error(), "declog: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseInclusion: %v, want an error that says %q", tc.name, err, tc.want)
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: ParseInclusion's error is %d bytes", tc.name, len(err.Error()))
		}
	}
}

// TestParseConsistency: likewise for the consistency route's JSON (RFC
// 6962 §2.1.2's proof), from 0 (nothing to prove) to the size.
func TestParseConsistency(t *testing.T) {
	for _, tc := range []struct {
		json       string
		from, size int64
		proof      []tlog.Hash
	}{
		{`{"from":3,"size":8,"proof":["` + h1 + `","` + h2 + `","` + h3 + `"]}`, 3, 8, hashes(t, h1, h2, h3)},
		{`{"from":3,"size":8,"proof":["` + h3 + `"]}` + "\n", 3, 8, hashes(t, h3)},
		{`{"from":0,"size":8,"proof":[]}`, 0, 8, nil},
		{`{"from":0,"size":0,"proof":[]}`, 0, 0, nil},
		{`{"from":8,"size":8,"proof":[]}`, 8, 8, nil},
		{proofJSON("from", "size", 1, 9223372036854775807, 126), 1, 1<<63 - 1, hashes(t, strings.Split(strings.Repeat(h2+" ", 126), " ")[:126]...)},
	} {
		p, err := declog.ParseConsistency([]byte(tc.json))
		if err != nil || p.From != tc.from || p.Size != tc.size || !sameHashes(p.Proof, tc.proof) {
			t.Errorf("ParseConsistency(%.80q) = %+v, %v", tc.json, p, err)
		}
	}
	b, err := json.Marshal(declog.Consistency{From: 3, Size: 8, Proof: hashes(t, h3)})
	if want := `{"from":3,"size":8,"proof":["` + h3 + `"]}`; err != nil || string(b) != want {
		t.Errorf("json.Marshal(Consistency) = %s, %v, want %s", b, err, want)
	}

	for _, tc := range []struct{ name, json, want string }{
		{"an unknown field", `{"from":0,"size":1,"proof":[],"root":"x"}`, "unknown field"},
		{"an inclusion proof", `{"index":0,"size":1,"proof":[]}`, "unknown field"},
		{"another object after", `{"from":0,"size":1,"proof":[]}{}`, "more after"},
		{"a brace after", `{"from":0,"size":1,"proof":[]}}`, "more after"},
		{"a bracket after", `{"from":0,"size":1,"proof":[]}]`, "more after"},
		{"from past the size", `{"from":9,"size":8,"proof":[]}`, "from 9 leaves to 8"},
		{"negative from", `{"from":-1,"size":8,"proof":[]}`, "from -1 leaves"},
		{"negative size", `{"from":0,"size":-1,"proof":[]}`, "to -1"},
		{"a hash not in base64", `{"from":1,"size":8,"proof":["` + strings.Repeat("*", 43) + `="]}`, "hash"},
		{"a hash of 31 bytes", `{"from":1,"size":8,"proof":["` + base64.StdEncoding.EncodeToString(make([]byte, 31)) + `"]}`, "hash"},
		{"127 hashes", proofJSON("from", "size", 1, 9223372036854775807, 127), "127 hashes"},
		{"over MaxProofBytes", `{"from":0,"size":1,"proof":[]}` + strings.Repeat("\n", declog.MaxProofBytes), "more than 16384"},
		{"empty", ``, "consistency proof"},
	} {
		p, err := declog.ParseConsistency([]byte(tc.json))
		if err == nil {
			t.Errorf("%s: ParseConsistency = %+v, want an error", tc.name, p)
			continue
		}
		if !strings.HasPrefix(err.Error(), "declog: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseConsistency: %v, want an error that says %q", tc.name, err, tc.want)
		}
	}
}

// TestProofsProve: proofs that tlog makes over refTree's hashes, written
// as the routes write them and read back, prove against refTree's roots.
func TestProofsProve(t *testing.T) {
	var leaves [][]byte
	for i := range 300 {
		leaves = append(leaves, fmt.Appendf(nil, "leaf %d", i))
	}
	ref := newRefTree(leaves)
	for _, n := range []int64{1, 2, 3, 7, 8, 255, 256, 257, 300} {
		root := ref.mth(0, n)
		for _, i := range []int64{0, 1, n / 2, n - 1} {
			if i >= n {
				continue
			}
			p, err := tlog.ProveRecord(n, i, ref.storedHashes())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(declog.Inclusion{Index: i, Size: n, Proof: p})
			got, err := declog.ParseInclusion(append(b, '\n'))
			if err != nil || got.Index != i || got.Size != n {
				t.Fatalf("ParseInclusion(%s) = %+v, %v", b, got, err)
			}
			if err := tlog.CheckRecord(got.Proof, n, root, i, ref.hashes[i]); err != nil {
				t.Errorf("leaf %d of %d: %v", i, n, err)
			}
		}
		for _, m := range []int64{1, n / 2, n - 1} {
			if m < 1 || m >= n {
				continue
			}
			p, err := tlog.ProveTree(n, m, ref.storedHashes())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(declog.Consistency{From: m, Size: n, Proof: p})
			got, err := declog.ParseConsistency(b)
			if err != nil || got.From != m || got.Size != n {
				t.Fatalf("ParseConsistency(%s) = %+v, %v", b, got, err)
			}
			if err := tlog.CheckTree(got.Proof, n, root, m, ref.mth(0, m)); err != nil {
				t.Errorf("%d from %d: %v", n, m, err)
			}
		}
	}
}

// TestProofOneSpelling: a proof is read in exactly the spelling the log
// writes it in; keys in other case, repeated, missing or out of order, and
// white space, are refused.
func TestProofOneSpelling(t *testing.T) {
	for _, b := range []string{
		`{"Index":0,"size":1,"proof":[]}`,
		`{"index":0,"index":0,"size":1,"proof":[]}`,
		`{"size":1,"index":0,"proof":[]}`,
		`{"index":0,"size":1}`,
		`{ "index":0,"size":1,"proof":[]}`,
		`{"index":0,"size":1,"proof":null}`,
	} {
		if _, err := declog.ParseInclusion([]byte(b)); err == nil {
			t.Errorf("%s: read", b)
		}
	}
	for _, b := range []string{`null`, `{}`, `{"from":0,"size":0,"proof":[]}` + "\n\n"} {
		if _, err := declog.ParseConsistency([]byte(b)); err == nil {
			t.Errorf("%s: read", b)
		}
	}
	if _, err := declog.ParseInclusion([]byte(`{"index":0,"size":1,"proof":[]}` + "\n")); err != nil {
		t.Errorf("the log's own spelling: %v", err)
	}
}
