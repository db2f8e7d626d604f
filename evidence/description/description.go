// Package description reads a per-hop session record (WMH1, COMPANION §5)
// as a person writes it, in TOML or JSON, for a hop's operator to sign:
//
//	room          the room id, 64 hexadecimal digits
//	hop           optional: must be the signing key's public key
//	start, end    µs on the room clock: an integer, or an RFC 3339 time
//	class         ModelBased, Estimator, OnChipCounter, CalibratedInstrument,
//	              unmetered, or the tag as an integer
//	joules        an integer of µJ, or a string with a unit: "12.5J", "40mJ",
//	              "7µJ" (or "uJ"); it must come to a whole number of µJ
//	sessions      an integer (default 0)
//	tracks        an array of {kind = "media"|"other", direction = "in"|"out",
//	              bytes = integer}
//	subscriber_us 8 integers, or a table by layer class "0" to "7" (default 0)
//
// Integers may also be written as strings of decimal digits, for those above
// 2^63; a float is never read, since it is not exact. Every value converts
// exactly or is refused, and the record must pass the rules a reader applies
// (evidence.Record.Validate), each mistake placed at its line and field.
// cmd/waisteer/testdata/record/example.toml is a commented example.
package description

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/tomlfile"
)

// Read reads the description in data (TOML when isTOML, else one JSON
// object) into the record it describes, whose hop is hop: the key that
// will sign it. name places the mistakes ("record.toml:7: joules: ...").
func Read(name string, data []byte, isTOML bool, hop sig.PublicKey) (*evidence.Record, error) {
	var d *description
	var err error
	if isTOML {
		d, err = readTOML(data)
	} else {
		d, err = readJSON(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s%v", name, err)
	}
	r, err := d.record()
	if err != nil {
		return nil, d.place(name, err)
	}
	if _, ok := d.fields["hop"]; ok && d.hop != hop {
		return nil, d.place(name, &fieldError{"hop", fmt.Sprintf("is %s, but the signing key's public key is %s", d.hop, hop), false})
	}
	r.Hop = hop
	// Only what a reader would accept (COMPANION §5): the same rules.
	if err := r.Validate(); err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			field, _, _ := strings.Cut(re.Detail, " ")
			return nil, d.place(name, &fieldError{field, string(re.Code) + ": " + re.Detail, true})
		}
		return nil, err
	}
	return r, nil
}

// A description is a record as a person writes it: a TOML or JSON document
// read into a tree of values, with the line of each field when it is known.
type description struct {
	fields map[string]any
	lines  map[string]int    // "tracks[1].kind" → line
	raws   map[string]string // a TOML date-time's text, for its fraction
	hop    sig.PublicKey
}

// fieldError is a mistake in one field. path spells it as the fields are
// written: start, tracks[1].kind.
type fieldError struct {
	path string
	msg  string
	rule bool // msg already names the field (a rule of COMPANION §5)
}

func (e *fieldError) Error() string {
	if e.rule {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// place says where in the file a field's mistake is.
func (d *description) place(name string, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	path := fe.path
	for path != "" {
		if line, ok := d.lines[path]; ok {
			return fmt.Errorf("%s:%d: %v", name, line, fe)
		}
		// A field with no line of its own is placed at the one that holds it.
		if i := strings.LastIndexAny(path, ".["); i > 0 {
			path = path[:i]
		} else {
			path = ""
		}
	}
	return fmt.Errorf("%s: %v", name, fe)
}

// readTOML reads a description from a TOML document. go-toml gives the
// values (its DecodeError places a syntax mistake); its parser, run a
// second time, gives each field's line.
func readTOML(data []byte) (*description, error) {
	var fields map[string]any
	if err := toml.Unmarshal(data, &fields); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, fmt.Errorf(":%d:%d: %s", line, col, strings.TrimPrefix(de.Error(), "toml: "))
		}
		return nil, fmt.Errorf(": %v", err)
	}
	d := &description{fields: fields, lines: map[string]int{}, raws: map[string]string{}}
	var p unstable.Parser
	p.Reset(data)
	lineOf := func(r unstable.Range) int { return p.Shape(r).Start.Line }
	keyOf := func(it unstable.Iterator) (string, int) {
		var parts []string
		line := 0
		for it.Next() {
			if line == 0 {
				line = lineOf(it.Node().Raw)
			}
			parts = append(parts, string(it.Node().Data))
		}
		return strings.Join(parts, "."), line
	}
	var walk func(n *unstable.Node, path string, line int)
	walk = func(n *unstable.Node, path string, line int) {
		if n.Raw.Length > 0 {
			line = lineOf(n.Raw)
		}
		if _, ok := d.lines[path]; !ok {
			d.lines[path] = line
		}
		switch n.Kind {
		case unstable.DateTime, unstable.LocalDateTime:
			d.raws[path] = string(n.Data)
		case unstable.Array:
			i := 0
			for it := n.Children(); it.Next(); {
				if c := it.Node(); c.Kind != unstable.Comment {
					walk(c, fmt.Sprintf("%s[%d]", path, i), line)
					i++
				}
			}
		case unstable.InlineTable:
			for it := n.Children(); it.Next(); {
				if kv := it.Node(); kv.Kind == unstable.KeyValue {
					k, l := keyOf(kv.Key())
					walk(kv.Value(), path+"."+k, l)
				}
			}
		}
	}
	prefix := ""
	arrays := map[string]int{}
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table:
			k, l := keyOf(n.Key())
			prefix = k + "."
			if _, ok := d.lines[k]; !ok {
				d.lines[k] = l
			}
		case unstable.ArrayTable:
			k, l := keyOf(n.Key())
			if _, ok := d.lines[k]; !ok {
				d.lines[k] = l
			}
			item := fmt.Sprintf("%s[%d]", k, arrays[k])
			arrays[k]++
			d.lines[item] = l
			prefix = item + "."
		case unstable.KeyValue:
			k, l := keyOf(n.Key())
			walk(n.Value(), prefix+k, l)
		}
	}
	return d, nil
}

