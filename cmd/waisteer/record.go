package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// `record sign` and `record show` are a hop's tools for its per-hop session
// records, WMH1 (COMPANION §5): write one from a description and sign it;
// print one and check it against a room.

func init() {
	register(&command{
		name:    "record sign",
		summary: "sign a per-hop session record (WMH1) described in TOML or JSON",
		run:     recordSign,
	})
	register(&command{
		name:    "record show",
		summary: "print a per-hop session record's fields and digest, and check it",
		run:     recordShow,
	})
}

const recordSignUsage = `-key HOP.key [-o OUT] FILE

Reads FILE (TOML or JSON by its extension; - reads JSON from standard input):

  room          the room id, 64 hexadecimal digits
  hop           optional: must be -key's public key
  start, end    µs on the room clock: an integer, or an RFC 3339 time
  class         ModelBased, Estimator, OnChipCounter, CalibratedInstrument,
                unmetered, or the tag as an integer
  joules        an integer of µJ, or a string with a unit: "12.5J", "40mJ",
                "7µJ" (or "uJ"); it must come to a whole number of µJ
  sessions      an integer (default 0)
  tracks        an array of {kind = "media"|"other", direction = "in"|"out",
                bytes = integer}
  subscriber_us 8 integers, or a table by layer class "0" to "7" (default 0)

Integers may also be written as strings of decimal digits, for those above
2^63. The record must pass the rules a reader applies (COMPANION §5). It is
written to OUT, or to standard output; its digest is printed on standard
output, or on standard error when the record goes to standard output.`

func recordSign(e *env, args []string) error {
	fs := newFlags(e, "record sign", recordSignUsage)
	keyFile := fs.String("key", "", "the hop's private key `file`")
	out := fs.String("o", "", "write the record to `file` (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("one FILE is needed: a .toml or .json description, or - for JSON on standard input")
	}
	if *keyFile == "" {
		return usagef("-key is needed: the hop's key signs the record")
	}
	name := fs.Arg(0)
	isTOML := false
	switch {
	case name == "-":
	case strings.EqualFold(filepath.Ext(name), ".toml"):
		isTOML = true
	case strings.EqualFold(filepath.Ext(name), ".json"):
	default:
		return usagef("%s: FILE must end in .toml or .json (or be - for JSON on standard input)", name)
	}
	keyBytes, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	key, err := sig.ParsePrivateKey(keyBytes)
	if err != nil {
		return fmt.Errorf("%s: %v", *keyFile, err)
	}
	var data []byte
	if name == "-" {
		name = "standard input"
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}

	var d *recDescription
	if isTOML {
		d, err = recReadTOML(data)
	} else {
		d, err = recReadJSON(data)
	}
	if err != nil {
		return fmt.Errorf("%s%v", name, err)
	}
	r, err := d.record()
	if err != nil {
		return d.place(name, err)
	}
	hop := key.Public()
	if _, ok := d.fields["hop"]; ok && d.hop != hop {
		return d.place(name, &recFieldError{"hop", fmt.Sprintf("is %s, but -key's public key is %s", d.hop, hop), false})
	}
	// Sign only what a reader would accept (COMPANION §5): the same rules.
	if err := r.Validate(); err != nil {
		var re *reason.Error
		if errors.As(err, &re) {
			field, _, _ := strings.Cut(re.Detail, " ")
			return d.place(name, &recFieldError{field, string(re.Code) + ": " + re.Detail, true})
		}
		return err
	}
	b := evidence.SignRecord(r, key)
	digest := r.Digest()
	if *out == "" {
		if _, err := e.stdout.Write(b); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, digest)
		return nil
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, digest)
	return nil
}

// A recDescription is a record as a person writes it: a TOML or JSON document
// read into a tree of values, with the line of each field when it is known.
type recDescription struct {
	fields map[string]any
	lines  map[string]int    // "tracks[1].kind" → line
	raws   map[string]string // a TOML date-time's text, for its fraction
	hop    sig.PublicKey
}

// recFieldError is a mistake in one field. path spells it as the fields are
// written: start, tracks[1].kind.
type recFieldError struct {
	path string
	msg  string
	rule bool // msg already names the field (a rule of COMPANION §5)
}

