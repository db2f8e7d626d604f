package conformance

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/verify"
)

// Result is what checking a file against this implementation gave.
type Result struct {
	Passed, Failed int
	Failures       []Failure
}

// Failure is a request or a vector on which this implementation disagrees
// with the file.
type Failure struct {
	What  string   // `request 3 "name"` or `vector 12 "name"`, from 0
	Diffs []string // each what differed: "member: file X, got Y"
}

// Write prints each disagreement on a line of its own, then the line
// `N passed, M failed`.
func (r *Result) Write(w io.Writer) error {
	for _, f := range r.Failures {
		for _, d := range f.Diffs {
			if _, err := fmt.Fprintf(w, "%s: %s\n", f.What, d); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "%d passed, %d failed\n", r.Passed, r.Failed)
	return err
}

// Check gives every request and vector of f to this implementation: each
// request's policy must read and its signature verify (§3.3, §3.4), and its
// report is read again from its target and headers (§4, with the policy's
// ids); each vector is verified (§9) with the file's room or its
// own; any difference from what the file states is a failure (§11: "a
// conforming verifier gives every request its report and every vector the
// outcome, the reason, the place and the facts the corpus states").
func Check(f *File) *Result {
	var c checker
	return c.check(f)
}

// checker checks a file. With memo set it remembers what each request and
// vector gave, so that files differing in one entry (the mutation tests')
// cost one entry each. Its keys are the identity of an entry's storage (its
// byte strings' first bytes and lengths, its pointers) and its strings,
// which a copy of a file shares with the file for every entry it does not
// change (nothing is ever changed in place); with byContent, a digest of
// everything the entry's result depends on, for files read anew.
type checker struct {
	memo      map[any][]string
	byContent bool
}

func (c *checker) check(f *File) *Result {
	res := &Result{}
	note := func(kind string, i int, name string, diffs []string) {
		if len(diffs) == 0 {
			res.Passed++
			return
		}
		res.Failed++
		res.Failures = append(res.Failures, Failure{What: fmt.Sprintf("%s %d %q", kind, i, name), Diffs: diffs})
	}
	for i := range f.Requests {
		q := &f.Requests[i]
		var key any
		if c.memo != nil {
			key = requestID(q)
			if c.byContent {
				key = requestDigest(q)
			}
		}
		note("request", i, q.Name, c.remember(key, func() []string { return checkRequest(q) }))
	}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		rm := f.Room
		if v.Room != nil {
			rm = *v.Room
		}
		var key any
		if c.memo != nil {
			key = vectorID(rm, v)
			if c.byContent {
				key = vectorDigest(rm, v)
			}
		}
		note("vector", i, v.Name, c.remember(key, func() []string { return checkVector(rm, v) }))
	}
	return res
}

func (c *checker) remember(key any, run func() []string) []string {
	if c.memo == nil {
		return run()
	}
	if d, ok := c.memo[key]; ok {
		return d
	}
	d := run()
	c.memo[key] = d
	return d
}

// checkRequest reads the request's report again (§4) and compares it.
func checkRequest(q *Request) []string {
	// The policy is a policy (§3): it reads and its signature verifies
	// (§3.4), so that no byte of it goes unchecked; the report needs only
	// its ids.
	p, err := policy.Parse(q.Policy)
	if err == nil {
		err = p.VerifySignature()
	}
	if err != nil {
		return []string{"policy: " + err.Error()}
	}
	h := http.Header{}
	for _, x := range q.Headers {
		h[x.Name] = append(h[x.Name], x.Value)
	}
	protocol, rep := report.Read(q.Target, h, p.IDs())
	got := reportFacts(rep)
	var diffs []string
	if int(protocol) != q.Protocol {
		diffs = append(diffs, fmt.Sprintf("protocol: file %d, got %d", q.Protocol, protocol))
	}
	diffs = differ(diffs, "report.pathway", optInt(q.Report.Pathway), optInt(got.Pathway))
	diffs = differ(diffs, "report.throughput", optString(q.Report.Throughput), optString(got.Throughput))
	diffs = differ(diffs, "report.buffer", optString(q.Report.Buffer), optString(got.Buffer))
	return diffs
}

