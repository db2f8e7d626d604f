package description

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecordSignJoulesExact: a joules string converts to µJ exactly.
func TestRecordSignJoulesExact(t *testing.T) {
	cases := map[string]uint64{
		`"0.000001J"`: 1, `"1J"`: 1_000_000, `"1.250mJ"`: 1250, `"7µJ"`: 7, `"7μJ"`: 7, `"7uJ"`: 7,
		`"3 J"`: 3_000_000, `"18446744073709.551615J"`: 1<<64 - 1, `"18446744073709551615"`: 1<<64 - 1, `9`: 9,
	}
	for in, want := range cases {
		got, err := joulesField(mustJSON(t, in))
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{`"1.5µJ"`, `"0.0000005J"`, `"1.J"`, `".5J"`, `"-1J"`, `"1e3J"`, `"J"`, `-1`, `1.5`} {
		if got, err := joulesField(mustJSON(t, in)); err == nil {
			t.Errorf("%s: read as %d", in, got)
		}
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