// readJSON reads a description from one JSON object, token by token so as
// to refuse a key given twice (encoding/json would keep the last) and to
// know each field's line.
func readJSON(data []byte) (*description, error) {
	d := &description{lines: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n")) }
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf(":%d: %v", lineAt(se.Offset), err)
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf(":%d: the JSON ends early", lineAt(int64(len(data))))
		}
		return fmt.Errorf(": %v", err)
	}
	var value func(path string) (any, error)
	value = func(path string) (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail(err)
		}
		switch tok {
		case json.Delim('{'):
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fail(err)
				}
				k, ok := kt.(string)
				if !ok { // the decoder gives keys as strings; never trust it to
					return nil, fmt.Errorf(":%d: an object key that is not a string", lineAt(dec.InputOffset()))
				}
				kp := k
				if path != "" {
					kp = path + "." + k
				}
				line := lineAt(dec.InputOffset())
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf(":%d: %s: given twice", line, kp)
				}
				d.lines[kp] = line
				if m[k], err = value(kp); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, fail(err)
			}
			return m, nil
		case json.Delim('['):
			var a []any
			for i := 0; dec.More(); i++ {
				ip := fmt.Sprintf("%s[%d]", path, i)
				d.lines[ip] = lineAt(dec.InputOffset())
				v, err := value(ip)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fail(err)
			}
			if a == nil {
				a = []any{}
			}
			return a, nil
		}
		return tok, nil
	}
	v, err := value("")
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(":1: the description is a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf(":%d: more after the JSON object", lineAt(dec.InputOffset()))
	}
	d.fields = m
	return d, nil
}

// record builds the record the description gives, its hop left zero.
func (d *description) record() (*evidence.Record, error) {
	known := map[string]bool{"room": true, "hop": true, "start": true, "end": true, "class": true,
		"joules": true, "sessions": true, "tracks": true, "subscriber_us": true}
	names := make([]string, 0, len(d.fields))
	for k := range d.fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			// Issue 29: "did you mean" for an unknown key, as the
			// configurations say it (internal/tomlfile).
			fields := []string{"room", "hop", "start", "end", "class", "joules", "sessions", "tracks", "subscriber_us"}
			if near := tomlfile.Nearest(k, fields); near != "" {
				return nil, &fieldError{k, fmt.Sprintf("not a field of a record; did you mean %q? (%s)", near, strings.Join(fields, ", ")), false}
			}
			return nil, &fieldError{k, "not a field of a record (" + strings.Join(fields, ", ") + ")", false}
		}
	}
	for _, k := range []string{"room", "start", "end", "class"} {
		if _, ok := d.fields[k]; !ok {
			return nil, &fieldError{k, "missing", false}
		}
	}
	r := new(evidence.Record)
	var err error
	if r.Room, err = hexField("room", d.fields["room"]); err != nil {
		return nil, err
	}
	if v, ok := d.fields["hop"]; ok {
		h, err := hexField("hop", v)
		if err != nil {
			return nil, err
		}
		d.hop = sig.PublicKey(h)
	}
	if r.Start, err = d.micros("start"); err != nil {
		return nil, err
	}
	if r.End, err = d.micros("end"); err != nil {
		return nil, err
	}
	if r.Class, err = classField(d.fields["class"]); err != nil {
		return nil, err
	}
	if v, ok := d.fields["joules"]; ok {
		if r.Joules, err = joulesField(v); err != nil {
			return nil, err
		}
	}
	if v, ok := d.fields["sessions"]; ok {
		s, err := uintField("sessions", v, 32)
		if err != nil {
			return nil, err
		}
		r.Sessions = uint32(s)
	}
	if v, ok := d.fields["tracks"]; ok {
		if r.Tracks, err = tracksField(v); err != nil {
			return nil, err
		}
	}
	if v, ok := d.fields["subscriber_us"]; ok {
		if r.SubscriberUs, err = subscriberUsField(v); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func hexField(path string, v any) (sig.Hash, error) {
	var h sig.Hash
	s, ok := v.(string)
	if !ok {
		return h, &fieldError{path, "is " + kindOf(v) + ", not a string of 64 hexadecimal digits", false}
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, &fieldError{path, fmt.Sprintf("%q is not 64 hexadecimal digits", s), false}
	}
	copy(h[:], b)
	return h, nil
}

// kindOf names a value's type as the description's reader sees it.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64, json.Number:
		return "a number"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "null"
	case time.Time, toml.LocalDateTime, toml.LocalDate, toml.LocalTime:
		return "a date or time"
	}
	return fmt.Sprintf("a %T", v)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// uintField reads an unsigned integer of the given width: a TOML or JSON