// reportFacts is a report as the file writes it (COMPANION §8).
func reportFacts(r report.Report) Report {
	var out Report
	if r.Present&report.HasPathway != 0 {
		c := int(r.Pathway)
		out.Pathway = &c
	}
	if r.Present&report.HasThroughput != 0 {
		t := strconv.FormatUint(r.Throughput, 10)
		out.Throughput = &t
	}
	if r.Present&report.HasBuffer != 0 {
		b := strconv.FormatUint(r.Buffer, 10)
		out.Buffer = &b
	}
	return out
}

func optInt(v *int) string {
	if v == nil {
		return "null"
	}
	return strconv.Itoa(*v)
}

func optString(v *string) string {
	if v == nil {
		return "null"
	}
	return strconv.Quote(*v)
}

func differ(diffs []string, what, file, got string) []string {
	if file != got {
		diffs = append(diffs, fmt.Sprintf("%s: file %s, got %s", what, file, got))
	}
	return diffs
}

// checkVector verifies the vector (§9.1) and compares the outcome, and the
// reason and place of a refusal or every fact of an acceptance (§9.3).
func checkVector(rm Room, v *Vector) (diffs []string) {
	defer func() {
		// A verifier never panics (it refuses); were it to, the vector
		// fails with what happened rather than ending the check.
		if e := recover(); e != nil {
			diffs = append(diffs, fmt.Sprintf("the verifier panicked: %v", e))
		}
	}()
	facts, err := verify.Verify(verify.Input{
		Descriptor: rm.Descriptor, KeyLogHead: rm.KeyLogHead, Policy: v.Policy,
		Decision: v.Decision, Records: v.Records, Manifest: v.Manifest,
	})
	var re *reason.Error
	if err != nil && !errors.As(err, &re) {
		return []string{"the verifier failed with no refusal code: " + err.Error()}
	}
	switch {
	case v.Outcome == Accept && re != nil:
		return []string{fmt.Sprintf("outcome: file accept, got refuse: %v", re)}
	case v.Outcome == Refuse && re == nil:
		return []string{fmt.Sprintf("outcome: file refuse (%s at %s), got accept", v.Reason, v.Where)}
	case v.Outcome == Refuse:
		diffs = differ(diffs, "reason", strconv.Quote(v.Reason), strconv.Quote(string(re.Code)))
		diffs = differ(diffs, "where", strconv.Quote(v.Where), strconv.Quote(re.Place))
		if diffs != nil {
			diffs = append(diffs, "the verifier's refusal: "+re.Error())
		}
		return diffs
	}
	return compareFacts(v.Facts, facts)
}

// compareFacts compares every fact of §9.3 the file states with the
// verifier's.
func compareFacts(file, got *verify.Facts) []string {
	var d []string
	q := strconv.Quote
	d = differ(d, "facts.digest", q(file.Digest), q(got.Digest))
	d = differ(d, "facts.priority", q(strings.Join(file.Priority, ",")), q(strings.Join(got.Priority, ",")))
	d = differ(d, "facts.ttl", strconv.FormatUint(uint64(file.TTL), 10), strconv.FormatUint(uint64(got.TTL), 10))
	d = differ(d, "facts.reason", q(file.Reason), q(got.Reason))
	if len(file.Pathways) != len(got.Pathways) {
		d = append(d, fmt.Sprintf("facts.pathways: file %d, got %d", len(file.Pathways), len(got.Pathways)))
	} else {
		for i := range file.Pathways {
			f, g := &file.Pathways[i], &got.Pathways[i]
			p := fmt.Sprintf("facts.pathways[%d].", i)
			d = differ(d, p+"id", q(f.ID), q(g.ID))
			d = differ(d, p+"status", q(f.Status), q(g.Status))
			d = differ(d, p+"class", strconv.Itoa(f.Class), strconv.Itoa(g.Class))
			d = differ(d, p+"joules", q(f.Joules), q(g.Joules))
			d = differ(d, p+"delivery", q(f.Delivery), q(g.Delivery))
			d = differ(d, p+"limits.latency", strconv.FormatBool(f.Limits.Latency), strconv.FormatBool(g.Limits.Latency))
			d = differ(d, p+"limits.quality", strconv.FormatBool(f.Limits.Quality), strconv.FormatBool(g.Limits.Quality))
			d = differ(d, p+"limits.capacity", strconv.FormatBool(f.Limits.Capacity), strconv.FormatBool(g.Limits.Capacity))
		}
	}
	d = differ(d, "facts.manifest", q(file.Manifest), q(got.Manifest))
	d = differ(d, "facts.record_uri", q(file.RecordURI), q(got.RecordURI))
	d = differ(d, "facts.hls_tag", q(file.HLSTag), q(got.HLSTag))
	d = differ(d, "facts.dash_element", q(file.DASHElement), q(got.DASHElement))
	return d
}

