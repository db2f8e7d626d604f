package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

// Path is where the corpus lives in the repository, from its root (§11:
// `steering/vectors.json`).
const Path = "conformance/steering/vectors.json"

// Cases returns every vector of the corpus in the file's order: §11's
// accepted vectors, the others accepted, the refused of one defect, then
// those of two (Pairs).
func Cases() []Case {
	cs := Accepted()
	cs = append(cs, Extra()...)
	cs = append(cs, Refused()...)
	for _, p := range Pairs() {
		cs = append(cs, p.Make(true, true))
	}
	return cs
}

// Input is the verifier's input of a case.
func (c *Case) Input() verify.Input {
	return verify.Input{Descriptor: c.Descriptor, KeyLogHead: c.KeyLogHead, Policy: c.Policy,
		Decision: c.Decision, Records: c.Records, Manifest: c.Manifest}
}

// Build builds the corpus from its fixed seeds: the corpus room, every
// request with the report §4 reads from it, and every case with the outcome
// the verifier gives it (§9.3). It fails when a case's outcome is not the
// one it was built for (an accepted case refused, or a refusal with another
// code or place), or when two vectors or two requests share a name.
func Build() (*File, error) {
	base := build(scenario0())
	f := &File{Room: Room{Descriptor: base.Room.DescriptorBytes, KeyLogHead: base.Room.HeadBytes}}

	names := map[string]bool{}
	for _, q := range Requests() {
		if names[q.Name] {
			return nil, fmt.Errorf("conformance: two requests named %q", q.Name)
		}
		names[q.Name] = true
		p, err := policy.Parse(q.Policy)
		if err != nil {
			return nil, fmt.Errorf("conformance: request %q: %w", q.Name, err)
		}
		h := http.Header{}
		for _, x := range q.Headers {
			h[x.Name] = append(h[x.Name], x.Value)
		}
		protocol, rep := report.Read(q.Target, h, p.IDs())
		f.Requests = append(f.Requests, Request{Name: q.Name, Policy: q.Policy, Target: q.Target,
			Headers: q.Headers, Protocol: int(protocol), Report: reportFacts(rep)})
	}

	names = map[string]bool{}
	for _, c := range Cases() {
		if names[c.Name] {
			return nil, fmt.Errorf("conformance: two vectors named %q", c.Name)
		}
		names[c.Name] = true
		// The case as the file gives it, its records trimmed: the outcome
		// must be the one it was built for.
		facts, err := verify.Verify(c.Input())
		var re *reason.Error
		switch {
		case c.Want == "" && err != nil:
			return nil, fmt.Errorf("conformance: vector %q: built to be accepted, refused: %w", c.Name, err)
		case c.Want != "" && err == nil:
			return nil, fmt.Errorf("conformance: vector %q: built to be refused %s at %s, accepted", c.Name, c.Want, c.Where)
		case c.Want != "" && (!errors.As(err, &re) || re.Code != c.Want || re.Place != c.Where):
			return nil, fmt.Errorf("conformance: vector %q: built to be refused %s at %s, refused %w", c.Name, c.Want, c.Where, err)
		}
		v := Vector{Name: c.Name, Policy: c.Policy, Decision: c.Decision, Records: c.Records, Manifest: c.Manifest}
		if !bytes.Equal(c.Descriptor, f.Room.Descriptor) || !sameHead(c.KeyLogHead, f.Room.KeyLogHead) {
			v.Room = &Room{Descriptor: c.Descriptor, KeyLogHead: c.KeyLogHead}
		}
		if c.Want == "" {
			v.Outcome, v.Facts = Accept, facts
		} else {
			v.Outcome, v.Reason, v.Where = Refuse, string(c.Want), c.Where
		}
		f.Vectors = append(f.Vectors, v)
	}
	return f, nil
}

// sameHead tells a head given from none: nil is null in the file.
func sameHead(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Generate builds the corpus and writes it (Marshal): the same bytes on
// every run.
func Generate() ([]byte, error) {
	f, err := Build()
	if err != nil {
		return nil, err
	}
	return Marshal(f)
}

// module is the module path of the repository the corpus belongs to.
const module = "github.com/waisteer/waisteer"

// CheckoutPath finds the corpus of the checkout that holds dir: the
// directory, or the nearest above it, whose go.mod declares this module, and
// Path under it. Outside a checkout there is no corpus to find, and none to
// write over: an error says so.
func CheckoutPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && declares(b, module) {
			return filepath.Join(d, filepath.FromSlash(Path)), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside a checkout of %s, which holds the corpus at %s", abs, module, Path)
		}
	}
}

// declares reports whether a go.mod's module directive is mod.
func declares(gomod []byte, mod string) bool {
	for line := range strings.SplitSeq(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == mod {
			return true
		}
	}
	return false
}