// integer, or a string of decimal digits. Never a float: a float is not
// exact.
func uintField(path string, v any, bits int) (uint64, error) {
	var s string
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, &fieldError{path, fmt.Sprintf("%d is negative", x), false}
		}
		s = strconv.FormatInt(x, 10)
	case json.Number:
		s = string(x)
	case string:
		if !isDigits(x) {
			return 0, &fieldError{path, fmt.Sprintf("%q is not an integer", x), false}
		}
		s = x
	default:
		return 0, &fieldError{path, "is " + kindOf(v) + ", not an integer", false}
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &fieldError{path, fmt.Sprintf("%s is above the largest u%d", s, bits), false}
		}
		return 0, &fieldError{path, fmt.Sprintf("%s is not an integer of 0 or above", s), false}
	}
	return n, nil
}

// micros reads start or end: µs on the room clock, the Unix epoch's
// (COMPANION §4), as an integer or an RFC 3339 time, converted exactly.
func (d *description) micros(path string) (uint64, error) {
	v := d.fields[path]
	var t time.Time
	var text string
	switch x := v.(type) {
	case time.Time: // TOML's offset date-time
		t, text = x, d.raws[path]
	case toml.LocalDateTime, toml.LocalDate, toml.LocalTime:
		return 0, &fieldError{path, "a date-time with no offset is no instant: add Z or ±hh:mm", false}
	case string:
		if isDigits(x) {
			return uintField(path, x, 64)
		}
		var err error
		if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
			return 0, &fieldError{path, fmt.Sprintf("%q is neither an integer of µs nor an RFC 3339 time", x), false}
		}
		text = x
	default:
		return uintField(path, v, 64)
	}
	if t.Before(time.Unix(0, 0)) {
		return 0, &fieldError{path, "is before the Unix epoch, where the room clock starts", false}
	}
	// Exactly: no digit past the microsecond may be dropped.
	if t.Nanosecond()%1000 != 0 || !fractionInMicros(text) {
		return 0, &fieldError{path, "is finer than a microsecond", false}
	}
	return uint64(t.Unix())*1_000_000 + uint64(t.Nanosecond()/1000), nil
}

// fractionInMicros reports whether a date-time's seconds fraction has no
// digit other than 0 after its sixth (parsers keep nine at most).
func fractionInMicros(text string) bool {
	i := strings.IndexByte(text, '.')
	if i < 0 {
		return true
	}
	for j := i + 1; j < len(text) && text[j] >= '0' && text[j] <= '9'; j++ {
		if j-i > 6 && text[j] != '0' {
			return false
		}
	}
	return true
}

// classField reads the class: a label of COMPANION §3, "unmetered", or the
// tag as an integer, which Validate then judges.
func classField(v any) (evidence.Class, error) {
	if s, ok := v.(string); ok {
		if s == "unmetered" {
			return evidence.Unmetered, nil
		}
		for c := evidence.Class(0); c < 8; c++ {
			if c.IsClass() && c.Label() == s {
				return c, nil
			}
		}
		return 0, &fieldError{"class", fmt.Sprintf("%q is not ModelBased, Estimator, OnChipCounter, CalibratedInstrument or unmetered", s), false}
	}
	n, err := uintField("class", v, 8)
	return evidence.Class(n), err
}