func (e *recFieldError) Error() string {
	if e.rule {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// place says where in the file a field's mistake is.
func (d *recDescription) place(name string, err error) error {
	var fe *recFieldError
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

// recReadTOML reads a description from a TOML document. go-toml gives the
// values (its DecodeError places a syntax mistake); its parser, run a
// second time, gives each field's line.
func recReadTOML(data []byte) (*recDescription, error) {
	var fields map[string]any
	if err := toml.Unmarshal(data, &fields); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, fmt.Errorf(":%d:%d: %s", line, col, strings.TrimPrefix(de.Error(), "toml: "))
		}
		return nil, fmt.Errorf(": %v", err)
	}
	d := &recDescription{fields: fields, lines: map[string]int{}, raws: map[string]string{}}
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

// recReadJSON reads a description from one JSON object, token by token so as
// to refuse a key given twice (encoding/json would keep the last) and to
// know each field's line.
func recReadJSON(data []byte) (*recDescription, error) {
	d := &recDescription{lines: map[string]int{}}
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
func (d *recDescription) record() (*evidence.Record, error) {
	known := map[string]bool{"room": true, "hop": true, "start": true, "end": true, "class": true,
		"joules": true, "sessions": true, "tracks": true, "subscriber_us": true}
	names := make([]string, 0, len(d.fields))
	for k := range d.fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			return nil, &recFieldError{k, "not a field of a record (room, hop, start, end, class, joules, sessions, tracks, subscriber_us)", false}
		}
	}
	for _, k := range []string{"room", "start", "end", "class"} {
		if _, ok := d.fields[k]; !ok {
			return nil, &recFieldError{k, "missing", false}
		}
	}
	r := new(evidence.Record)
	var err error
	if r.Room, err = recHex("room", d.fields["room"]); err != nil {
		return nil, err
	}
	if v, ok := d.fields["hop"]; ok {
		h, err := recHex("hop", v)
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
	if r.Class, err = recClass(d.fields["class"]); err != nil {
		return nil, err
	}
	if v, ok := d.fields["joules"]; ok {
		if r.Joules, err = recJoules(v); err != nil {
			return nil, err
		}
	}
	if v, ok := d.fields["sessions"]; ok {
		s, err := recUint("sessions", v, 32)
		if err != nil {
			return nil, err
		}
		r.Sessions = uint32(s)
	}
	if v, ok := d.fields["tracks"]; ok {
		if r.Tracks, err = recTracks(v); err != nil {
			return nil, err
		}
	}
	if v, ok := d.fields["subscriber_us"]; ok {
		if r.SubscriberUs, err = recSubscriberUs(v); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func recHex(path string, v any) (sig.Hash, error) {
	var h sig.Hash
	s, ok := v.(string)
	if !ok {
		return h, &recFieldError{path, "is " + recKindOf(v) + ", not a string of 64 hexadecimal digits", false}
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, &recFieldError{path, fmt.Sprintf("%q is not 64 hexadecimal digits", s), false}
	}
	copy(h[:], b)
	return h, nil
}

// recKindOf names a value's type as the description's reader sees it.
func recKindOf(v any) string {
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

func recIsDigits(s string) bool {
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

// recUint reads an unsigned integer of the given width: a TOML or JSON
// integer, or a string of decimal digits. Never a float: a float is not
// exact.
func recUint(path string, v any, bits int) (uint64, error) {
	var s string
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, &recFieldError{path, fmt.Sprintf("%d is negative", x), false}
		}
		s = strconv.FormatInt(x, 10)
	case json.Number:
		s = string(x)
	case string:
		if !recIsDigits(x) {
			return 0, &recFieldError{path, fmt.Sprintf("%q is not an integer", x), false}
		}
		s = x
	default:
		return 0, &recFieldError{path, "is " + recKindOf(v) + ", not an integer", false}
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &recFieldError{path, fmt.Sprintf("%s is above the largest u%d", s, bits), false}
		}
		return 0, &recFieldError{path, fmt.Sprintf("%s is not an integer of 0 or above", s), false}
	}
	return n, nil
}

// micros reads start or end: µs on the room clock, the Unix epoch's
// (COMPANION §4), as an integer or an RFC 3339 time, converted exactly.
func (d *recDescription) micros(path string) (uint64, error) {
	v := d.fields[path]
	var t time.Time
	var text string
	switch x := v.(type) {
	case time.Time: // TOML's offset date-time
		t, text = x, d.raws[path]
	case toml.LocalDateTime, toml.LocalDate, toml.LocalTime:
		return 0, &recFieldError{path, "a date-time with no offset is no instant: add Z or ±hh:mm", false}
	case string:
		if recIsDigits(x) {
			return recUint(path, x, 64)
		}
		var err error
		if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
			return 0, &recFieldError{path, fmt.Sprintf("%q is neither an integer of µs nor an RFC 3339 time", x), false}
		}
		text = x
	default:
		return recUint(path, v, 64)
	}
	if t.Before(time.Unix(0, 0)) {
		return 0, &recFieldError{path, "is before the Unix epoch, where the room clock starts", false}
	}
	// Exactly: no digit past the microsecond may be dropped.
	if t.Nanosecond()%1000 != 0 || !recFractionInMicros(text) {
		return 0, &recFieldError{path, "is finer than a microsecond", false}
	}
	return uint64(t.Unix())*1_000_000 + uint64(t.Nanosecond()/1000), nil
}

// recFractionInMicros reports whether a date-time's seconds fraction has no
// digit other than 0 after its sixth (parsers keep nine at most).
func recFractionInMicros(text string) bool {
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

// recClass reads the class: a label of COMPANION §3, "unmetered", or the
// tag as an integer, which Validate then judges.
func recClass(v any) (evidence.Class, error) {
	if s, ok := v.(string); ok {
		if s == "unmetered" {
			return evidence.Unmetered, nil
		}
		for c := evidence.Class(0); c < 8; c++ {
			if c.IsClass() && c.Label() == s {
				return c, nil
			}
		}
		return 0, &recFieldError{"class", fmt.Sprintf("%q is not ModelBased, Estimator, OnChipCounter, CalibratedInstrument or unmetered", s), false}
	}
	n, err := recUint("class", v, 8)
	return evidence.Class(n), err
}

// recJoules reads joules: an integer of µJ, or a decimal with a unit,
// converted exactly; a value that is not a whole number of µJ is refused.
func recJoules(v any) (uint64, error) {
	s, ok := v.(string)
	if !ok {
		if _, isFloat := v.(float64); isFloat {
			return 0, &recFieldError{"joules", `is a float, which is not exact: write an integer of µJ, or a string such as "12.5J"`, false}
		}
		return recUint("joules", v, 64)
	}
	if recIsDigits(s) {
		return recUint("joules", s, 64)
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
	if !recIsDigits(whole) || (frac != "" && !recIsDigits(frac)) || strings.HasSuffix(num, ".") {
		return 0, &recFieldError{"joules", fmt.Sprintf("%q is not an integer of µJ or a decimal with a unit µJ, uJ, mJ or J", s), false}
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > exp {
		return 0, &recFieldError{"joules", fmt.Sprintf("%q is not a whole number of µJ", s), false}
	}
	n, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", exp-len(frac)), 10)
	if !ok || !n.IsUint64() {
		return 0, &recFieldError{"joules", fmt.Sprintf("%q is above the largest recU64 of µJ", s), false}
	}
	return n.Uint64(), nil
}

func recTracks(v any) ([]evidence.Track, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, &recFieldError{"tracks", "is " + recKindOf(v) + ", not an array of tracks", false}
	}
	var ts []evidence.Track
	for i, e := range a {
		path := fmt.Sprintf("tracks[%d]", i)
		m, ok := e.(map[string]any)
		if !ok {
			return nil, &recFieldError{path, "is " + recKindOf(e) + ", not a table of kind, direction and bytes", false}
		}
		for _, k := range recSortedKeys(m) {
			if k != "kind" && k != "direction" && k != "bytes" {
				return nil, &recFieldError{path + "." + k, "not a field of a track (kind, direction, bytes)", false}
			}
		}
		var t evidence.Track
		var err error
		if t.Kind, err = recNamedByte(path+".kind", m["kind"], "media", evidence.KindMedia, "other", evidence.KindOther); err != nil {
			return nil, err
		}
		if t.Direction, err = recNamedByte(path+".direction", m["direction"], "in", evidence.DirIn, "out", evidence.DirOut); err != nil {
			return nil, err
		}
		if _, ok := m["bytes"]; !ok {
			return nil, &recFieldError{path + ".bytes", "missing", false}
		}
		if t.Bytes, err = recUint(path+".bytes", m["bytes"], 64); err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func recSortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// recNamedByte reads a track's kind or direction: its name, or its number.
func recNamedByte(path string, v any, name1 string, v1 uint8, name2 string, v2 uint8) (uint8, error) {
	switch s := v.(type) {
	case nil:
		return 0, &recFieldError{path, "missing", false}
	case string:
		switch s {
		case name1:
			return v1, nil
		case name2:
			return v2, nil
		}
		return 0, &recFieldError{path, fmt.Sprintf("%q is not %q or %q", s, name1, name2), false}
	}
	n, err := recUint(path, v, 8)
	return uint8(n), err
}

func recSubscriberUs(v any) ([8]uint64, error) {
	var us [8]uint64
	switch x := v.(type) {
	case []any:
		if len(x) != len(us) {
			return us, &recFieldError{"subscriber_us", fmt.Sprintf("has %d entries, not 8 (layer classes 0 to 7)", len(x)), false}
		}
		for c, e := range x {
			var err error
			if us[c], err = recUint(fmt.Sprintf("subscriber_us[%d]", c), e, 64); err != nil {
				return us, err
			}
		}
	case map[string]any:
		for _, k := range recSortedKeys(x) {
			c, err := strconv.Atoi(k)
			if err != nil || c < 0 || c > 7 || strconv.Itoa(c) != k {
				return us, &recFieldError{"subscriber_us." + k, "is not a layer class 0 to 7", false}
			}
			if us[c], err = recUint("subscriber_us."+k, x[k], 64); err != nil {
				return us, err
			}
		}
	default:
		return us, &recFieldError{"subscriber_us", "is " + recKindOf(v) + ", not 8 integers or a table by layer class", false}
	}
	return us, nil
}

const recordShowUsage = `[-room HEX] [-json] [-split] FILE

Prints the per-hop session record in FILE (- reads standard input) with its
digest; with -room, checks it against the room id (wrong_room, bad_key,
bad_signature). A record that does not read, or does not check, prints its
refusal code and exits 1. -split reads FILE as records written back to back.`

func recordShow(e *env, args []string) error {
	fs := newFlags(e, "record show", recordShowUsage)
	roomHex := fs.String("room", "", "check the record against this room id (64 hexadecimal digits)")
	asJSON := fs.Bool("json", false, "print JSON: one object for each record")
	split := fs.Bool("split", false, "read FILE as one or more records written back to back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("one FILE is needed (- for standard input)")
	}
	var room *sig.Hash
	if *roomHex != "" {
		h, err := sig.ParseHash(*roomHex)
		if err != nil {
			return usagef("-room: %v", err)
		}
		room = &h
	}
	var data []byte
	var err error
	if name := fs.Arg(0); name == "-" {
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}
	pieces := [][]byte{data}
	var tailErr error
	tailAt := 0
	if *split {
		pieces, tailErr = evidence.SplitRecords(data)
		for _, p := range pieces {
			tailAt += len(p)
		}
	}
	refused := false
	for i, p := range pieces {
		if *split && !*asJSON {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "record %d, %d bytes\n", i, len(p))
		}
		if !recShowOne(e, p, room, *asJSON) {
			refused = true
		}
	}
	if tailErr != nil {
		refused = true
		if *asJSON {
			recWriteJSON(e, recRefusal(tailErr, tailAt))
		} else {
			if len(pieces) > 0 {
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "refuse %v\n", tailErr)
		}
	}
	if refused {
		return exitCode(1)
	}
	return nil
}

// recJSON is `record show -json`'s object. Integers that can pass 2^53
// are decimal strings, as in the corpus file (COMPANION §8).
type recJSON struct {
	Outcome      string         `json:"outcome"`
	Reason       string         `json:"reason,omitempty"`
	Detail       string         `json:"detail,omitempty"`
	Offset       *int           `json:"offset,omitempty"`
	Digest       string         `json:"digest,omitempty"`
	Room         string         `json:"room,omitempty"`
	Hop          string         `json:"hop,omitempty"`
	Start        string         `json:"start,omitempty"`
	End          string         `json:"end,omitempty"`
	Class        *uint8         `json:"class,omitempty"`
	Label        string         `json:"label,omitempty"`
	Joules       string         `json:"joules,omitempty"`
	Sessions     *uint32        `json:"sessions,omitempty"`
	Tracks       []recJSONTrack `json:"tracks,omitempty"`
	SubscriberUs []string       `json:"subscriber_us,omitempty"`
	Sig          string         `json:"sig,omitempty"`
	Check        *recJSONCheck  `json:"check,omitempty"`
}

type recJSONTrack struct {
	Kind      string `json:"kind"`
	Direction string `json:"direction"`
	Bytes     string `json:"bytes"`
}

type recJSONCheck struct {
	Room    string `json:"room"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

func recRefusal(err error, offset int) recJSON {
	j := recJSON{Outcome: "refuse", Reason: string(reason.Of(err)), Detail: err.Error()}
	var re *reason.Error
	if errors.As(err, &re) {
		j.Detail = re.Detail
	}
	if offset >= 0 {
		j.Offset = &offset
	}
	return j
}

func recWriteJSON(e *env, v any) {
	b, _ := json.Marshal(v) // plain strings, numbers and slices: Marshal cannot fail
	fmt.Fprintf(e.stdout, "%s\n", b)
}

// recShowOne prints one record and reports whether it reads and checks.
func recShowOne(e *env, b []byte, room *sig.Hash, asJSON bool) bool {
	r, err := evidence.ParseRecord(b)
	if err != nil {
		if asJSON {
			recWriteJSON(e, recRefusal(err, -1))
		} else {
			fmt.Fprintf(e.stdout, "refuse %v\n", err)
		}
		return false
	}
	var checkErr error
	if room != nil {
		checkErr = r.Check(*room)
	}
	label := r.Class.Label()
	if r.Class == evidence.Unmetered {
		label = "unmetered"
	}
	if asJSON {
		class, sessions := uint8(r.Class), r.Sessions
		j := recJSON{
			Outcome: "accept", Digest: r.Digest().String(), Room: r.Room.String(), Hop: r.Hop.String(),
			Start: recU64(r.Start), End: recU64(r.End), Class: &class, Label: label, Joules: recU64(r.Joules),
			Sessions: &sessions, Tracks: []recJSONTrack{}, Sig: r.Sig.String(),
		}
		for _, t := range r.Tracks {
			j.Tracks = append(j.Tracks, recJSONTrack{recTrackKind(t.Kind), recTrackDirection(t.Direction), recU64(t.Bytes)})
		}
		for _, us := range r.SubscriberUs {
			j.SubscriberUs = append(j.SubscriberUs, recU64(us))
		}
		if room != nil {
			j.Check = &recJSONCheck{Room: room.String(), Outcome: "accept"}
			if checkErr != nil {
				j.Outcome = "refuse"
				j.Check.Outcome, j.Check.Reason = "refuse", string(reason.Of(checkErr))
				var re *reason.Error
				if errors.As(checkErr, &re) {
					j.Check.Detail = re.Detail
				}
			}
		}
		recWriteJSON(e, j)
		return checkErr == nil
	}
	w := e.stdout
	fmt.Fprintf(w, "digest         %s\n", r.Digest())
	fmt.Fprintf(w, "room           %s\n", r.Room)
	fmt.Fprintf(w, "hop            %s\n", r.Hop)
	fmt.Fprintf(w, "start          %d µs%s\n", r.Start, recRoomTime(r.Start))
	fmt.Fprintf(w, "end            %d µs%s\n", r.End, recRoomTime(r.End))
	fmt.Fprintf(w, "span           %d µs\n", r.End-r.Start)
	fmt.Fprintf(w, "class          %d %s\n", r.Class, label)
	fmt.Fprintf(w, "joules         %d µJ\n", r.Joules)
	fmt.Fprintf(w, "sessions       %d\n", r.Sessions)
	fmt.Fprintf(w, "tracks         %d\n", len(r.Tracks))
	for i, t := range r.Tracks {
		fmt.Fprintf(w, "  %-12s %s %s %d bytes\n", fmt.Sprintf("[%d]", i), recTrackKind(t.Kind), recTrackDirection(t.Direction), t.Bytes)
	}
	fmt.Fprintf(w, "subscriber_us ")
	for _, us := range r.SubscriberUs {
		fmt.Fprintf(w, " %d", us)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "sig            %s\n", r.Sig)
	if room != nil {
		if checkErr != nil {
			fmt.Fprintf(w, "refuse %v\n", checkErr)
			return false
		}
		fmt.Fprintf(w, "check          accept in room %s\n", room)
	}
	return true
}

func recU64(v uint64) string { return strconv.FormatUint(v, 10) }

// recRoomTime writes a room clock instant (COMPANION §4: µs since the Unix
// epoch, UTC) as RFC 3339, when it is within the years RFC 3339 writes.
func recRoomTime(us uint64) string {
	const year10000 = 253402300800_000_000
	if us >= year10000 {
		return ""
	}
	return " (" + time.UnixMicro(int64(us)).UTC().Format("2006-01-02T15:04:05.999999Z07:00") + ")"
}

func recTrackKind(k uint8) string {
	switch k {
	case evidence.KindMedia:
		return "media"
	case evidence.KindOther:
		return "other"
	}
	return strconv.Itoa(int(k))
}

func recTrackDirection(d uint8) string {
	switch d {
	case evidence.DirIn:
		return "in"
	case evidence.DirOut:
		return "out"
	}
	return strconv.Itoa(int(d))
}
