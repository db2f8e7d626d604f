// Package dash sets the ContentSteering element of an origin's MPD as the
// front serves it (§8.3, ETSI TS 103 998 clause 5.2). It knows nothing of
// HTTP or configuration: it scans bytes that came from outside, never
// panics, builds no tree, and gives back byte for byte everything it does
// not change.
//
// # What is read
//
// A small XML scanner (XML 1.0) reads the prolog (an optional UTF-8 byte
// order mark, an optional XML declaration at the very start, then comments,
// processing instructions and white space), the root element's start tag,
// and the root's children: their start and end tags, comments, CDATA
// sections and processing instructions, at any depth up to 64, each end tag
// matching its start tag. Character data and entity references are passed
// over unread. A document type declaration is refused rather than read: its
// internal subset could declare entities and default attributes (an xmlns
// among them) that change what the tags mean.
//
// The root is an MPD when its local name is MPD and its prefix (or, with
// none, the default namespace) is bound on it to
// urn:mpeg:dash:schema:mpd:2011, written exactly so.
//
// # Where the element goes
//
// A ContentSteering child of MPD is one whose local name is ContentSteering
// and whose prefix, or default namespace, is bound to the MPD namespace on
// the child itself or else on MPD. The first is replaced where it stands and
// every later one removed, so that the element is never doubled; with none,
// the element goes directly after MPD's start tag, as its first child. The
// MPD schema of ISO/IEC 23009-1 (MPEGGroup/DASHSchema, 5th edition and its
// first amendment) lists no ContentSteering among MPDtype's children, so no
// order of the schema forbids the first place, and dash.js and Shaka Player
// look the element up by name among MPD's children wherever it is.
//
// When white space with a line ending follows MPD's start tag, the element
// is written as a line of its own at the start of the next line, with the
// indentation of the first child (the spaces and tabs that begin its line)
// and the document's line ending (that of its first line); otherwise it is
// written directly after the start tag. An element
// that stands alone on its line is removed with its line; any other, alone.
//
// The element given is one ContentSteering element, unprefixed, self-closing
// or holding character data only, as decision.DASHElement writes it. When
// MPD's default namespace is not the MPD namespace (an MPD written
// <dash:MPD xmlns:dash="...">), it is written with MPD's prefix, start and
// end tag, so that it stays in the MPD namespace.
package dash

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Namespace is the MPD's XML namespace (ISO/IEC 23009-1 clause 5.2).
const Namespace = "urn:mpeg:dash:schema:mpd:2011"

// maxDepth bounds the nesting the scanner follows below MPD.
const maxDepth = 64

// The reasons an MPD is refused; every error wraps one of them.
var (
	ErrNotMPD  = errors.New("not an MPD")
	ErrXML     = errors.New("not well-formed XML")
	ErrEmpty   = errors.New("an MPD with no children (self-closing)")
	ErrElement = errors.New("not one ContentSteering element")
)

// posError is a reason at a byte offset, counted from 0.
type posError struct {
	at     int
	err    error
	detail string
}

