// Package tomlfile reads the TOML files an operator writes (a steering
// policy, a server's configuration) strictly and says where each mistake is:
// a key the schema does not know is an error, never ignored, and every error
// names the file, the line and the key ("policy.toml:18: pathway[1].latency:
// ..."). The schemas themselves are their packages' (policy/source,
// internal/serve).
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// A File is a document being read into its schema: its name, the line of
// each of its keys, and the mistakes found so far, each at a key.
type File struct {
	Name  string
	lines map[string]int
	errs  []keyError
}

// A keyError is a mistake at a key of the file.
type keyError struct {
	key string // "pathway[1].id"
	msg string
}

// Decode reads doc into v (a struct of toml tags), refusing a key v has no
// field for, and returns the File that places the mistakes found after.
// A syntax error is placed at its line and column; an unknown key (with the
// nearest the table allows: "did you mean") and a value of the wrong type
// (with the type the key takes) at its line, all of them at once (check.go).
func Decode(name string, doc []byte, v any) (*File, error) {
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		if errs := check(name, doc, t.Elem()); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	d := toml.NewDecoder(bytes.NewReader(doc))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return nil, decodeError(name, doc, err)
	}
	return &File{Name: name, lines: KeyLines(doc)}, nil
}

// Errorf records a mistake at key.
func (f *File) Errorf(key, format string, args ...any) {
	f.errs = append(f.errs, keyError{key, fmt.Sprintf(format, args...)})
}

// Failed reports whether a mistake has been recorded.
func (f *File) Failed() bool { return len(f.errs) > 0 }

// Mistakes is the count of mistakes recorded so far.
func (f *File) Mistakes() int { return len(f.errs) }

// At writes "FILE:LINE: KEY" for a key, with the line of the key or, when
// the key is not in the file, of the nearest table that holds it.
func (f *File) At(key string) string {
	if l := f.Line(key); l > 0 {
		return fmt.Sprintf("%s:%d: %s", f.Name, l, key)
	}
	return fmt.Sprintf("%s: %s", f.Name, key)
}

// Line is the line of key, or of the nearest table that holds it; 0 when
// neither is in the file.
func (f *File) Line(key string) int {
	for k := key; k != ""; {
		if l, ok := f.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// Has reports whether key is written in the file.
func (f *File) Has(key string) bool {
	_, ok := f.lines[key]
	return ok
}

// Err joins the mistakes recorded, in the order of their lines; nil when
// there are none.
func (f *File) Err() error {
	slices.SortStableFunc(f.errs, func(a, b keyError) int { return f.Line(a.key) - f.Line(b.key) })
	var errs []error
	for _, e := range f.errs {
		errs = append(errs, fmt.Errorf("%s: %s", f.At(e.key), e.msg))
	}
	return errors.Join(errs...)
}

// decodeError places a decoding error at its line, and its column for syntax.
// An unknown key is named with its table's index, found by its line.
func decodeError(name string, doc []byte, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		lines := KeyLines(doc)
		var errs []error
		for _, e := range strict.Errors {
			row, _ := e.Position()
			key := strings.Join(e.Key(), ".")
			for k, l := range lines {
				if l == row && strings.HasSuffix(k, "."+e.Key()[len(e.Key())-1]) && len(k) > len(key) {
					key = k
				}
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s: unknown key", name, row, key))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", name, row, col, strings.Join(k, "."), msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", name, row, col, msg)
	}
	return fmt.Errorf("%s: %v", name, err)
}

// KeyLines maps each key of a document that decodes to the line it is on:
// "period", "pathway[1]" (the table's header), "pathway[1].hops[0].key",
// "pathway[2].params.token". Array tables are numbered from 0 as they come.
func KeyLines(doc []byte) map[string]int {
	lines := map[string]int{}
	counts := map[string]int{} // each array table, by its path, to how many it has
	var p unstable.Parser
	p.Reset(doc)
	line := func(n *unstable.Node, or int) int {
		if n.Raw.Length == 0 {
			return or
		}
		return p.Shape(n.Raw).Start.Line
	}
	// path resolves a dotted key under prefix: a part that names an array
	// table means its last table.
	path := func(prefix string, it unstable.Iterator, arrayTable bool) (string, int) {
		k, l := prefix, 0
		for it.Next() {
			n := it.Node()
			if k != "" {
				k += "."
			}
			k += string(n.Data)
			l = line(n, l)
			if it.IsLast() && arrayTable {
				i := counts[k]
				counts[k] = i + 1
				k += "[" + strconv.Itoa(i) + "]"
			} else if i, ok := counts[k]; ok {
				k += "[" + strconv.Itoa(i-1) + "]"
			}
		}
		return k, l
	}
	var value func(k string, n *unstable.Node, l int)
	value = func(k string, n *unstable.Node, l int) {
		switch n.Kind {
		case unstable.Array:
			it := n.Children()
			for i := 0; it.Next(); i++ {
				e := it.Node()
				ek := k + "[" + strconv.Itoa(i) + "]"
				lines[ek] = line(e, l)
				value(ek, e, lines[ek])
			}
		case unstable.InlineTable:
			it := n.Children()
			for it.Next() {
				kv := it.Node()
				kk, kl := path(k, kv.Key(), false)
				lines[kk] = kl
				value(kk, kv.Value(), kl)
			}
		}
	}
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			k, l := path("", e.Key(), e.Kind == unstable.ArrayTable)
			table = k
			lines[k] = l
		case unstable.KeyValue:
			k, l := path(table, e.Key(), false)
			lines[k] = l
			value(k, e.Value(), l)
		}
	}
	return lines
}

// Text writes a value of the file as the operator wrote it, for a message:
// a string quoted, anything else as Go prints it.
func Text(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
