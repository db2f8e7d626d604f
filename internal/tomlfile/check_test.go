package tomlfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// A schema of every kind of field the configurations use.
type testFile struct {
	Grace   *string           `toml:"session_grace" want:"duration"`
	Name    *string           `toml:"name"`
	Floor   *uint8            `toml:"floor"`
	Count   *int64            `toml:"count"`
	Tiers   []uint64          `toml:"tiers"`
	Share   *float64          `toml:"share"`
	On      *bool             `toml:"on"`
	Any     any               `toml:"capacity"`
	Params  map[string]string `toml:"params"`
	Agents  []string          `toml:"agents"`
	HTTP    testHTTP          `toml:"http"`
	Pathway []testPathway     `toml:"pathway"`
}

type testHTTP struct {
	ReadTimeout  *string `toml:"read_timeout" want:"duration"`
	WriteTimeout *string `toml:"write_timeout" want:"duration"`
}

type testPathway struct {
	ID   *string   `toml:"id"`
	Hops []testHop `toml:"hops"`
}

type testHop struct {
	Key *string `toml:"key"`
}

// Issue 29, the CLI: "configuration errors in the configuration's words (the
// key, the type expected, the line)", every mistake of the file at once, in
// the order of its lines; "did you mean" for an unknown key, from the keys
// its own table allows. Each expected message is written out by hand.
func TestDecodeWords(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		// The issue's own example.
		{"a duration as an integer", "session_grace = 20\n",
			[]string{`f.toml:1: session_grace: expected a duration string such as "20s", got an integer`}},
		{"a string as a boolean", "name = true\n",
			[]string{`f.toml:1: name: expected a string, got a boolean`}},
		{"a u8 as a float", "\nfloor = 1.5\n",
			[]string{`f.toml:2: floor: expected an integer from 0 to 255, got a float`}},
		{"a u8 out of range", "floor = 256\n",
			[]string{`f.toml:1: floor: expected an integer from 0 to 255, got 256`}},
		{"a u8 negative", "floor = -1\n",
			[]string{`f.toml:1: floor: expected an integer from 0 to 255, got -1`}},
		{"an integer as a string", "count = \"3\"\n",
			[]string{`f.toml:1: count: expected an integer, got a string`}},
		{"a negative u64 in an array", "tiers = [\n  1,\n  -2,\n]\n",
			[]string{`f.toml:3: tiers[1]: expected an integer of at least 0, got -2`}},
		{"an array as a scalar", "tiers = 3\n",
			[]string{`f.toml:1: tiers: expected an array of integers of at least 0, got an integer`}},
		{"a number as a string", "share = \"5%\"\n",
			[]string{`f.toml:1: share: expected a number, got a string`}},
		{"a boolean as a string", "on = \"yes\"\n",
			[]string{`f.toml:1: on: expected true or false, got a string`}},
		{"a table as a string", "params = \"a=b\"\n",
			[]string{`f.toml:1: params: expected a table, got a string`}},
		{"a table's value", "[params]\ntoken = 7\n",
			[]string{`f.toml:2: params.token: expected a string, got an integer`}},
		{"an array of strings", "agents = [\"a\", 2]\n",
			[]string{`f.toml:1: agents[1]: expected a string, got an integer`}},
		{"a date", "name = 2026-12-02\n",
			[]string{`f.toml:1: name: expected a string, got a date or time`}},
		{"a scalar as a table", "[session_grace]\ns = 1\n",
			[]string{`f.toml:1: session_grace: expected a duration string such as "20s", got a table`}},
		{"a table's key", "[http]\nread_timeout = 5\n",
			[]string{`f.toml:2: http.read_timeout: expected a duration string such as "20s", got an integer`}},
		{"an array of tables as a string", "pathway = \"a\"\n",
			[]string{`f.toml:1: pathway: expected an array of tables, got a string`}},
		{"in an array table", "[[pathway]]\nid = \"a\"\n[[pathway]]\nid = 2\n",
			[]string{`f.toml:4: pathway[1].id: expected a string, got an integer`}},
		{"in an inline table of an array table", "[[pathway]]\nid = \"a\"\nhops = [\n  { key = 1 },\n]\n",
			[]string{`f.toml:4: pathway[0].hops[0].key: expected a string, got an integer`}},
		// Did you mean: a letter left out, two swapped, one wrong.
		{"a typo at the top", "sesion_grace = \"20s\"\n",
			[]string{`f.toml:1: sesion_grace: unknown key; did you mean "session_grace"?`}},
		{"a typo in a table", "[http]\nread_timout = \"1s\"\n",
			[]string{`f.toml:2: http.read_timout: unknown key; did you mean "read_timeout"?`}},
		{"a swap in an array table", "[[pathway]]\nid = \"a\"\n[[pathway]]\ndi = \"b\"\n",
			[]string{`f.toml:4: pathway[1].di: unknown key; did you mean "id"?`}},
		// A key of another table is not offered: "key" is a hop's, not a pathway's.
		{"nothing near", "[[pathway]]\nkye = \"a\"\ncolour = 1\n",
			[]string{`f.toml:2: pathway[0].kye: unknown key`, `f.toml:3: pathway[0].colour: unknown key`}},
		// Every mistake at once, by line.
		{"all of them", "[http]\nwrite_timeout = 1\nread_timeout = true\n[[pathway]]\nid = 3\n",
			[]string{
				`f.toml:2: http.write_timeout: expected a duration string such as "20s", got an integer`,
				`f.toml:3: http.read_timeout: expected a duration string such as "20s", got a boolean`,
				`f.toml:5: pathway[0].id: expected a string, got an integer`,
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f testFile
			_, err := Decode("f.toml", []byte(c.doc), &f)
			want := strings.Join(c.want, "\n")
			if err == nil || err.Error() != want {
				t.Errorf("error\n%v\nwant\n%s", err, want)
			}
		})
	}
}

