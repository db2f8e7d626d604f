package conformance

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/verify"
)

// A mutant is a copy of the corpus with one change, and the entry that the
// change must make fail ("" when any may: a change to the file's room).
type mutant struct {
	what  string
	kind  string // what kind of change, for the tally
	entry string
	file  *File
}

// kindOf is the field a change names: "policy byte 3" is "policy",
// "facts.pathways[1].class" is "facts.pathways".
func kindOf(what string) string {
	return strings.FieldsFunc(what, func(r rune) bool { return r == ' ' || r == '[' })[0]
}

// flip is b with byte i changed (its low bit flipped).
func flip(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 1
	return c
}

// spread is up to three positions of a field of n bytes: first, middle, last.
func spread(n int) []int {
	if n == 0 {
		return nil
	}
	return slices.Compact([]int{0, n / 2, n - 1})
}

func inc(dec string) string {
	v, _ := new(big.Int).SetString(dec, 10)
	return v.Add(v, big.NewInt(1)).String()
}

// usedRecords are the indices of the records a vector's verification reads:
// for each digest its decision names, the first record given with it
// (COMPANION §6). A change to any other record changes no outcome.
func usedRecords(v *Vector) []int {
	d, err := decision.Parse(v.Decision)
	if err != nil {
		return nil
	}
	var used []int
	for _, p := range d.Pathways {
		for _, h := range p.Records {
			for i, r := range v.Records {
				if evidence.NamedDigest(r) == h {
					if !slices.Contains(used, i) {
						used = append(used, i)
					}
					break
				}
			}
		}
	}
	slices.Sort(used)
	return used
}

func cloneFacts(f *verify.Facts) *verify.Facts {
	c := *f
	c.Priority = slices.Clone(f.Priority)
	c.Pathways = slices.Clone(f.Pathways)
	return &c
}

// anotherPlace is a place of COMPANION §7 other than where.
func anotherPlace(where string) string {
	var p, i int
	if n, _ := fmt.Sscanf(where, "evidence/%d/%d", &p, &i); n == 2 {
		return fmt.Sprintf("evidence/%d/%d", p, i+1)
	}
	if n, _ := fmt.Sscanf(where, "pathway/%d", &p); n == 1 {
		return fmt.Sprintf("pathway/%d", p+1)
	}
	order := []string{"room", "policy", "decision", "output", "manifest"}
	return order[(slices.Index(order, where)+1)%len(order)]
}

