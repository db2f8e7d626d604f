package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
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
	fs := newFlags(e, "verify", "-room FILE [-keylog FILE] -policy FILE -decision FILE [-records PATH]... [-manifest FILE]")
	roomFile := fs.String("room", "", "the room descriptor (CBOR)")
	keylogFile := fs.String("keylog", "", "the head of the room authority's key log (CBOR); none when omitted")
	policyFile := fs.String("policy", "", "the steering policy (WSP1)")
	decisionFile := fs.String("decision", "", "the steering decision (WSD1)")
	manifestFile := fs.String("manifest", "", "the steering manifest served with the decision; not checked when omitted")
	var recordPaths listFlag
	fs.Var(&recordPaths, "records", "a file of per-hop records (WMH1) back to back, or a directory of such files; repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *roomFile == "" || *policyFile == "" || *decisionFile == "" {
		return usagef("-room, -policy and -decision are required")
	}
	var in verify.Input
	var err error
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