func (e *posError) Error() string {
	s := "dash: "
	if e.at >= 0 {
		s += fmt.Sprintf("byte %d: ", e.at)
	}
	s += e.err.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

func (e *posError) Unwrap() error { return e.err }

func errAt(at int, err error, detail string) error {
	return &posError{at: at, err: err, detail: detail}
}

const bom = "\xef\xbb\xbf"

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isNameStart(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_' || c == ':' || c >= 0x80
}

func isNameByte(c byte) bool {
	return isNameStart(c) || '0' <= c && c <= '9' || c == '-' || c == '.'
}

// nameAt is the end of the XML name that begins at i, or i when none does.
func nameAt(b []byte, i int) int {
	if i >= len(b) || !isNameStart(b[i]) {
		return i
	}
	j := i + 1
	for j < len(b) && isNameByte(b[j]) {
		j++
	}
	return j
}

// tag is a start tag b[start:end]: its name b[start+1:nameEnd], its
// attributes within b[nameEnd:end].
type tag struct {
	start, nameEnd, end int
	selfClosing         bool
}

func (t tag) name(b []byte) []byte { return b[t.start+1 : t.nameEnd] }

// startTag reads the start tag at b[i] == '<'.
func startTag(b []byte, i int) (tag, error) {
	t := tag{start: i, nameEnd: nameAt(b, i+1)}
	if t.nameEnd == i+1 {
		return t, errAt(i, ErrXML, "a name expected after '<'")
	}
	j := t.nameEnd
	for {
		sp := j
		for j < len(b) && isSpace(b[j]) {
			j++
		}
		switch {
		case j == len(b):
			return t, errAt(i, ErrXML, "a start tag not closed")
		case b[j] == '>':
			t.end = j + 1
			return t, nil
		case b[j] == '/':
			if j+1 < len(b) && b[j+1] == '>' {
				t.end, t.selfClosing = j+2, true
				return t, nil
			}
			return t, errAt(j, ErrXML, "'/' not followed by '>'")
		case sp == j:
			return t, errAt(j, ErrXML, "white space expected before an attribute")
		}
		var err error
		if _, _, _, j, err = attrAt(b, j); err != nil {
			return t, err
		}
	}
}

// attrAt reads the attribute at b[i]: its name, its value's span (without
// quotes), and where it ends.
func attrAt(b []byte, i int) (name []byte, vs, ve, end int, err error) {
	ne := nameAt(b, i)
	if ne == i {
		return nil, 0, 0, 0, errAt(i, ErrXML, "an attribute name expected")
	}
	j := ne
	for j < len(b) && isSpace(b[j]) {
		j++
	}
	if j == len(b) || b[j] != '=' {
		return nil, 0, 0, 0, errAt(j, ErrXML, "'=' expected after an attribute name")
	}
	j++
	for j < len(b) && isSpace(b[j]) {
		j++
	}
	if j == len(b) || b[j] != '"' && b[j] != '\'' {
		return nil, 0, 0, 0, errAt(j, ErrXML, "a quoted attribute value expected")
	}
	q := bytes.IndexByte(b[j+1:], b[j])
	if q < 0 {
		return nil, 0, 0, 0, errAt(j, ErrXML, "an attribute value not closed")
	}
	vs, ve = j+1, j+1+q
	if k := bytes.IndexByte(b[vs:ve], '<'); k >= 0 {
		return nil, 0, 0, 0, errAt(vs+k, ErrXML, "'<' in an attribute value")
	}
	return b[i:ne], vs, ve, ve + 1, nil
}

// eachAttr calls f with each attribute of the well-formed tag t, in order,
// until f returns false.
func eachAttr(b []byte, t tag, f func(name, value []byte) bool) {
	j := t.nameEnd
	for {
		for isSpace(b[j]) {
			j++
		}
		if b[j] == '>' || b[j] == '/' {
			return
		}
		n, vs, ve, end, _ := attrAt(b, j)
		if !f(n, b[vs:ve]) {
			return
		}
		j = end
	}
}

// prefix is the prefix of the element name n, or nil.
func prefix(n []byte) []byte {
	if i := bytes.IndexByte(n, ':'); i >= 0 {
		return n[:i]
	}
	return nil
}

// binding finds, among t's attributes, the declaration of prefix p (xmlns:p),
// or of the default namespace (xmlns) when p is empty. A declaration made
// twice is an error (XML 1.0 §3.1: an attribute appears once in a tag);
// readers differ on which one counts.
func binding(b []byte, t tag, p []byte) (v []byte, ok bool, err error) {
	eachAttr(b, t, func(n, value []byte) bool {
		if len(p) == 0 && string(n) == "xmlns" ||
			len(p) > 0 && len(n) == len("xmlns:")+len(p) && string(n[:6]) == "xmlns:" && bytes.Equal(n[6:], p) {
			if ok {
				err = errAt(t.start, ErrXML, fmt.Sprintf("%s declared twice", n))
				return false
			}
			v, ok = value, true
		}
		return true
	})
	return v, ok, err
}

// scope is the namespace declarations of MPD, read once, when the first
// child asks for them, so that many children cost one pass over MPD's
// attributes rather than one each.
type scope struct {
	b     []byte
	mpd   tag
	read  bool
	def   []byte            // xmlns, when declared
	decls map[string][]byte // by prefix
	twice map[string]bool   // prefixes declared twice
}

func (s *scope) lookup(p []byte) ([]byte, bool, error) {
	if len(p) == 0 { // MPD's default namespace, read by root already
		return binding(s.b, s.mpd, nil)
	}
	if !s.read {
		s.read = true
		eachAttr(s.b, s.mpd, func(n, v []byte) bool {
			if !bytes.HasPrefix(n, []byte("xmlns:")) {
				return true
			}
			if s.decls == nil {
				s.decls = map[string][]byte{}
			}
			if _, seen := s.decls[string(n[6:])]; seen {
				if s.twice == nil {
					s.twice = map[string]bool{}
				}
				s.twice[string(n[6:])] = true
			}
			s.decls[string(n[6:])] = v
			return true
		})
	}
	if s.twice[string(p)] {
		return nil, false, errAt(s.mpd.start, ErrXML, fmt.Sprintf("xmlns:%s declared twice", p))
	}
	v, ok := s.decls[string(p)]
	return v, ok, nil
}

// inMPDNamespace reports whether the child t of MPD is in the MPD namespace:
// its prefix, or its default namespace, bound so on t or else on MPD.
func inMPDNamespace(b []byte, t tag, s *scope) (bool, error) {
	p := prefix(t.name(b))
	v, ok, err := binding(b, t, p)
	if err == nil && !ok {
		v, ok, err = s.lookup(p)
	}
	return ok && string(v) == Namespace, err
}

func localName(n []byte) []byte {
	if i := bytes.IndexByte(n, ':'); i >= 0 {
		return n[i+1:]
	}
	return n
}

// skip passes over the comment, CDATA section or processing instruction at
// b[i] == '<', returning where it ends, or -1 when none begins there.
func skip(b []byte, i int) (int, error) {
	for _, m := range [...]struct{ open, close, what string }{
		{"<!--", "-->", "a comment"},
		{"<![CDATA[", "]]>", "a CDATA section"},
		{"<?", "?>", "a processing instruction"},
	} {
		if !bytes.HasPrefix(b[i:], []byte(m.open)) {
			continue
		}
		k := bytes.Index(b[i+len(m.open):], []byte(m.close))
		if k < 0 {
			return 0, errAt(i, ErrXML, m.what+" not closed")
		}
		if m.open == "<?" {
			if target := b[i+2 : nameAt(b, i+2)]; len(target) == 0 {
				return 0, errAt(i, ErrXML, "a processing instruction without a target")
			} else if bytes.EqualFold(target, []byte("xml")) {
				return 0, errAt(i, ErrXML, "an XML declaration not at the start")
			}
		}
		return i + len(m.open) + k + len(m.close), nil
	}
	if bytes.HasPrefix(b[i:], []byte("<!DOCTYPE")) {
		return 0, errAt(i, ErrNotMPD, "a document type declaration, which is not read")
	}
	if bytes.HasPrefix(b[i:], []byte("<!")) {
		return 0, errAt(i, ErrXML, "'<!' that begins no comment or CDATA section")
	}
	return -1, nil
}

// endTag reads the end tag at b[i:] == "</", returning its name and end.
func endTag(b []byte, i int) ([]byte, int, error) {
	if !bytes.HasPrefix(b[i:], []byte("</")) {
		return nil, 0, errAt(i, ErrXML, "an end tag expected")
	}
	ne := nameAt(b, i+2)
	if ne == i+2 {
		return nil, 0, errAt(i, ErrXML, "a name expected after '</'")
	}
	j := ne
	for j < len(b) && isSpace(b[j]) {
		j++
	}
	if j == len(b) || b[j] != '>' {
		return nil, 0, errAt(i, ErrXML, "an end tag not closed")
	}
	return b[i+2 : ne], j + 1, nil
}

// root reads the prolog and the root's start tag, requiring an MPD.
func root(b []byte) (tag, error) {
	i := 0
	if bytes.HasPrefix(b, []byte(bom)) {
		i = len(bom)
	}
	if bytes.HasPrefix(b[i:], []byte("<?xml")) && len(b) > i+5 && isSpace(b[i+5]) {
		k := bytes.Index(b[i:], []byte("?>"))
		if k < 0 {
			return tag{}, errAt(i, ErrXML, "the XML declaration not closed")
		}
		i += k + 2
	}
	for {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			return tag{}, errAt(i, ErrNotMPD, "no root element")
		}
		if b[i] != '<' || bytes.HasPrefix(b[i:], []byte("<![CDATA[")) {
			return tag{}, errAt(i, ErrNotMPD, "text before the root element")
		}
		end, err := skip(b, i)
		if err != nil {
			return tag{}, err
		}
		if end < 0 {
			break
		}
		i = end
	}
	t, err := startTag(b, i)
	if err != nil {
		return t, err
	}
	if !bytes.Equal(localName(t.name(b)), []byte("MPD")) {
		return t, errAt(i, ErrNotMPD, fmt.Sprintf("the root element is %.40q", t.name(b)))
	}
	ns, ok, err := binding(b, t, prefix(t.name(b)))
	if err != nil {
		return t, err
	}
	if !ok || string(ns) != Namespace {
		return t, errAt(i, ErrNotMPD, fmt.Sprintf("MPD is in namespace %.60q, not %s", ns, Namespace))
	}
	return t, nil
}

