package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/waisteer/waisteer/verify"
)

// Format is the value of the file's "format" member (COMPANION §8).
const Format = "wai-steering-vectors/1"

// File is a corpus file (COMPANION §8): the room most vectors share, the
// requests with the reports §4 reads from them, and the vectors with the
// outcome §9.3 gives them.
type File struct {
	Room     Room
	Requests []Request
	Vectors  []Vector
}

// Room is a room descriptor and the head of its origin's key log, nil when
// the file writes null (none given).
type Room struct {
	Descriptor []byte
	KeyLogHead []byte
}

// Request is a steering request and the report §4 reads from it.
type Request struct {
	Name     string
	Policy   []byte
	Target   string   // the request target, path and query as sent
	Headers  []Header // in the file's order
	Protocol int      // 1 HLS, 2 DASH (§7.1, COMPANION §6)
	Report   Report
}

// Header is one of a request's header fields.
type Header struct{ Name, Value string }

// Report is a request's report as the file writes it (COMPANION §8): c as the
// policy's index, T and B in decimal; nil when absent.
type Report struct {
	Pathway    *int
	Throughput *string
	Buffer     *string
}

// Vector is a verifier's input and the outcome the file states for it.
type Vector struct {
	Name     string
	Room     *Room // nil: the file's room
	Policy   []byte
	Decision []byte
	Records  [][]byte
	Manifest []byte // nil: none given (null)
	Outcome  string // "accept" or "refuse"
	Reason   string // refuse only
	Where    string // refuse only
	Facts    *verify.Facts
}

// Outcomes of a vector (COMPANION §8).
const (
	Accept = "accept"
	Refuse = "refuse"
)

// The file's JSON shapes, their members in COMPANION §8's order.
type (
	fileJSON struct {
		Format   string        `json:"format"`
		Room     roomJSON      `json:"room"`
		Requests []requestJSON `json:"requests"`
		Vectors  []vectorJSON  `json:"vectors"`
	}
	roomJSON struct {
		Descriptor string  `json:"descriptor"`
		KeyLogHead *string `json:"key_log_head"`
	}
	requestJSON struct {
		Name     string            `json:"name"`
		Policy   string            `json:"policy"`
		Target   string            `json:"target"`
		Headers  map[string]string `json:"headers"`
		Protocol int               `json:"protocol"`
		Report   reportJSON        `json:"report"`
	}
	reportJSON struct {
		Pathway    *int    `json:"pathway"`
		Throughput *string `json:"throughput"`
		Buffer     *string `json:"buffer"`
	}
	vectorJSON struct {
		Name     string        `json:"name"`
		Room     *roomJSON     `json:"room,omitempty"`
		Policy   string        `json:"policy"`
		Decision string        `json:"decision"`
		Records  []string      `json:"records"`
		Manifest *string       `json:"manifest"`
		Outcome  string        `json:"outcome"`
		Reason   string        `json:"reason,omitempty"`
		Where    string        `json:"where,omitempty"`
		Facts    *verify.Facts `json:"facts,omitempty"`
	}
)

func roomToJSON(r Room) roomJSON {
	j := roomJSON{Descriptor: hex.EncodeToString(r.Descriptor)}
	if r.KeyLogHead != nil {
		s := hex.EncodeToString(r.KeyLogHead)
		j.KeyLogHead = &s
	}
	return j
}