// mutants makes the mutants of f: in each accepted vector, a byte of its
// policy, its decision, the records it reads, its manifest and its own room
// flipped, each fact altered and the outcome turned; in each refused vector
// the reason, the place and the outcome altered; in each request the
// protocol and each value of the report altered; and the file's room.
func mutants(t *testing.T, f *File) []mutant {
	var ms []mutant
	codes := constCodes(t)
	var someFacts *verify.Facts
	for _, v := range f.Vectors {
		if v.Outcome == Accept {
			someFacts = v.Facts
			break
		}
	}
	vector := func(i int, what string, edit func(v *Vector)) {
		g := *f
		g.Vectors = slices.Clone(f.Vectors)
		edit(&g.Vectors[i])
		ms = append(ms, mutant{what: fmt.Sprintf("vector %d %q: %s", i, f.Vectors[i].Name, what), kind: "vector " + kindOf(what), entry: fmt.Sprintf("vector %d %q", i, f.Vectors[i].Name), file: &g})
	}
	request := func(i int, what string, edit func(q *Request)) {
		g := *f
		g.Requests = slices.Clone(f.Requests)
		edit(&g.Requests[i])
		ms = append(ms, mutant{what: fmt.Sprintf("request %d %q: %s", i, f.Requests[i].Name, what), kind: "request " + kindOf(what), entry: fmt.Sprintf("request %d %q", i, f.Requests[i].Name), file: &g})
	}
	facts := func(i int, what string, edit func(x *verify.Facts)) {
		vector(i, "facts."+what, func(v *Vector) {
			v.Facts = cloneFacts(v.Facts)
			edit(v.Facts)
		})
	}

	for i, v := range f.Vectors {
		if v.Outcome == Refuse {
			vector(i, "reason", func(v *Vector) {
				v.Reason = string(codes[(codeIndex(codes, v.Reason)+1)%len(codes)])
			})
			vector(i, "where", func(v *Vector) { v.Where = anotherPlace(v.Where) })
			vector(i, "outcome", func(v *Vector) { v.Outcome, v.Reason, v.Where, v.Facts = Accept, "", "", someFacts })
			continue
		}
		for _, k := range spread(len(v.Policy)) {
			vector(i, fmt.Sprintf("policy byte %d", k), func(v *Vector) { v.Policy = flip(v.Policy, k) })
		}
		for _, k := range spread(len(v.Decision)) {
			vector(i, fmt.Sprintf("decision byte %d", k), func(v *Vector) { v.Decision = flip(v.Decision, k) })
		}
		used := usedRecords(&v)
		for n, j := range spread(len(used)) {
			r := used[j]
			k := (97*n + 13*r) % len(v.Records[r])
			vector(i, fmt.Sprintf("record %d byte %d", r, k), func(v *Vector) {
				v.Records = slices.Clone(v.Records)
				v.Records[r] = flip(v.Records[r], k)
			})
		}
		for _, k := range spread(len(v.Manifest)) {
			vector(i, fmt.Sprintf("manifest byte %d", k), func(v *Vector) { v.Manifest = flip(v.Manifest, k) })
		}
		if v.Room != nil {
			vector(i, "room descriptor", func(v *Vector) {
				v.Room = &Room{Descriptor: flip(v.Room.Descriptor, len(v.Room.Descriptor)/2), KeyLogHead: v.Room.KeyLogHead}
			})
			if d, err := room.ParseDescriptor(v.Room.Descriptor); err == nil && d.Origin != nil && len(v.Room.KeyLogHead) > 0 {
				vector(i, "room key log head", func(v *Vector) {
					v.Room = &Room{Descriptor: v.Room.Descriptor, KeyLogHead: flip(v.Room.KeyLogHead, len(v.Room.KeyLogHead)/2)}
				})
			}
		}
		vector(i, "outcome", func(v *Vector) { v.Outcome, v.Reason, v.Where, v.Facts = Refuse, "decision_mismatch", "output", nil })
		facts(i, "digest", func(x *verify.Facts) {
			x.Digest = strings.Replace(x.Digest, x.Digest[:1], map[bool]string{true: "1", false: "0"}[x.Digest[0] == '0'], 1)
		})
		facts(i, "priority", func(x *verify.Facts) { slices.Reverse(x.Priority) })
		facts(i, "ttl", func(x *verify.Facts) { x.TTL++ })
		facts(i, "reason", func(x *verify.Facts) { x.Reason = map[bool]string{true: "hold", false: "rank"}[x.Reason == "rank"] })
		facts(i, "manifest", func(x *verify.Facts) { x.Manifest += " " })
		facts(i, "record_uri", func(x *verify.Facts) { x.RecordURI = strings.ToUpper(x.RecordURI) })
		facts(i, "hls_tag", func(x *verify.Facts) { x.HLSTag = strings.Replace(x.HLSTag, "PATHWAY-ID", "PATHWAY", 1) })
		facts(i, "dash_element", func(x *verify.Facts) {
			x.DASHElement = strings.Replace(x.DASHElement, "queryBeforeStart", "querybeforestart", 1)
		})
		facts(i, "pathways (one left out)", func(x *verify.Facts) { x.Pathways = x.Pathways[1:] })
		p := i % len(v.Facts.Pathways)
		pw := func(what string, edit func(x *verify.PathwayFacts)) {
			facts(i, fmt.Sprintf("pathways[%d].%s", p, what), func(x *verify.Facts) { edit(&x.Pathways[p]) })
		}
		pw("id", func(x *verify.PathwayFacts) { x.ID += "x" })
		pw("status", func(x *verify.PathwayFacts) {
			x.Status = map[bool]string{true: "stale", false: "figure"}[x.Status == "figure"]
		})
		pw("class", func(x *verify.PathwayFacts) { x.Class = (x.Class + 1) % 6 })
		pw("joules", func(x *verify.PathwayFacts) { x.Joules = inc(x.Joules) })
		pw("delivery", func(x *verify.PathwayFacts) { x.Delivery = inc(x.Delivery) })
		pw("limits.latency", func(x *verify.PathwayFacts) { x.Limits.Latency = !x.Limits.Latency })
		pw("limits.quality", func(x *verify.PathwayFacts) { x.Limits.Quality = !x.Limits.Quality })
		pw("limits.capacity", func(x *verify.PathwayFacts) { x.Limits.Capacity = !x.Limits.Capacity })
	}

	for i := range f.Requests {
		n := len(f.Requests[i].Policy)
		request(i, fmt.Sprintf("policy byte %d", (7*i)%n), func(q *Request) { q.Policy = flip(q.Policy, (7*i)%n) })
		request(i, "protocol", func(q *Request) { q.Protocol = 3 - q.Protocol })
		request(i, "report.pathway", func(q *Request) {
			c := 0
			if q.Report.Pathway != nil {
				c = *q.Report.Pathway + 1
			}
			q.Report.Pathway = &c
		})
		altered := func(s *string) *string {
			v := "0"
			if s != nil {
				v = inc(*s)
			}
			return &v
		}
		request(i, "report.throughput", func(q *Request) { q.Report.Throughput = altered(q.Report.Throughput) })
		request(i, "report.buffer", func(q *Request) { q.Report.Buffer = altered(q.Report.Buffer) })
	}

	for _, what := range []string{"descriptor", "key log head"} {
		g := *f
		if what == "descriptor" {
			g.Room.Descriptor = flip(f.Room.Descriptor, len(f.Room.Descriptor)/2)
		} else {
			g.Room.KeyLogHead = flip(f.Room.KeyLogHead, len(f.Room.KeyLogHead)/2)
		}
		ms = append(ms, mutant{what: "the file's room " + what, kind: "file room", file: &g})
	}
	return ms
}

