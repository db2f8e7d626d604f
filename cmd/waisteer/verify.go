package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
)

func init() {
	register(&command{
		name:    "verify",
		summary: "verify a steering decision against its room, policy and records (§9)",
		run:     runVerify,
	})
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// outcome is a vector's outcome (COMPANION §8): what `waisteer verify`
// prints.
type outcome struct {
	Outcome string        `json:"outcome"`
	Reason  string        `json:"reason,omitempty"`
	Where   string        `json:"where,omitempty"`
	Facts   *verify.Facts `json:"facts,omitempty"`
}

func runVerify(e *env, args []string) error {
	fs := newFlags(e, "verify", "-room FILE [-keylog FILE] -policy FILE -decision FILE [-records PATH]... [-manifest FILE]\n       waisteer verify -url DECISION_URL [-authority HEX] [-manifest FILE]")
	roomFile := fs.String("room", "", "the room descriptor (CBOR)")
	keylogFile := fs.String("keylog", "", "the head of the room authority's key log (CBOR); none when omitted")
	policyFile := fs.String("policy", "", "the steering policy (WSP1)")
	decisionFile := fs.String("decision", "", "the steering decision (WSD1)")
	manifestFile := fs.String("manifest", "", "the steering manifest served with the decision; not checked when omitted")
	var recordPaths listFlag
	fs.Var(&recordPaths, "records", "a file of per-hop records (WMH1) back to back, or a directory of such files; repeatable")
	decisionURL := fs.String("url", "", "the decision's `URL` (the manifest's science.transaction.wai-decision): fetch it and all it needs from its server")
	authorityHex := fs.String("authority", "", "with -url: the room authority's public key, 64 hexadecimal digits; refuse a room of any other")
	timeout := fs.Duration("timeout", 30*time.Second, "with -url: how long the fetches may take in all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	var in verify.Input
	var err error
	if *decisionURL != "" {
		if *roomFile != "" || *keylogFile != "" || *policyFile != "" || *decisionFile != "" || len(recordPaths) > 0 {
			return usagef("-url fetches the room, the key log, the policy, the decision and the records: give none of them as files")
		}
		var pin *sig.PublicKey
		if *authorityHex != "" {
			k, err := sig.ParsePublicKey(*authorityHex)
			if err != nil {
				return usagef("-authority: %v", err)
			}
			pin = &k
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		in, err = fetchInput(ctx, newFetchClient(), *decisionURL, pin)
		if err != nil {
			return err
		}
		if *manifestFile != "" {
			if in.Manifest, err = os.ReadFile(*manifestFile); err != nil {
				return err
			}
		}
		return printVerdict(e, in)
	}
	if *authorityHex != "" {
		return usagef("-authority goes with -url")
	}
	if *roomFile == "" || *policyFile == "" || *decisionFile == "" {
		return usagef("-room, -policy and -decision are required, or -url")
	}
	read := func(path string) []byte {
		if err != nil || path == "" {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(path)
		if b == nil && err == nil {
			b = []byte{}
		}
		return b
	}
	in.Descriptor = read(*roomFile)
	in.KeyLogHead = read(*keylogFile)
	in.Policy = read(*policyFile)
	in.Decision = read(*decisionFile)
	in.Manifest = read(*manifestFile)
	if err != nil {
		return err
	}
	for _, p := range recordPaths {
		rs, err := readRecords(p)
		if err != nil {
			return err
		}
		in.Records = append(in.Records, rs...)
	}
	return printVerdict(e, in)
}

// printVerdict verifies in and prints the outcome as a corpus vector writes
// it (COMPANION §8), exiting 1 on a refusal.
func printVerdict(e *env, in verify.Input) error {
	facts, verr := verify.Verify(in)
	out := outcome{Outcome: "accept", Facts: facts}
	var re *reason.Error
	if verr != nil {
		if !errors.As(verr, &re) {
			return verr
		}
		out = outcome{Outcome: "refuse", Reason: string(re.Code), Where: re.Place}
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if re != nil {
		fmt.Fprintf(e.stderr, "waisteer verify: refused: %v\n", re)
		return exitCode(1)
	}
	return nil
}

// readRecords reads the records in a file (back to back) or in each file of
// a directory, in name order. A file whose bytes do not split into records is
// given as it is: the verifier refuses it with its reading code if a decision
// names it.
func readRecords(path string) ([][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, ent := range entries {
			if ent.Type().IsRegular() {
				files = append(files, filepath.Join(path, ent.Name()))
			}
		}
		sort.Strings(files)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rs, err := evidence.SplitRecords(b)
		if err != nil || len(rs) == 0 {
			out = append(out, b)
			continue
		}
		out = append(out, rs...)
	}
	return out, nil
}

// What a server may send for each thing `verify -url` fetches: each bound is
// above the largest the text lets that thing be, so that an honest answer
// always fits and a hostile one cannot exhaust the verifier.
const (
	maxDescriptorBytes = 64 << 10 // a name of at most 64 bytes and two keys (COMPANION §4)
	maxKeyLogBytes     = 16 << 20 // COMPANION §4 bounds no count of entries
	maxPolicyBytes     = 4 << 20  // 32 pathways of 255 params and 255 hops (§3.1, §3.2)
	maxDecisionBytes   = 1 << 20  // 32 pathways of 255 digests (§7.1)
	maxRecordBytes     = 4 << 10  // 227 + 10 × 255 (COMPANION §5)
	fetchWorkers       = 8        // records fetched at once
)

// newFetchClient is the HTTP client of `verify -url`: bounded waits at each
// stage, a few connections to the one server.
func newFetchClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 15 * time.Second
	t.MaxIdleConnsPerHost = fetchWorkers
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// fetchInput fetches a decision by its URL and everything a verifier needs
// for it from the same scheme and host (the server's /v1/ routes): the
// room's descriptor and key log head, the policy and each record the
// decision names (§9.1's inputs). A record the server does not hold is left
// out, so that the verifier refuses it record_missing at its place; a
// decision, descriptor or policy it does not hold is an error, since there
// is then nothing to verify. With authority, a room whose descriptor names
// another authority is refused before its key log, policy and records are
// fetched: the server could otherwise answer with a room of its own,
// consistent and signed by keys it holds. The descriptor's signature is
// still the verifier's to check (COMPANION §4.1 step 2).
func fetchInput(ctx context.Context, client *http.Client, decisionURL string, authority *sig.PublicKey) (verify.Input, error) {
	var in verify.Input
	u, err := url.Parse(decisionURL)
	if err != nil {
		return in, fmt.Errorf("-url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return in, fmt.Errorf("-url %q: an http or https URL is needed", decisionURL)
	}
	// §8.4: a decision's URI is decision_uri followed by its digest, 64
	// hexadecimal digits, whether decision_uri ends in a path or a query.
	named, err := sig.ParseHash(decisionURL[max(0, len(decisionURL)-2*sig.HashSize):])
	if err != nil || u.Fragment != "" {
		return in, fmt.Errorf("-url %q does not end in a decision's digest (§8.4): %v", decisionURL, err)
	}
	base := u.Scheme + "://" + u.Host

	get := func(what, target string, limit int64, required bool) ([]byte, error) {
		b, err := fetch(ctx, client, target, limit)
		if errors.Is(err, errNotFound) && !required {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("fetching %s: %w", what, err)
		}
		return b, nil
	}

	if in.Decision, err = get("the decision", u.String(), maxDecisionBytes, true); err != nil {
		return in, err
	}
	// The bytes must be the decision the URL names (§7.3's digest): the
	// verifier checks a decision, and this is the one asked about.
	if len(in.Decision) < sig.SignatureSize || sig.Digest(in.Decision[:len(in.Decision)-sig.SignatureSize]) != named {
		return in, fmt.Errorf("the server answered %d bytes that are not the decision %s the URL names", len(in.Decision), named)
	}
	d, err := decision.Parse(in.Decision)
	if err != nil {
		return in, fmt.Errorf("the decision %s does not read, so its room and policy are not known: %w", named, err)
	}

	if in.Descriptor, err = get("the room descriptor", base+"/v1/rooms/"+d.Room.String()+"/descriptor", maxDescriptorBytes, true); err != nil {
		return in, err
	}
	if authority != nil {
		desc, err := room.ParseDescriptor(in.Descriptor)
		if err != nil {
			return in, fmt.Errorf("the server's descriptor of room %s does not read, so its authority is not known: %w", d.Room, err)
		}
		if desc.Authority != *authority {
			return in, fmt.Errorf("refused: the server's room %s has the authority %s, not the pinned %s", d.Room, desc.Authority, *authority)
		}
	}
	if in.KeyLogHead, err = get("the key log head", base+"/v1/rooms/"+d.Room.String()+"/keylog", maxKeyLogBytes, false); err != nil {
		return in, err
	}
	if in.Policy, err = get("the policy", base+"/v1/policies/"+d.Policy.String(), maxPolicyBytes, true); err != nil {
		return in, err
	}

	// The records, in the order the decision names them, a few at a time.
	var digests []sig.Hash
	for i := range d.Pathways {
		digests = append(digests, d.Pathways[i].Records...)
	}
	records := make([][]byte, len(digests))
	errs := make([]error, len(digests))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(fetchWorkers, len(digests)) {
		wg.Go(func() {
			for i := range next {
				records[i], errs[i] = get("record "+digests[i].String(), base+"/v1/records/"+digests[i].String(), maxRecordBytes, false)
			}
		})
	}
	for i := range digests {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return in, err
	}
	for _, r := range records {
		if r != nil {
			in.Records = append(in.Records, r)
		}
	}
	return in, nil
}

// errNotFound is a 404 answer.
var errNotFound = errors.New("404 Not Found")

// fetch GETs target and returns its body, refusing one of more than limit
// bytes and any status but 200.
func fetch(ctx context.Context, client *http.Client, target string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "waisteer-verify")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", target, errNotFound)
	default:
		return nil, fmt.Errorf("%s: %s", target, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: the answer is more than %d bytes", target, limit)
	}
	return b, nil
}