// A document that fits its schema decodes as before: an integer is a
// number, a key in another case is go-toml's match, a value the schema reads
// itself (any) is not checked.
func TestDecodeFits(t *testing.T) {
	var f testFile
	doc := "session_grace = \"20s\"\nshare = 1\nFloor = 3\ncapacity = \"unlimited\"\n[[pathway]]\nid = \"a\"\nhops = [{ key = \"k\" }]\n"
	if _, err := Decode("f.toml", []byte(doc), &f); err != nil {
		t.Fatal(err)
	}
	if *f.Grace != "20s" || *f.Share != 1 || *f.Floor != 3 || f.Any != "unlimited" || *f.Pathway[0].Hops[0].Key != "k" {
		t.Errorf("decoded %+v", f)
	}
	// A syntax error is still placed at its line and column.
	if _, err := Decode("f.toml", []byte("name = \n"), &f); err == nil || !strings.HasPrefix(err.Error(), "f.toml:1:") {
		t.Errorf("syntax: %v", err)
	}
}

func TestNearest(t *testing.T) {
	words := []string{"listen", "retention", "session_grace", "id"}
	for w, want := range map[string]string{
		"lisen":     "listen",
		"retnetion": "retention", // a swap is one edit
		"RETENTION": "retention",
		"colour":    "",
		"xy":        "", // two edits of a two-letter word is too far
		"ix":        "id",
		"ttl":       "", // not among the words
	} {
		if got := Nearest(w, words); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", w, got, want)
		}
	}
	// A unit left out or added.
	for w, want := range map[string]string{"ttl": "ttl_s", "check_every": "check_every_s", "window_s_s": "window_s", "ttl_": "ttl_s", "window": "window_s"} {
		if got := Nearest(w, []string{"ttl_s", "check_every_s", "window_s"}); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", w, got, want)
		}
	}
}

// FuzzDecode: the check never panics, on any document, and a document it
// passes decodes without go-toml finding a type it refuses.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"session_grace = 20\n", "[http]\nread_timout = 1\n", "[[pathway]]\nid = 1\nhops = [{ key = 2 }]\n",
		"tiers = [1, -2]\n", "floor = 256\n", "params = { a = 1 }\n", "agents = [[1]]\n", "name = 1979-05-27T07:32:00Z\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v testFile
		_, err := Decode("f.toml", doc, &v)
		var m map[string]any
		if err != nil && toml.Unmarshal(doc, &m) == nil && len(check("f.toml", doc, reflect.TypeOf(v))) == 0 {
			t.Errorf("the check passed %q, the decoder refused it: %v", doc, err)
		}
	})
}