// IsMPD reports whether b is an MPD: its root element is MPD (namespace
// urn:mpeg:dash:schema:mpd:2011), after an optional XML declaration,
// comments and white space. It reads no further than MPD's start tag.
func IsMPD(b []byte) bool {
	_, err := root(b)
	return err == nil
}

// span is b[start:end].
type span struct{ start, end int }

// children scans MPD's content, returning the ContentSteering children (in
// the MPD namespace) and where MPD's end tag begins. Nesting below them is
// followed to maxDepth, each end tag matched to its start tag.
func children(b []byte, mpd tag, found []span) ([]span, int, error) {
	var open [maxDepth]span // the names of the elements open below MPD
	depth := 0
	sc := scope{b: b, mpd: mpd}
	steering := -1 // where the ContentSteering child being read began
	i := mpd.end
	for {
		k := bytes.IndexByte(b[i:], '<')
		if k < 0 {
			return found, 0, errAt(mpd.start, ErrXML, "MPD not closed")
		}
		i += k
		end, err := skip(b, i)
		if err != nil {
			return found, 0, err
		}
		if end >= 0 {
			i = end
			continue
		}
		if bytes.HasPrefix(b[i:], []byte("</")) {
			name, end, err := endTag(b, i)
			if err != nil {
				return found, 0, err
			}
			if depth == 0 {
				if !bytes.Equal(name, mpd.name(b)) {
					return found, 0, errAt(i, ErrXML, fmt.Sprintf("end tag %.40q closes %q", name, mpd.name(b)))
				}
				return found, i, nil
			}
			depth--
			if o := open[depth]; !bytes.Equal(name, b[o.start:o.end]) {
				return found, 0, errAt(i, ErrXML, fmt.Sprintf("end tag %.40q closes %.40q", name, b[o.start:o.end]))
			}
			if depth == 0 && steering >= 0 {
				found = append(found, span{steering, end})
				steering = -1
			}
			i = end
			continue
		}
		t, err := startTag(b, i)
		if err != nil {
			return found, 0, err
		}
		if depth == 0 && bytes.Equal(localName(t.name(b)), []byte("ContentSteering")) {
			in, err := inMPDNamespace(b, t, &sc)
			if err != nil {
				return found, 0, err
			}
			if in {
				if t.selfClosing {
					found = append(found, span{t.start, t.end})
				} else {
					steering = t.start
				}
			}
		}
		if !t.selfClosing {
			if depth == maxDepth {
				return found, 0, errAt(i, ErrXML, fmt.Sprintf("elements nested deeper than %d below MPD", maxDepth))
			}
			open[depth] = span{t.start + 1, t.nameEnd}
			depth++
		}
		i = t.end
	}
}