func codeIndex(codes []reason.Code, s string) int { return slices.Index(codes, reason.Code(s)) }

// TestMutantsFail: every copy of the corpus with one change fails the check
// (§11: "requires every mutated copy of the corpus to fail"), and fails on
// the entry changed. Entries are checked independently, so the checker
// remembers what each unchanged entry gave.
func TestMutantsFail(t *testing.T) {
	f := committed(t)
	c := &checker{memo: map[any][]string{}}
	if res := c.check(f); res.Failed != 0 {
		t.Fatalf("the corpus itself fails: %+v", res.Failures)
	}
	ms := mutants(t, f)
	kinds := map[string]int{}
	for _, m := range ms {
		res := c.check(m.file)
		failed := res.Failed > 0
		if m.entry != "" {
			failed = len(res.Failures) == 1 && res.Failures[0].What == m.entry
		}
		if !failed {
			t.Errorf("mutant %s: %d passed, %d failed %v", m.what, res.Passed, res.Failed, res.Failures)
		}
		kinds[m.kind]++
	}
	t.Logf("%d mutants, each failed: %v", len(ms), kinds)
	if len(ms) < 1000 {
		t.Errorf("only %d mutants", len(ms))
	}
}

// TestTextMutantsFail: changes to the file's text go through the reader
// too: each either is not of the format or fails the check, as `waisteer
// conformance verify` reports it.
func TestTextMutantsFail(t *testing.T) {
	raw := committedRaw(t)
	f := committed(t)
	var first *Vector
	for i := range f.Vectors {
		if f.Vectors[i].Outcome == Accept {
			first = &f.Vectors[i]
			break
		}
	}
	pol := fmt.Sprintf("%x", first.Policy)
	edits := map[string][2]string{
		"a hex digit of a policy":     {pol, pol[:100] + string("01"[boolInt(pol[100] == '0')]) + pol[101:]},
		"an accepted outcome refused": {`"outcome": "accept"`, `"outcome": "refuse"`},
		"a refusal's place":           {`"where": "policy"`, `"where": "decision"`},
		"a request's protocol":        {`"protocol": 1`, `"protocol": 2`},
		"a reason code":               {`"reason": "bad_key"`, `"reason": "bad_signature"`},
		"a header's value":            {`"CMCD-Request": "bl=700"`, `"CMCD-Request": "bl=701"`},
		"the format":                  {Format, "wai-steering-vectors/2"},
	}
	c := &checker{memo: map[any][]string{}, byContent: true}
	if res := c.check(f); res.Failed != 0 {
		t.Fatalf("the corpus itself fails: %+v", res.Failures)
	}
	for what, e := range edits {
		if !bytes.Contains(raw, []byte(e[0])) {
			t.Fatalf("%s: %q is not in the file", what, e[0])
		}
		b := bytes.Replace(raw, []byte(e[0]), []byte(e[1]), 1)
		g, err := Parse(b)
		if err != nil {
			continue
		}
		if res := c.check(g); res.Failed == 0 {
			t.Errorf("%s: the mutant passes", what)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