// joulesField reads joules: an integer of µJ, or a decimal with a unit,
// converted exactly; a value that is not a whole number of µJ is refused.
func joulesField(v any) (uint64, error) {
	s, ok := v.(string)
	if !ok {
		if _, isFloat := v.(float64); isFloat {
			return 0, &fieldError{"joules", `is a float, which is not exact: write an integer of µJ, or a string such as "12.5J"`, false}
		}
		return uintField("joules", v, 64)
	}
	if isDigits(s) {
		return uintField("joules", s, 64)
	}
	num, exp := "", 0
	for _, u := range []struct {
		suffix string
		exp    int
	}{{"µJ", 0}, {"μJ", 0}, {"uJ", 0}, {"mJ", 3}, {"J", 6}} {
		if strings.HasSuffix(s, u.suffix) {
			num, exp = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.exp
			break
		}
	}
	whole, frac, _ := strings.Cut(num, ".")
	if !isDigits(whole) || (frac != "" && !isDigits(frac)) || strings.HasSuffix(num, ".") {
		return 0, &fieldError{"joules", fmt.Sprintf("%q is not an integer of µJ or a decimal with a unit µJ, uJ, mJ or J", s), false}
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > exp {
		return 0, &fieldError{"joules", fmt.Sprintf("%q is not a whole number of µJ", s), false}
	}
	n, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", exp-len(frac)), 10)
	if !ok || !n.IsUint64() {
		return 0, &fieldError{"joules", fmt.Sprintf("%q is above the largest u64 of µJ", s), false}
	}
	return n.Uint64(), nil
}

func tracksField(v any) ([]evidence.Track, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, &fieldError{"tracks", "is " + kindOf(v) + ", not an array of tracks", false}
	}
	var ts []evidence.Track
	for i, e := range a {
		path := fmt.Sprintf("tracks[%d]", i)
		m, ok := e.(map[string]any)
		if !ok {
			return nil, &fieldError{path, "is " + kindOf(e) + ", not a table of kind, direction and bytes", false}
		}
		for _, k := range sortedKeys(m) {
			if k != "kind" && k != "direction" && k != "bytes" {
				if near := tomlfile.Nearest(k, []string{"kind", "direction", "bytes"}); near != "" {
					return nil, &fieldError{path + "." + k, fmt.Sprintf("not a field of a track; did you mean %q? (kind, direction, bytes)", near), false}
				}
				return nil, &fieldError{path + "." + k, "not a field of a track (kind, direction, bytes)", false}
			}
		}
		var t evidence.Track
		var err error
		if t.Kind, err = namedByte(path+".kind", m["kind"], "media", evidence.KindMedia, "other", evidence.KindOther); err != nil {
			return nil, err
		}
		if t.Direction, err = namedByte(path+".direction", m["direction"], "in", evidence.DirIn, "out", evidence.DirOut); err != nil {
			return nil, err
		}
		if _, ok := m["bytes"]; !ok {
			return nil, &fieldError{path + ".bytes", "missing", false}
		}
		if t.Bytes, err = uintField(path+".bytes", m["bytes"], 64); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// namedByte reads a track's kind or direction: its name, or its number.
func namedByte(path string, v any, name1 string, v1 uint8, name2 string, v2 uint8) (uint8, error) {
	switch s := v.(type) {
	case nil:
		return 0, &fieldError{path, "missing", false}
	case string:
		switch s {
		case name1:
			return v1, nil
		case name2:
			return v2, nil
		}
		return 0, &fieldError{path, fmt.Sprintf("%q is not %q or %q", s, name1, name2), false}
	}
	n, err := uintField(path, v, 8)
	return uint8(n), err
}

func subscriberUsField(v any) ([8]uint64, error) {
	var us [8]uint64
	switch x := v.(type) {
	case []any:
		if len(x) != len(us) {
			return us, &fieldError{"subscriber_us", fmt.Sprintf("has %d entries, not 8 (layer classes 0 to 7)", len(x)), false}
		}
		for c, e := range x {
			var err error
			if us[c], err = uintField(fmt.Sprintf("subscriber_us[%d]", c), e, 64); err != nil {
				return us, err
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			c, err := strconv.Atoi(k)
			if err != nil || c < 0 || c > 7 || strconv.Itoa(c) != k {
				return us, &fieldError{"subscriber_us." + k, "is not a layer class 0 to 7", false}
			}
			if us[c], err = uintField("subscriber_us."+k, x[k], 64); err != nil {
				return us, err
			}
		}
	default:
		return us, &fieldError{"subscriber_us", "is " + kindOf(v) + ", not 8 integers or a table by layer class", false}
	}
	return us, nil
}
