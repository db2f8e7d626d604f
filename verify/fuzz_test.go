package verify_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waisteer/waisteer/conformance"
	"github.com/waisteer/waisteer/internal/fuzzing"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/verify"
)

// TestMain keeps the inputs the fuzzing engine finds as it finds them
// (fuzzing.SignedInputs): FuzzVerify's are signed.
func TestMain(m *testing.M) { fuzzing.Main(m) }

// fuzzBase is the accepted vector the corpus builds its refusals from: its
// room, key log head and records stand under every fuzzed input.
const fuzzBase = "base of the refused vectors"

// fuzzSeed is a vector of the corpus as FuzzVerify's arguments: its policy,
// decision and manifest, and the one record it gives that the base does not
// (the base's first when it gives none), with the code it is refused with
// ("" for accepted).
type fuzzSeed struct {
	name, reason            string
	pol, dec, rec, manifest []byte
}

// fuzzData is the base's input and the seeds.
type fuzzData struct {
	base  verify.Input
	seeds []fuzzSeed
}

var fuzzCorpus = sync.OnceValues(func() (*fuzzData, error) {
	// The committed corpus (COMPANION §8) holds signed vectors: reading it
	// costs each fuzzing process no signing and no scenario, so the workers
	// fuzz from their first second.
	b, err := os.ReadFile(filepath.Join("..", conformance.Path))
	if err != nil {
		return nil, err
	}
	f, err := conformance.Parse(b)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(f.Vectors, func(v conformance.Vector) bool { return v.Name == fuzzBase })
	if i < 0 {
		return nil, errors.New("the corpus has no vector " + fuzzBase)
	}
	bv := f.Vectors[i]
	base := verify.Input{Descriptor: f.Room.Descriptor, KeyLogHead: f.Room.KeyLogHead, Policy: bv.Policy,
		Decision: bv.Decision, Records: bv.Records, Manifest: bv.Manifest}
	seeds := []fuzzSeed{{bv.Name, "", bv.Policy, bv.Decision, bv.Records[0], bv.Manifest}}
	// One refusal of each code that bytes of the policy, the decision, a
	// record or the manifest can give under the base's room: a vector of
	// another room, or one that leaves out or changes more than one of the
	// base's records, would not be refused the same way here.
	seen := map[string]bool{}
	for _, v := range f.Vectors {
		if v.Outcome != conformance.Refuse || v.Room != nil || seen[v.Reason] || len(v.Records) < len(bv.Records) {
			continue
		}
		var extra [][]byte
		for _, r := range v.Records {
			if !slices.ContainsFunc(bv.Records, func(x []byte) bool { return bytes.Equal(x, r) }) {
				extra = append(extra, r)
			}
		}
		if len(extra) > 1 {
			continue
		}
		rec := bv.Records[0]
		if len(extra) == 1 {
			rec = extra[0]
		}
		seen[v.Reason] = true
		seeds = append(seeds, fuzzSeed{v.Name, v.Reason, v.Policy, v.Decision, rec, v.Manifest})
	}
	return &fuzzData{base, seeds}, nil
})

// fuzzInput is the verifier's input for FuzzVerify's arguments: the base's
// room and records, with rec before them.
func fuzzInput(base verify.Input, pol, dec, rec, manifest []byte) verify.Input {
	in := base
	in.Policy, in.Decision, in.Manifest = pol, dec, manifest
	in.Records = append([][]byte{rec}, base.Records...)
	return in
}

// TestFuzzVerifySeeds: FuzzVerify's seeds are what they stand for: the base
// is accepted and each refusal is refused with its vector's code (§10), so
// the fuzzer starts from both sides of every check they reach.
func TestFuzzVerifySeeds(t *testing.T) {
	fd, err := fuzzCorpus()
	if err != nil {
		t.Fatal(err)
	}
	base, seeds := fd.base, fd.seeds
	places := map[string]bool{}
	for _, s := range seeds {
		_, err := verify.Verify(fuzzInput(base, s.pol, s.dec, s.rec, s.manifest))
		if got := string(reason.Of(err)); got != s.reason || (s.reason == "") != (err == nil) {
			t.Errorf("%s: %v, want %q", s.name, err, s.reason)
		}
		var re *reason.Error
		if errors.As(err, &re) {
			places[strings.Split(re.Place, "/")[0]] = true
		}
	}
	// The refusals reach every check past the room's (COMPANION §7).
	for _, p := range []string{"policy", "decision", "evidence", "pathway", "output", "manifest"} {
		if !places[p] {
			t.Errorf("no seed is refused at %s", p)
		}
	}
}

// FuzzVerify: whatever bytes stand for the policy, the decision, a record or
// the manifest, the verifier never panics, and refuses only with a code of
// §10 (or one it reuses) at a place of COMPANION §7.
func FuzzVerify(f *testing.F) {
	fd, err := fuzzCorpus()
	if err != nil {
		f.Fatal(err)
	}
	base, seeds := fd.base, fd.seeds
	for _, s := range seeds {
		f.Add(s.pol, s.dec, s.rec, s.manifest)
	}
	codes := map[reason.Code]bool{}
	for _, c := range append(append([]reason.Code{}, reason.Extension...), reason.Reused...) {
		codes[c] = true
	}
	f.Fuzz(func(t *testing.T, pol, dec, rec, manifest []byte) {
		_, err := verify.Verify(fuzzInput(base, pol, dec, rec, manifest))
		if err == nil {
			return
		}
		var re *reason.Error
		if !errors.As(err, &re) || !codes[re.Code] || re.Place == "" {
			t.Fatalf("not a refusal of §10 with a place: %v", err)
		}
	})
}
