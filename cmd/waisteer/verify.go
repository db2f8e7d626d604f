package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
	"github.com/waisteer/waisteer/verify/audit"
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
	Log     *logFacts     `json:"log,omitempty"`
}

// logFacts is where -url found the decision in its room's logs (issue 16):
// the log that holds it (issue 31; 0, left out, on a store of one log) and
// its index there.
type logFacts struct {
	Log       int64   `json:"log,omitempty"`
	Index     int64   `json:"index"`
	Size      int64   `json:"size"` // of the checkpoint its inclusion is proved in
	KeyLogSeq *uint64 `json:"key_log_seq"`
}

// notInLog is the outcome's reason when -url cannot place the decision in
// a log that verifies: the log's checks, not §9's.
const notInLog = "not_in_log"

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
	inLog := fs.Bool("log", true, "with -url: check that the decision is in its room's log, and verify it against the key log head in force where the log took it")
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
		c := client.New()
		in, err = c.FetchInput(ctx, *decisionURL, pin)
		var rf *client.Refusal
		if errors.As(err, &rf) {
			// What could not be fetched, or the pinned authority, is
			// refused like any step of §9.1: an outcome object.
			return printOutcome(e, outcome{Outcome: "refuse", Reason: string(rf.Code), Where: rf.Where}, rf)
		}
		if err != nil {
			return usagef("-url: %v", err)
		}
		if *manifestFile != "" {
			if in.Manifest, err = os.ReadFile(*manifestFile); err != nil {
				return err
			}
		}
		var lf *logFacts
		if *inLog {
			u, _ := url.Parse(*decisionURL) // FetchInput read it
			pl, err := audit.Place(ctx, c, u.Scheme+"://"+u.Host, &in)
			if err != nil {
				return printOutcome(e, outcome{Outcome: "refuse", Reason: notInLog, Where: "log"}, err)
			}
			lf = &logFacts{Log: pl.Log.N, Index: pl.Index, Size: pl.Log.Checkpoint.Size}
			if pl.Epoch != nil {
				lf.KeyLogSeq = &pl.Epoch.Seq
			}
		}
		return printVerdictIn(e, in, lf)
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
func printVerdict(e *env, in verify.Input) error { return printVerdictIn(e, in, nil) }

// printVerdictIn is printVerdict with where the decision is in its log.
func printVerdictIn(e *env, in verify.Input, lf *logFacts) error {
	facts, verr := verify.Verify(in)
	if verr == nil {
		return printOutcome(e, outcome{Outcome: "accept", Facts: facts, Log: lf}, nil)
	}
	var re *reason.Error
	if !errors.As(verr, &re) {
		return verr
	}
	return printOutcome(e, outcome{Outcome: "refuse", Reason: string(re.Code), Where: re.Place}, re)
}

// printOutcome prints the outcome on standard output and, for a refusal,
// why on standard error, exiting 1.
func printOutcome(e *env, out outcome, why error) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if out.Outcome != "accept" {
		fmt.Fprintf(e.stderr, "waisteer verify: refused: %v\n", why)
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