// Marshal writes f as COMPANION §8's JSON: members in its order, byte
// strings in lowercase hexadecimal, one space of indent per level, headers
// in bytewise order of name, nothing escaped that JSON does not require
// (`<`, `>` and `&` stay as they are), and a final newline. The same File
// gives the same bytes.
func Marshal(f *File) ([]byte, error) {
	j := fileJSON{Format: Format, Room: roomToJSON(f.Room), Requests: []requestJSON{}, Vectors: []vectorJSON{}}
	for _, r := range f.Requests {
		h := map[string]string{}
		for _, x := range r.Headers {
			if _, dup := h[x.Name]; dup {
				return nil, fmt.Errorf("conformance: request %q: header %q twice", r.Name, x.Name)
			}
			h[x.Name] = x.Value
		}
		j.Requests = append(j.Requests, requestJSON{
			Name: r.Name, Policy: hex.EncodeToString(r.Policy), Target: r.Target, Headers: h,
			Protocol: r.Protocol, Report: reportJSON(r.Report),
		})
	}
	for _, v := range f.Vectors {
		vj := vectorJSON{
			Name: v.Name, Policy: hex.EncodeToString(v.Policy), Decision: hex.EncodeToString(v.Decision),
			Records: []string{}, Outcome: v.Outcome, Reason: v.Reason, Where: v.Where, Facts: v.Facts,
		}
		if v.Room != nil {
			r := roomToJSON(*v.Room)
			vj.Room = &r
		}
		for _, raw := range v.Records {
			vj.Records = append(vj.Records, hex.EncodeToString(raw))
		}
		if v.Manifest != nil {
			s := string(v.Manifest)
			vj.Manifest = &s
		}
		j.Vectors = append(j.Vectors, vj)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(&j); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// FormatError is a file that is not of COMPANION §8's format: where in the
// file (a path of members and indices) and what is wrong there.
type FormatError struct {
	Path string
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Path == "" {
		return "not a corpus file: " + e.Msg
	}
	return "not a corpus file: at " + e.Path + ": " + e.Msg
}

// Parse reads a corpus file strictly: UTF-8 JSON (RFC 8259) with no member
// named twice in an object and nothing after the value, of exactly COMPANION
// §8's shape: every member it names, spelled as it spells it, and no other;
// byte strings in lowercase hexadecimal; decimal strings of digits with no
// leading zero; null only where §8 allows it; `reason` and `where` on a
// refusal alone, `facts` on an acceptance alone. It never panics; what does
// not read is a *FormatError.
func Parse(b []byte) (*File, error) {
	if !utf8.Valid(b) {
		return nil, &FormatError{Msg: "not UTF-8"}
	}
	root, err := parseJSON(b)
	if err != nil {
		return nil, err
	}
	var r reader
	f := r.file(root)
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}

// node is a JSON value read with its members in order.
type node struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, '0' null
	members []member
	items   []*node
	str     string
	num     json.Number
	b       bool
}

type member struct {
	name  string
	value *node
}

// parseJSON reads one JSON value from b and requires nothing after it.
func parseJSON(b []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := readValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FormatError{Msg: "data after the JSON value"}
	}
	return n, nil
}

func jsonError(path string, err error) error {
	if errors.Is(err, io.EOF) {
		return &FormatError{Path: path, Msg: "the JSON text ends early"}
	}
	return &FormatError{Path: path, Msg: "not JSON: " + err.Error()}
}

// maxDepth bounds the nesting of a file's values: COMPANION §8's deepest is
// a pathway's limits, at 7. A deeper value is not of the format, and is
// refused before it is read, so that no input exhausts the stack.
const maxDepth = 16

func readValue(dec *json.Decoder, path string, depth int) (*node, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, jsonError(path, err)
	}
	switch t := t.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, &FormatError{Path: path, Msg: "values nested too deep"}
		}
		switch t {
		case '{':
			n := &node{kind: 'o'}
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, jsonError(path, err)
				}
				name := k.(string) // the decoder gives an object's names as strings
				if seen[name] {
					return nil, &FormatError{Path: path, Msg: fmt.Sprintf("member %q named twice", name)}
				}
				seen[name] = true
				v, err := readValue(dec, path+"."+name, depth+1)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, member{name, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonError(path, err)
			}
			return n, nil
		case '[':
			n := &node{kind: 'a'}
			for i := 0; dec.More(); i++ {
				v, err := readValue(dec, path+"["+strconv.Itoa(i)+"]", depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonError(path, err)
			}
			return n, nil
		}
		return nil, &FormatError{Path: path, Msg: fmt.Sprintf("unexpected %q", t)}
	case string:
		return &node{kind: 's', str: t}, nil
	case json.Number:
		return &node{kind: 'n', num: t}, nil
	case bool:
		return &node{kind: 'b', b: t}, nil
	case nil:
		return &node{kind: '0'}, nil
	}
	return nil, &FormatError{Path: path, Msg: "unexpected token"}
}

// reader maps nodes to the file's types, keeping the first error.
type reader struct{ err error }

