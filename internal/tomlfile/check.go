package tomlfile

// The schema check: before go-toml decodes a document into its struct, the
// document's values are walked beside the struct's type, so that every key
// the schema has no field for and every value of the wrong type is reported
// at once, in the configuration's words (issue 29, the CLI: "the key, the
// type expected, the line") rather than in go-toml's, which names Go's
// fields ("cannot decode TOML integer into struct field
// serve.serveFile.SessionGrace of type string") and stops at the first.

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// A field's `want` tag names what its string holds, for the message of a
// value of another type: `toml:"session_grace" want:"duration"`.
var wants = map[string]string{
	"duration": `a duration string such as "20s"`,
}

// A mistake found by check, at its key.
type checkError struct {
	key  string
	line int
	msg  string
}

// checker walks a document beside its schema.
type checker struct {
	lines map[string]int
	errs  []checkError
}

// check reports the keys of doc that t (a struct type) has no field for, and
// the values that do not fit their field's type, each as "NAME:LINE: KEY:
// ...", in the order of their lines; nil when doc fits t (or does not parse:
// the decoder then says where).
func check(name string, doc []byte, t reflect.Type) []error {
	var m map[string]any
	if toml.Unmarshal(doc, &m) != nil {
		return nil
	}
	c := &checker{lines: KeyLines(doc)}
	c.table("", m, t)
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].line < c.errs[j].line })
	var errs []error
	for _, e := range c.errs {
		if e.line > 0 {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s", name, e.line, e.key, e.msg))
		} else {
			errs = append(errs, fmt.Errorf("%s: %s: %s", name, e.key, e.msg))
		}
	}
	return errs
}

func (c *checker) errorf(key, format string, args ...any) {
	line := 0
	for k := key; k != ""; {
		if l, ok := c.lines[k]; ok {
			line = l
			break
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	c.errs = append(c.errs, checkError{key, line, fmt.Sprintf(format, args...)})
}

// A field of a schema's table, by its key.
type field struct {
	key  string
	typ  reflect.Type
	want string // the `want` tag
}

// fields lists the keys of a struct type as go-toml reads them: the toml
// tag's name, or the field's own; an embedded struct's keys as its holder's.
func fields(t reflect.Type) []field {
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		ft := sf.Type
		if sf.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fs = append(fs, fields(ft)...)
				continue
			}
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, field{name, ft, sf.Tag.Get("want")})
	}
	return fs
}

// table checks a table's keys against a struct type's fields.
func (c *checker) table(prefix string, m map[string]any, t reflect.Type) {
	fs := fields(t)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		f, ok := lookupField(fs, k)
		if !ok {
			names := make([]string, len(fs))
			for i, f := range fs {
				names[i] = f.key
			}
			if s := Nearest(k, names); s != "" {
				c.errorf(key, "unknown key; did you mean %q?", s)
			} else {
				c.errorf(key, "unknown key")
			}
			continue
		}
		c.value(key, m[k], f.typ, f.want)
	}
}

// lookupField finds a key's field: its exact name first, then as go-toml
// also does, the name in any case.
func lookupField(fs []field, k string) (field, bool) {
	for _, f := range fs {
		if f.key == k {
			return f, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.key, k) {
			return f, true
		}
	}
	return field{}, false
}

// value checks one value against the type of its field.
func (c *checker) value(key string, v any, t reflect.Type, want string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Interface:
		// The schema reads the value itself (a share, a capacity).
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.mismatch(key, v, t, want)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.mismatch(key, v, t, want)
		}
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case float64, int64:
		default:
			c.mismatch(key, v, t, want)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := v.(int64)
		if !ok {
			c.mismatch(key, v, t, want)
			return
		}
		if lo, hi := intRange(t); i < lo || (i > 0 && uint64(i) > hi) {
			c.errorf(key, "expected %s, got %d", expected(t, want), i)
		}
	case reflect.Slice, reflect.Array:
		a, ok := v.([]any)
		if !ok {
			c.mismatch(key, v, t, want)
			return
		}
		for i, e := range a {
			c.value(key+"["+strconv.Itoa(i)+"]", e, t.Elem(), want)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			c.mismatch(key, v, t, want)
			return
		}
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			c.value(key+"."+k, m[k], t.Elem(), "")
		}
	case reflect.Struct:
		if t == reflect.TypeOf(time.Time{}) {
			return // not in any schema; go-toml says
		}
		m, ok := v.(map[string]any)
		if !ok {
			c.mismatch(key, v, t, want)
			return
		}
		c.table(key, m, t)
	}
}

func (c *checker) mismatch(key string, v any, t reflect.Type, want string) {
	c.errorf(key, "expected %s, got %s", expected(t, want), kindOf(v))
}

// intRange is the least and the greatest value of an integer type, the
// greatest as a uint64.
func intRange(t reflect.Type) (int64, uint64) {
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 0, math.MaxUint64 >> (64 - t.Bits())
	}
	return -1 << (t.Bits() - 1), 1<<(t.Bits()-1) - 1
}

// expected names what a field of type t takes, as a configuration says it.
func expected(t reflect.Type, want string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w, ok := wants[want]; ok && t.Kind() == reflect.String {
		return w
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t.Bits() == 64 && t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64 {
			return "an integer"
		} else if t.Bits() == 64 {
			return "an integer of at least 0"
		}
		lo, hi := intRange(t)
		return fmt.Sprintf("an integer from %d to %d", lo, hi)
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		if e.Kind() == reflect.Struct {
			return "an array of tables"
		}
		return "an array of " + plural(expected(e, want))
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return t.String()
}

// plural turns "a string" into "strings" for "an array of strings".
func plural(s string) string {
	switch {
	case strings.HasPrefix(s, "a string"), strings.HasPrefix(s, "a duration string"):
		s = strings.Replace(strings.TrimPrefix(s, "a "), "string", "strings", 1)
	case strings.HasPrefix(s, "an integer"):
		s = "integers" + strings.TrimPrefix(s, "an integer")
	case s == "true or false":
		s = "booleans"
	case strings.HasPrefix(s, "a number"):
		s = "numbers"
	case strings.HasPrefix(s, "a table"):
		s = "tables"
	}
	return s
}

// kindOf names a decoded TOML value's type.
func kindOf(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalDateTime, toml.LocalTime:
		return "a date or time"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Nearest is the word of words closest to w by edit distance (insertions,
// deletions, substitutions and swaps of two neighbours), for a "did you
// mean"; "" when none is near enough: within a third of the longer word, at
// least one edit. A word that is the other with a unit left out or added
// ("ttl" for "ttl_s") is one edit away.
func Nearest(w string, words []string) string {
	best, bestD := "", -1
	for _, c := range words {
		lw, lc := strings.ToLower(w), strings.ToLower(c)
		d := distance(lw, lc)
		if strings.HasPrefix(lc, lw+"_") || strings.HasPrefix(lw, lc+"_") {
			d = 1
		}
		if d > max(1, max(len(w), len(c))/3) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance of a and b, by bytes.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
