package report

import (
	"bytes"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/shared"
)

// sfCase is one test record of the structured-field-tests suite (its
// README.md).
type sfCase struct {
	Name       string   `json:"name"`
	Raw        []string `json:"raw"`
	HeaderType string   `json:"header_type"`
	Expected   any      `json:"expected"`
	MustFail   bool     `json:"must_fail"`
	CanFail    bool     `json:"can_fail"`
}

// sfCases reads every top-level JSON file of the suite.
func sfCases(t testing.TB) map[string][]sfCase {
	dir := shared.Path(t, "testdata", "structured-field-tests")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files in %s: %v", dir, err)
	}
	out := map[string][]sfCase{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var cases []sfCase
		if err := dec.Decode(&cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = cases
	}
	return out
}

// expectedBare renders a bare item of the suite's JSON as refBare.render
// does.
func expectedBare(v any) string {
	switch v := v.(type) {
	case json.Number:
		if strings.ContainsAny(v.String(), ".eE") {
			f, _ := strconv.ParseFloat(v.String(), 64)
			return "d" + strconv.FormatFloat(f, 'g', -1, 64)
		}
		return "i" + v.String()
	case string:
		return fmt.Sprintf("s%q", v)
	case bool:
		if v {
			return "?1"
		}
		return "?0"
	case map[string]any:
		switch v["__type"] {
		case "token":
			return fmt.Sprintf("t%q", v["value"])
		case "binary":
			b, err := base32.StdEncoding.DecodeString(v["value"].(string))
			if err != nil {
				panic(err)
			}
			return fmt.Sprintf("b%q", b)
		case "date":
			return "@" + v["value"].(json.Number).String()
		case "displaystring":
			return fmt.Sprintf("%%%q", v["value"])
		}
	}
	panic(fmt.Sprintf("unknown bare item %#v", v))
}

func expectedParams(v any) string {
	var b strings.Builder
	for _, p := range v.([]any) {
		p := p.([]any)
		b.WriteString(";" + p[0].(string) + "=" + expectedBare(p[1]))
	}
	return b.String()
}

// expectedDictionary renders the suite's expected Dictionary as
// renderDictionary does.
func expectedDictionary(v any) string {
	var b strings.Builder
	for _, m := range v.([]any) {
		m := m.([]any)
		b.WriteString(m[0].(string) + "=")
		val := m[1].([]any)
		if items, inner := val[0].([]any); inner {
			b.WriteString("(")
			for i, it := range items {
				it := it.([]any)
				if i > 0 {
					b.WriteString(" ")
				}
				b.WriteString(expectedBare(it[0]) + expectedParams(it[1]))
			}
			b.WriteString(")" + expectedParams(val[1]))
		} else {
			b.WriteString(expectedBare(val[0]) + expectedParams(val[1]))
		}
		b.WriteString(",")
	}
	return b.String()
}

// expectedKeys lists the keys of the suite's expected Dictionary.
func expectedKeys(v any) []string {
	var keys []string
	for _, m := range v.([]any) {
		keys = append(keys, m.([]any)[0].(string))
	}
	return keys
}

// expectedKey is §4.4's reading of key from the suite's expected
// structure: an Integer ≥ 0 (whatever its parameters), or the least of a
// non-empty Inner List of them.
func expectedKey(v any, key string) (uint64, bool) {
	for _, m := range v.([]any) {
		m := m.([]any)
		if m[0] != key {
			continue
		}
		val := m[1].([]any)
		items := []any{val}
		if inner, ok := val[0].([]any); ok {
			if len(inner) == 0 {
				return 0, false
			}
			items = inner
		}
		var least uint64
		for i, it := range items {
			n, ok := it.([]any)[0].(json.Number)
			if !ok || strings.ContainsAny(n.String(), ".eE") || strings.HasPrefix(n.String(), "-") {
				return 0, false
			}
			u, err := strconv.ParseUint(n.String(), 10, 64)
			if err != nil {
				panic(err)
			}
			if i == 0 || u < least {
				least = u
			}
		}
		return least, true
	}
	return 0, false
}

// stricterThanRFC names the suite's cases whose raw value RFC 9651 lets a
// parser accept and §4.4's Byte Sequence rule refuses, with why. A case the
// package refuses while the suite expects a value fails the test unless it
// is here.
var stricterThanRFC = map[string]string{
	// RFC 9651 §4.2.7 says a parser SHOULD NOT fail on non-zero pad bits;
	// COMPANION §6 "Byte Sequences" requires the content to be exactly the
	// base64 of some octets, which "iZ==" (pad bits 0b1001) is not: the
	// octets 0x89 encode as "iQ==".
	"binary.json/non-zero pad bits": "non-zero pad bits",
}

// readWhereRFCMayFail names the suite's cases that RFC 9651 lets a parser
// refuse (can_fail) and §4.4 reads, with why.
var readWhereRFCMayFail = map[string]string{
	// RFC 9651 §4.2.7 lets a parser that cannot be configured otherwise
	// fail on missing padding; §4.4 supplies it ("its padding supplied
	// where it is missing").
	"binary.json/bad padding": "padding supplied",
	// RFC 9651 §3.3.7 requires Dates of the years 1 to 9999 and lets a
	// parser refuse others; §4.4 reads "the whole grammar, Dates
	// included", and the grammar's Date is "@" and any Integer.
	"date.json/syntactic max date - 999,999,999,999,999":  "whole grammar",
	"date.json/syntactic min date - -999,999,999,999,999": "whole grammar",
	// A field on two lines is one value, the lines combined with ", "
	// (RFC 9110 §5.3, RFC 9651 §4.2), whatever that splits.
	"display-string.json/two lines display string": "lines combined",
}