func (r *reader) fail(path, format string, args ...any) {
	if r.err == nil {
		r.err = &FormatError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

var kindName = map[byte]string{'o': "an object", 'a': "an array", 's': "a string", 'n': "a number", 'b': "a boolean", '0': "null"}

// object checks that n is an object whose members are exactly the required
// ones and any of the optional ones, and returns them by name.
func (r *reader) object(n *node, path string, required, optional []string) map[string]*node {
	if n.kind != 'o' {
		r.fail(path, "%s, not an object", kindName[n.kind])
		return nil
	}
	allowed := map[string]bool{}
	for _, k := range append(required, optional...) {
		allowed[k] = true
	}
	m := map[string]*node{}
	for _, x := range n.members {
		if !allowed[x.name] {
			r.fail(path, "member %q is not one COMPANION §8 names here", x.name)
			return nil
		}
		m[x.name] = x.value
	}
	for _, k := range required {
		if m[k] == nil {
			r.fail(path, "member %q is missing", k)
			return nil
		}
	}
	return m
}

func (r *reader) array(n *node, path string) []*node {
	if n.kind != 'a' {
		r.fail(path, "%s, not an array", kindName[n.kind])
		return nil
	}
	return n.items
}

func (r *reader) str(n *node, path string) string {
	if n.kind != 's' {
		r.fail(path, "%s, not a string", kindName[n.kind])
		return ""
	}
	return n.str
}

func (r *reader) boolean(n *node, path string) bool {
	if n.kind != 'b' {
		r.fail(path, "%s, not a boolean", kindName[n.kind])
	}
	return n.b
}

// integer reads a JSON number that is an integer from min to max, written
// with digits alone.
func (r *reader) integer(n *node, path string, min, max uint64) uint64 {
	if n.kind != 'n' {
		r.fail(path, "%s, not an integer", kindName[n.kind])
		return 0
	}
	s := string(n.num)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || !isDecimal(s) || v < min || v > max {
		r.fail(path, "%s is not an integer from %d to %d", s, min, max)
		return 0
	}
	return v
}

// hexBytes reads a byte string: lowercase hexadecimal, two digits a byte.
// An empty string is zero bytes, which is given (not nil).
func (r *reader) hexBytes(n *node, path string) []byte {
	s := r.str(n, path)
	if r.err != nil {
		return nil
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			r.fail(path, "not lowercase hexadecimal: byte %d is %q", i, c)
			return nil
		}
	}
	if len(s)%2 != 0 {
		r.fail(path, "an odd count of hexadecimal digits")
		return nil
	}
	b := make([]byte, len(s)/2)
	hex.Decode(b, []byte(s)) // checked above
	return b
}

// nullable returns nil for null, and otherwise read's value.
func nullable[T any](r *reader, n *node, path string, read func(*node, string) T) *T {
	if n.kind == '0' {
		return nil
	}
	v := read(n, path)
	return &v
}

func isDecimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decimal reads a decimal string (COMPANION §8: integers that can pass 2^53)
// of at most bits bits: digits, no leading zero.
func (r *reader) decimal(bits int) func(*node, string) string {
	return func(n *node, path string) string {
		s := r.str(n, path)
		if r.err != nil {
			return ""
		}
		v, ok := new(big.Int).SetString(s, 10)
		if !isDecimal(s) || !ok || v.BitLen() > bits {
			r.fail(path, "%q is not a decimal string of a %d-bit integer", s, bits)
		}
		return s
	}
}

func (r *reader) file(n *node) *File {
	m := r.object(n, "", []string{"format", "room", "requests", "vectors"}, nil)
	if r.err != nil {
		return nil
	}
	if v := r.str(m["format"], ".format"); r.err == nil && v != Format {
		r.fail(".format", "%q, not %q", v, Format)
	}
	f := &File{Room: r.room(m["room"], ".room")}
	for i, x := range r.array(m["requests"], ".requests") {
		f.Requests = append(f.Requests, r.request(x, fmt.Sprintf(".requests[%d]", i)))
	}
	for i, x := range r.array(m["vectors"], ".vectors") {
		f.Vectors = append(f.Vectors, r.vector(x, fmt.Sprintf(".vectors[%d]", i)))
	}
	if r.err != nil {
		return nil
	}
	return f
}

func (r *reader) room(n *node, path string) Room {
	m := r.object(n, path, []string{"descriptor", "key_log_head"}, nil)
	if r.err != nil {
		return Room{}
	}
	rm := Room{Descriptor: r.hexBytes(m["descriptor"], path+".descriptor")}
	if h := nullable(r, m["key_log_head"], path+".key_log_head", r.hexBytes); h != nil {
		rm.KeyLogHead = *h
	}
	return rm
}

func (r *reader) request(n *node, path string) Request {
	m := r.object(n, path, []string{"name", "policy", "target", "headers", "protocol", "report"}, nil)
	if r.err != nil {
		return Request{}
	}
	q := Request{
		Name:   r.str(m["name"], path+".name"),
		Policy: r.hexBytes(m["policy"], path+".policy"),
		Target: r.str(m["target"], path+".target"),
	}
	path += fmt.Sprintf(" (%q)", q.Name)
	if h := m["headers"]; h.kind != 'o' {
		r.fail(path+".headers", "%s, not an object", kindName[h.kind])
	} else {
		for _, x := range h.members {
			q.Headers = append(q.Headers, Header{Name: x.name, Value: r.str(x.value, path+".headers."+x.name)})
		}
	}
	q.Protocol = int(r.integer(m["protocol"], path+".protocol", 1, 2))
	rep := r.object(m["report"], path+".report", []string{"pathway", "throughput", "buffer"}, nil)
	if r.err != nil {
		return q
	}
	if c := nullable(r, rep["pathway"], path+".report.pathway", func(n *node, p string) int { return int(r.integer(n, p, 0, 255)) }); c != nil {
		q.Report.Pathway = c
	}
	q.Report.Throughput = nullable(r, rep["throughput"], path+".report.throughput", r.decimal(64))
	q.Report.Buffer = nullable(r, rep["buffer"], path+".report.buffer", r.decimal(64))
	return q
}

func (r *reader) vector(n *node, path string) Vector {
	m := r.object(n, path, []string{"name", "policy", "decision", "records", "manifest", "outcome"},
		[]string{"room", "reason", "where", "facts"})
	if r.err != nil {
		return Vector{}
	}
	v := Vector{Name: r.str(m["name"], path+".name")}
	path += fmt.Sprintf(" (%q)", v.Name)
	if x := m["room"]; x != nil {
		rm := r.room(x, path+".room")
		v.Room = &rm
	}
	v.Policy = r.hexBytes(m["policy"], path+".policy")
	v.Decision = r.hexBytes(m["decision"], path+".decision")
	v.Records = [][]byte{}
	for i, x := range r.array(m["records"], path+".records") {
		v.Records = append(v.Records, r.hexBytes(x, fmt.Sprintf("%s.records[%d]", path, i)))
	}
	if s := nullable(r, m["manifest"], path+".manifest", r.str); s != nil {
		v.Manifest = []byte(*s)
	}
	v.Outcome = r.str(m["outcome"], path+".outcome")
	if r.err != nil {
		return v
	}
	switch v.Outcome {
	case Accept:
		if m["reason"] != nil || m["where"] != nil {
			r.fail(path, "an accepted vector has no reason and no where")
		} else if m["facts"] == nil {
			r.fail(path, "an accepted vector has facts")
		} else {
			v.Facts = r.facts(m["facts"], path+".facts")
		}
	case Refuse:
		if m["facts"] != nil {
			r.fail(path, "a refused vector has no facts")
		} else if m["reason"] == nil || m["where"] == nil {
			r.fail(path, "a refused vector has a reason and a where")
		} else {
			v.Reason = r.str(m["reason"], path+".reason")
			v.Where = r.str(m["where"], path+".where")
		}
	default:
		r.fail(path+".outcome", "%q, not %q or %q", v.Outcome, Accept, Refuse)
	}
	return v
}

func (r *reader) facts(n *node, path string) *verify.Facts {
	m := r.object(n, path, []string{"digest", "priority", "ttl", "reason", "pathways", "manifest", "record_uri", "hls_tag", "dash_element"}, nil)
	if r.err != nil {
		return nil
	}
	f := &verify.Facts{
		TTL:         uint32(r.integer(m["ttl"], path+".ttl", 0, 1<<32-1)),
		Reason:      r.str(m["reason"], path+".reason"),
		Manifest:    r.str(m["manifest"], path+".manifest"),
		RecordURI:   r.str(m["record_uri"], path+".record_uri"),
		HLSTag:      r.str(m["hls_tag"], path+".hls_tag"),
		DASHElement: r.str(m["dash_element"], path+".dash_element"),
		Priority:    []string{},
		Pathways:    []verify.PathwayFacts{},
	}
	f.Digest = hex.EncodeToString(r.hexBytes(m["digest"], path+".digest"))
	for i, x := range r.array(m["priority"], path+".priority") {
		f.Priority = append(f.Priority, r.str(x, fmt.Sprintf("%s.priority[%d]", path, i)))
	}
	for i, x := range r.array(m["pathways"], path+".pathways") {
		p := fmt.Sprintf("%s.pathways[%d]", path, i)
		pm := r.object(x, p, []string{"id", "status", "class", "joules", "delivery", "limits"}, nil)
		if r.err != nil {
			return nil
		}
		lm := r.object(pm["limits"], p+".limits", []string{"latency", "quality", "capacity"}, nil)
		if r.err != nil {
			return nil
		}
		f.Pathways = append(f.Pathways, verify.PathwayFacts{
			ID:       r.str(pm["id"], p+".id"),
			Status:   r.str(pm["status"], p+".status"),
			Class:    int(r.integer(pm["class"], p+".class", 0, 255)),
			Joules:   r.decimal(128)(pm["joules"], p+".joules"),
			Delivery: r.decimal(128)(pm["delivery"], p+".delivery"),
			Limits: verify.Limits{
				Latency:  r.boolean(lm["latency"], p+".limits.latency"),
				Quality:  r.boolean(lm["quality"], p+".limits.quality"),
				Capacity: r.boolean(lm["capacity"], p+".limits.capacity"),
			},
		})
	}
	return f
}