// checkEnd requires nothing but white space, comments and processing
// instructions after MPD's end tag at i.
func checkEnd(b []byte, i int) error {
	_, i, err := endTag(b, i)
	if err != nil {
		return err
	}
	for {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			return nil
		}
		if b[i] != '<' || bytes.HasPrefix(b[i:], []byte("<![CDATA[")) {
			return errAt(i, ErrXML, "content after the MPD element")
		}
		end, err := skip(b, i)
		if err != nil {
			return err
		}
		if end < 0 {
			return errAt(i, ErrXML, "an element after the MPD element")
		}
		i = end
	}
}

// checkElement checks e, returning where its end tag begins (-1 when it is
// self-closing).
func checkElement(b []byte) (int, error) {
	bad := func(detail string) (int, error) {
		return 0, errAt(-1, ErrElement, fmt.Sprintf("%.60q: %s", b, detail))
	}
	if len(b) == 0 || b[0] != '<' {
		return bad("not a start tag")
	}
	t, err := startTag(b, 0)
	if err != nil {
		return bad(err.Error())
	}
	if string(t.name(b)) != "ContentSteering" {
		return bad("not named ContentSteering, unprefixed")
	}
	if t.selfClosing {
		if t.end != len(b) {
			return bad("bytes after the element")
		}
		return -1, nil
	}
	k := bytes.IndexByte(b[t.end:], '<')
	if k < 0 {
		return bad("no end tag")
	}
	k += t.end
	name, end, err := endTag(b, k)
	switch {
	case err != nil:
		return bad("no end tag after its text")
	case string(name) != "ContentSteering":
		return bad("its end tag is " + string(name))
	case end != len(b):
		return bad("bytes after the element")
	}
	return k, nil
}

