package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
)

// committedPath is the corpus in the repository, from this package.
const committedPath = "steering/vectors.json"

var (
	committedOnce  sync.Once
	committedBytes []byte
	committedErr   error
)

func committedRaw(t *testing.T) []byte { return committedFile(t) }

func committedFile(t testing.TB) []byte {
	t.Helper()
	committedOnce.Do(func() { committedBytes, committedErr = os.ReadFile(committedPath) })
	if committedErr != nil {
		t.Fatal(committedErr)
	}
	return committedBytes
}

// compactJSON writes b with no white space outside strings.
func compactJSON(w *bytes.Buffer, b []byte) error { return json.Compact(w, b) }

// committed is the committed corpus, read (each call its own copy).
func committed(t *testing.T) *File {
	t.Helper()
	f, err := Parse(committedRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRegenerate: the corpus regenerates from its fixed seeds byte for byte
// (§11: "written from fixed seeds"; the test that the file regenerates).
func TestRegenerate(t *testing.T) {
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	want := committedRaw(t)
	if !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && i < len(want) && b[i] == want[i] {
			i++
		}
		t.Fatalf("the regenerated corpus (%d bytes) differs from %s (%d bytes) from byte %d: run `go run ./cmd/waisteer conformance gen`",
			len(b), committedPath, len(want), i)
	}
}

// TestCommittedPasses: this implementation gives every request of the
// committed corpus its report and every vector its outcome, reason, place
// and facts (§11).
func TestCommittedPasses(t *testing.T) {
	f := committed(t)
	res := Check(f)
	var out bytes.Buffer
	res.Write(&out)
	if res.Failed != 0 || res.Passed != len(f.Requests)+len(f.Vectors) {
		t.Fatalf("%s", out.String())
	}
	if len(f.Requests) < 24 || len(f.Vectors) < 60 {
		t.Errorf("%d requests and %d vectors: the corpus is thin", len(f.Requests), len(f.Vectors))
	}
}

// TestMarshalRoundTrip: the committed file is what Marshal writes of what
// Parse reads of it (COMPANION §8's one shape, written one way).
func TestMarshalRoundTrip(t *testing.T) {
	b, err := Marshal(committed(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, committedRaw(t)) {
		t.Fatal("Marshal(Parse(file)) is not the file")
	}
}

// TestRecordsTrimmed: a vector gives only records its decision names, but
// where the case gives others on purpose; and what was trimmed cannot change
// an outcome: each case, given besides its own records every record of the
// corpus its decision does not name, verifies as it was built (COMPANION §6:
// a named record is found by its digest, so no other record is read).
func TestRecordsTrimmed(t *testing.T) {
	cases := Cases()
	seen := map[string]bool{}
	var pool [][]byte
	for _, c := range cases {
		for _, r := range c.Records {
			if !seen[string(r)] {
				seen[string(r)] = true
				pool = append(pool, r)
			}
		}
	}
	for _, c := range cases {
		d, err := decision.Parse(c.Decision)
		if err != nil {
			continue
		}
		named := map[sig.Hash]bool{}
		for _, p := range d.Pathways {
			for _, h := range p.Records {
				named[h] = true
			}
		}
		given := 0
		for _, r := range c.Records {
			if named[evidence.NamedDigest(r)] {
				given++
			}
		}
		if !c.keep && given != len(c.Records) {
			t.Errorf("%q: %d records given, %d of them named", c.Name, len(c.Records), given)
		}
		wide := c
		wide.Records = slices.Clone(c.Records)
		for _, r := range pool {
			if !named[evidence.NamedDigest(r)] {
				wide.Records = append(wide.Records, r)
			}
		}
		_, err = verify.Verify(wide.Input())
		var re *reason.Error
		if reason.Of(err) != c.Want || c.Want != "" && (!errors.As(err, &re) || re.Place != c.Where) {
			t.Errorf("%q with %d more records: %v; built for %q at %q", c.Name, len(wide.Records)-len(c.Records), err, c.Want, c.Where)
		}
	}
}
