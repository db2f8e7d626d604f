package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// corpusPath is the committed corpus, from this package's directory.
const corpusPath = "../../conformance/steering/vectors.json"

func readCorpus(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var tally = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed\n\z`)

// TestConformanceVerifyCorpus: `conformance verify` passes every request
// and vector of the committed corpus (§11) and ends with the tally.
func TestConformanceVerifyCorpus(t *testing.T) {
	out, errs, code := waisteer(t, "", "conformance", "verify", corpusPath)
	m := tally.FindStringSubmatch(out)
	if code != 0 || m == nil || m[2] != "0" || out != m[0] {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestConformanceVerifyDisagreement: a copy of the corpus with one fact
// changed fails: the disagreement names the vector and what differed, the
// tally counts it, and the command exits 1.
func TestConformanceVerifyDisagreement(t *testing.T) {
	b := readCorpus(t)
	for _, m := range []struct{ old, new, want string }{
		{`"ttl": 300`, `"ttl": 301`, `vector 0 "three pathways, one class": facts.ttl: file 301, got 300`},
		{`"where": "policy"`, `"where": "decision"`, `: where: file "decision", got "policy"`},
		{`"throughput": "5000000"`, `"throughput": "5000001"`, `request 2 "hls: quoted pathway and throughput": report.throughput: file "5000001", got "5000000"`},
	} {
		mutant := bytes.Replace(b, []byte(m.old), []byte(m.new), 1)
		path := filepath.Join(t.TempDir(), "vectors.json")
		if err := os.WriteFile(path, mutant, 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, code := waisteer(t, "", "conformance", "verify", path)
		n := tally.FindStringSubmatch(out)
		if code != 1 || n == nil || n[2] != "1" || !strings.Contains(out, m.want) {
			t.Errorf("%s -> %s: exit %d, stdout %q", m.old, m.new, code, out)
		}
	}
}

// TestConformanceVerifyGarbage: a file that is not of COMPANION §8's format
// is an error naming the file and the fault, exit 1, never a panic.
func TestConformanceVerifyGarbage(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"empty": "", "text": "hello", "array": "[1,2]", "half": string(readCorpus(t)[:5000]),
		"binary": "\xff\xfe\x00", "format only": `{"format":"wai-steering-vectors/1"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := waisteer(t, "", "conformance", "verify", path)
		if code != 1 || out != "" || !strings.Contains(errs, path+": not a corpus file") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
	}
	_, errs, code := waisteer(t, "", "conformance", "verify", filepath.Join(dir, "missing.json"))
	if code != 1 || !strings.Contains(errs, "missing.json") {
		t.Errorf("a missing file: exit %d, stderr %q", code, errs)
	}
	if _, _, code := waisteer(t, "", "conformance", "verify", "a", "b"); code != 2 {
		t.Errorf("two files: exit %d, want 2", code)
	}
}

// TestConformanceGen: `conformance gen` writes the committed corpus byte for
// byte (§11: written from fixed seeds), to a file and to standard output.
func TestConformanceGen(t *testing.T) {
	want := readCorpus(t)
	path := filepath.Join(t.TempDir(), "steering", "vectors.json")
	if _, errs, code := waisteer(t, "", "conformance", "gen", "-o", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("the file written is not the committed corpus (%v)", err)
	}
	out, _, code := waisteer(t, "", "conformance", "gen", "-o", "-")
	if code != 0 || out != string(want) {
		t.Errorf("standard output: exit %d, %d bytes, want %d", code, len(out), len(want))
	}
	if _, _, code := waisteer(t, "", "conformance", "gen", "extra"); code != 2 {
		t.Errorf("an argument: exit %d, want 2", code)
	}
}