// lineEnding is the document's line ending: that of its first line.
func lineEnding(b []byte) string {
	i := bytes.IndexByte(b, '\n')
	if i > 0 && b[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// removal is what to cut to remove the element at s: its line, with the
// line's ending, when only spaces and tabs share the line with it;
// otherwise the element alone.
func removal(b []byte, s span) span {
	k := s.start
	for k > 0 && (b[k-1] == ' ' || b[k-1] == '\t') {
		k--
	}
	if k > 0 && b[k-1] != '\n' {
		return s
	}
	m := s.end
	for m < len(b) && (b[m] == ' ' || b[m] == '\t') {
		m++
	}
	switch {
	case m < len(b) && b[m] == '\n':
		return span{k, m + 1}
	case m+1 < len(b) && b[m] == '\r' && b[m+1] == '\n':
		return span{k, m + 2}
	}
	return s
}

// SetSteering returns the MPD b with its ContentSteering element set to
// element (one whole element, as decision.DASHElement writes it), as MPD's
// first child (§8.3), or with it removed when element is "". An element
// already there, self-closing or with content, under any prefix bound to the
// MPD namespace, is replaced in place and any later one removed: never
// doubled. The package doc gives the rules of place and indentation.
// Everything else is kept byte for byte. Bytes that are not an MPD, or not
// well-formed where they are read, are an error. dst is appended to.
func SetSteering(dst, b []byte, element string) ([]byte, error) {
	endTagAt := -1
	if element != "" {
		// Checked where it will be written, which spares a copy.
		n := len(dst)
		dst = slices.Grow(dst, len(b)+2*len(element)+32)
		var err error
		endTagAt, err = checkElement(append(dst, element...)[n:])
		if err != nil {
			return dst, err
		}
	}
	mpd, err := root(b)
	if err != nil {
		return dst, err
	}
	if mpd.selfClosing {
		if element != "" {
			return dst, errAt(mpd.start, ErrEmpty, "nowhere to put ContentSteering")
		}
		return append(dst, b...), nil
	}
	var stack [4]span
	found, end, err := children(b, mpd, stack[:0])
	if err != nil {
		return dst, err
	}
	if err := checkEnd(b, end); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(b)+len(element)+32)

	// The element with MPD's prefix when MPD's default namespace is not
	// the MPD namespace.
	def, ok, err := binding(b, mpd, nil)
	if err != nil {
		return dst, err
	}
	var prefix []byte
	if !ok || string(def) != Namespace {
		n := mpd.name(b)
		prefix = n[:bytes.IndexByte(n, ':')+1]
	}
	write := func(dst []byte) []byte {
		if len(prefix) == 0 {
			return append(dst, element...)
		}
		dst = append(dst, '<')
		dst = append(dst, prefix...)
		if endTagAt < 0 {
			return append(dst, element[1:]...)
		}
		dst = append(dst, element[1:endTagAt+2]...)
		dst = append(dst, prefix...)
		return append(dst, element[endTagAt+2:]...)
	}

	if len(found) == 0 {
		if element == "" {
			return append(dst, b...), nil
		}
		ws := mpd.end
		for ws < len(b) && isSpace(b[ws]) {
			ws++
		}
		first := bytes.IndexByte(b[mpd.end:ws], '\n')
		if first < 0 {
			dst = append(dst, b[:mpd.end]...)
			dst = write(dst)
			return append(dst, b[mpd.end:]...), nil
		}
		// A line of its own at the start of the line after MPD's start tag,
		// so that removing it gives back the bytes as they were.
		at := mpd.end + first + 1
		dst = append(dst, b[:at]...)
		for _, c := range b[mpd.end+bytes.LastIndexByte(b[mpd.end:ws], '\n')+1 : ws] {
			if c == ' ' || c == '\t' {
				dst = append(dst, c)
			}
		}
		dst = write(dst)
		dst = append(dst, lineEnding(b)...)
		return append(dst, b[at:]...), nil
	}
	copied := 0
	for k, f := range found {
		if k == 0 && element != "" {
			dst = append(dst, b[copied:f.start]...)
			dst = write(dst)
			copied = f.end
			continue
		}
		r := removal(b, f)
		dst = append(dst, b[copied:r.start]...)
		copied = r.end
	}
	return append(dst, b[copied:]...), nil
}