// TestStructuredFieldDictionaries runs every dictionary case of the suite
// through the CMCD reading path as CMCD-Request field lines (§4.4): a
// must_fail case parses to nothing and gives neither key; any other case
// parses, and each of its keys (read as bl and mtp are) gives what §4.4
// reads from the expected structure. Read itself gives the expected bl
// and mtp. The reference parser of sfref_test.go is checked on the same
// cases.
func TestStructuredFieldDictionaries(t *testing.T) {
	n := 0
	all := sfCases(t)
	names := make([]string, 0, len(all))
	for f := range all {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		for _, tc := range all[f] {
			if tc.HeaderType != "dictionary" {
				continue
			}
			n++
			id := f + "/" + tc.Name
			h := http.Header{"Cmcd-Request": tc.Raw}
			text, ok := cmcdRequest(h)
			if !ok {
				t.Fatalf("%s: no field", id)
			}
			d, parsed := parseDictionary(text)
			ref, refErr := refDictionary(text)
			_, report := Read("/steer", h, testIDs)
			if tc.MustFail {
				if parsed || refErr == nil {
					t.Errorf("%s: must fail; package parsed %v, reference %v", id, parsed, refErr)
				}
				if report != (Report{}) {
					t.Errorf("%s: must fail, gives %+v", id, report)
				}
				continue
			}
			if tc.CanFail {
				t.Fatalf("%s: a can_fail dictionary case needs its own handling here", id)
			}
			if !parsed {
				if why, ok := stricterThanRFC[id]; ok {
					t.Logf("%s: refused by §4.4's Byte Sequence rule (%s)", id, why)
					continue
				}
				t.Errorf("%s: %q does not parse", id, text)
				continue
			}
			if refErr != nil {
				t.Errorf("%s: reference: %v", id, refErr)
			} else if got, want := renderDictionary(ref), expectedDictionary(tc.Expected); got != want {
				t.Errorf("%s: reference parsed\n%s\nwant\n%s", id, got, want)
			}
			keys := append(expectedKeys(tc.Expected), cmcdKeys[:]...)
			for _, k := range keys {
				want, wantOK := expectedKey(tc.Expected, k)
				var v uint64
				var has bool
				if m, ok := d.Get(k); ok {
					v, has = keyValue(m)
				}
				if v != want || has != wantOK {
					t.Errorf("%s: key %q reads %d, %v; want %d, %v", id, k, v, has, want, wantOK)
				}
				if r, ok := refKey(ref, k); r != want || ok != wantOK {
					t.Errorf("%s: reference key %q reads %d, %v; want %d, %v", id, k, r, ok, want, wantOK)
				}
			}
			var wantReport Report
			if bl, ok := expectedKey(tc.Expected, "bl"); ok {
				wantReport = with(wantReport, B(bl))
			}
			if mtp, ok := expectedKey(tc.Expected, "mtp"); ok {
				wantReport = with(wantReport, T(mtp*1000))
			}
			if report != wantReport {
				t.Errorf("%s: Read gives %+v; want %+v", id, report, wantReport)
			}
		}
	}
	if n < 400 {
		t.Fatalf("only %d dictionary cases: suite incomplete", n)
	}
	t.Logf("%d dictionary cases", n)
}

// TestStructuredFieldItemsAsMembers runs the suite's item cases of the
// three bare item types whose reading §4.4 spells out (Byte Sequences, Dates,
// Display Strings) as the value of a Dictionary member beside bl=1: the
// Dictionary parses, and gives B, exactly when the item does, but where
// §4.4 takes RFC 9651's choices (stricterThanRFC, readWhereRFCMayFail).
func TestStructuredFieldItemsAsMembers(t *testing.T) {
	all := sfCases(t)
	n := 0
	for _, f := range []string{"binary.json", "date.json", "display-string.json"} {
		if len(all[f]) == 0 {
			t.Fatalf("%s: no cases", f)
		}
		for _, tc := range all[f] {
			if tc.HeaderType != "item" {
				continue
			}
			n++
			id := f + "/" + tc.Name
			raw := strings.Join(tc.Raw, ", ") // RFC 9651 §4.2
			if strings.HasSuffix(strings.Trim(raw, " "), "\t") {
				// An item is parsed with SP trimmed at both ends (RFC 9651
				// §4.2), a member with OWS after it: a trailing tab would
				// change the case.
				t.Fatalf("%s: raw %q does not fit a member", id, tc.Raw)
			}
			text := "x=" + strings.Trim(raw, " ") + ", bl=1"
			_, r := Read("/steer", http.Header{"Cmcd-Request": {text}}, testIDs)
			ref, refErr := refDictionary(text)
			want := !tc.MustFail
			if _, ok := stricterThanRFC[id]; ok {
				want = false
			} else if _, ok := readWhereRFCMayFail[id]; ok {
				want = true
			} else if tc.CanFail {
				t.Fatalf("%s: a can_fail case needs a reading (stricterThanRFC or readWhereRFCMayFail)", id)
			}
			if got := r == B(1); got != want {
				t.Errorf("%s: %q gives %+v; want parsed %v", id, text, r, want)
			}
			if got := refErr == nil; got != want {
				t.Errorf("%s: reference on %q: %v; want parsed %v", id, text, refErr, want)
			}
			if want && refErr == nil {
				wantText := "x=" + expectedBare(tc.Expected.([]any)[0]) + expectedParams(tc.Expected.([]any)[1]) + ",bl=i1,"
				if got := renderDictionary(ref); got != wantText {
					t.Errorf("%s: reference parsed %s; want %s", id, got, wantText)
				}
			}
		}
	}
	for id := range stricterThanRFC {
		if !strings.HasPrefix(id, "binary.json/") {
			t.Errorf("%s: stricterThanRFC entry not covered", id)
		}
	}
	t.Logf("%d item cases", n)
}