// storage identifies a byte string by where it is stored.
type storage struct {
	first *byte
	n     int
	null  bool
}

func storageOf(b []byte) storage {
	if len(b) == 0 {
		return storage{null: b == nil}
	}
	return storage{first: &b[0], n: len(b)}
}

// requestKey and vectorKey are an entry's identity in the memo.
type requestKey struct {
	name, target       string
	policy             storage
	headers            *Header
	nheaders, protocol int
	pathway            *int
	throughput, buffer *string
}

func requestID(q *Request) requestKey {
	k := requestKey{name: q.Name, target: q.Target, policy: storageOf(q.Policy), nheaders: len(q.Headers),
		protocol: q.Protocol, pathway: q.Report.Pathway, throughput: q.Report.Throughput, buffer: q.Report.Buffer}
	if len(q.Headers) > 0 {
		k.headers = &q.Headers[0]
	}
	return k
}

type vectorKey struct {
	descriptor, head, policy, decision, manifest storage
	records                                      *[]byte
	nrecords                                     int
	facts                                        *verify.Facts
	outcome, reason, where                       string
}

func vectorID(rm Room, v *Vector) vectorKey {
	k := vectorKey{
		descriptor: storageOf(rm.Descriptor), head: storageOf(rm.KeyLogHead), policy: storageOf(v.Policy),
		decision: storageOf(v.Decision), manifest: storageOf(v.Manifest), nrecords: len(v.Records),
		facts: v.Facts, outcome: v.Outcome, reason: v.Reason, where: v.Where,
	}
	if len(v.Records) > 0 {
		k.records = &v.Records[0]
	}
	return k
}

// requestDigest and vectorDigest are SHA-256 over every input and stated
// result of an entry, each length-prefixed, a nil byte string told from an
// empty one.
func requestDigest(q *Request) [32]byte {
	h := sha256.New()
	put(h, []byte("request"))
	put(h, []byte(q.Name))
	put(h, q.Policy)
	put(h, []byte(q.Target))
	for _, x := range q.Headers {
		put(h, []byte(x.Name))
		put(h, []byte(x.Value))
	}
	put(h, []byte(strconv.Itoa(q.Protocol)))
	put(h, []byte(optInt(q.Report.Pathway)+" "+optString(q.Report.Throughput)+" "+optString(q.Report.Buffer)))
	return [32]byte(h.Sum(nil))
}

func vectorDigest(rm Room, v *Vector) [32]byte {
	h := sha256.New()
	put(h, []byte("vector"))
	put(h, rm.Descriptor)
	put(h, rm.KeyLogHead)
	put(h, v.Policy)
	put(h, v.Decision)
	for _, r := range v.Records {
		put(h, r)
	}
	put(h, v.Manifest)
	put(h, []byte(v.Outcome+" "+v.Reason+" "+v.Where))
	facts, _ := json.Marshal(v.Facts)
	put(h, facts)
	return [32]byte(h.Sum(nil))
}

func put(h hash.Hash, b []byte) {
	var n [9]byte
	if b != nil {
		n[0] = 1
	}
	binary.LittleEndian.PutUint64(n[1:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
