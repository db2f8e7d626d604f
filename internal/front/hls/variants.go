package hls

import (
	"bytes"
	"fmt"
	"slices"
)

// Variant is one EXT-X-STREAM-INF of a multivariant playlist: its URI line
// as written, and its PATHWAY-ID and STABLE-VARIANT-ID attributes ("" when
// absent).
type Variant struct{ URI, PathwayID, StableID string }

// span is b[start:end]; an empty span has start == end.
type span struct{ start, end int }

// variant is where one variant's parts lie in the playlist.
type variant struct {
	inf      line // the EXT-X-STREAM-INF line
	pathway  span // PATHWAY-ID's value, without quotes
	drop     span // the bytes that take PATHWAY-ID out of the attribute list
	stable   span // STABLE-VARIANT-ID's value
	uri      line // the URI line
	backups  [2]string
	nbackups int
}

// attrs reads the attribute list b[start:end] of the tag on line n
// (rfc8216bis-22 §4.2), finding PATHWAY-ID and STABLE-VARIANT-ID. It allows
// spaces after a comma, as hls.js does and as Apple's old examples write
// ("PROGRAM-ID=1, BANDWIDTH=200000"), and nothing else outside a value.
func attrs(b []byte, start, end, n int, v *variant) error {
	bad := func(at int, what string) error {
		return errAt(n, ErrVariant, fmt.Sprintf("attribute list, byte %d: %s", at-start+1, what))
	}
	// No attribute value holds a control byte (rfc8216bis-22 §4.2); a bare
	// CR left at the end of a copy's line would join its line ending.
	for i := start; i < end; i++ {
		if c := b[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return bad(i, fmt.Sprintf("control byte %#02x", c))
		}
	}
	seenPathway, seenStable := false, false
	prevEnd := -1 // the end of the previous attribute's value
	for i := start; i < end; {
		nameStart := i
		for i < end && isNameByte(b[i]) {
			i++
		}
		if i == nameStart {
			return bad(i, "an attribute name expected")
		}
		name := b[nameStart:i]
		if i == end || b[i] != '=' {
			return bad(i, "'=' expected")
		}
		i++
		valStart := i
		var val span
		if i < end && b[i] == '"' {
			q := bytes.IndexByte(b[i+1:end], '"')
			if q < 0 {
				return bad(i, "an unterminated quoted string")
			}
			val = span{i + 1, i + 1 + q}
			i += q + 2
		} else {
			for i < end && b[i] != ',' {
				i++
			}
			val = span{valStart, i}
			if val.start == val.end {
				return bad(i, "an empty value")
			}
		}
		valEnd := i
		next := end // the start of the next attribute
		if i < end {
			if b[i] != ',' {
				return bad(i, "',' expected")
			}
			i++
			for i < end && b[i] == ' ' {
				i++
			}
			if i == end {
				return bad(i, "an attribute expected after ','")
			}
			next = i
		}
		switch string(name) {
		case "PATHWAY-ID":
			if seenPathway {
				return bad(nameStart, "PATHWAY-ID twice")
			}
			seenPathway = true
			v.pathway = val
			// The attribute and the separator after it, or, when it is last,
			// the separator before it.
			v.drop = span{nameStart, next}
			if next == end && prevEnd >= 0 {
				v.drop = span{prevEnd, valEnd}
			}
		case "STABLE-VARIANT-ID":
			if seenStable {
				return bad(nameStart, "STABLE-VARIANT-ID twice")
			}
			seenStable = true
			v.stable = val
		}
		prevEnd = valEnd
		i = next
	}
	return nil
}

func isNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// variants calls each for every EXT-X-STREAM-INF of the multivariant
// playlist b with its parts; s is b's scan.
func variants(b []byte, s scan, each func(v *variant) error) error {
	n := 1
	var v variant
	inVariant := false
	for at := s.first.next; at < len(b); {
		n++
		l := lineAt(b, at)
		at = l.next
		text := b[l.start:l.end]
		name := tagName(text)
		if string(name) == "EXT-X-STREAM-INF" {
			if inVariant {
				return errAt(n, ErrVariant, "EXT-X-STREAM-INF before the URI line of the one above")
			}
			v = variant{inf: l}
			if len(text) == 1+len(name) || text[1+len(name)] != ':' {
				return errAt(n, ErrVariant, "EXT-X-STREAM-INF without an attribute list")
			}
			if err := attrs(b, l.start+2+len(name), l.end, n, &v); err != nil {
				return err
			}
			inVariant = true
			continue
		}
		if !inVariant || !isURILine(text) {
			continue
		}
		v.uri = l
		inVariant = false
		if err := each(&v); err != nil {
			return err
		}
	}
	if inVariant {
		return errAt(n, ErrVariant, "the last EXT-X-STREAM-INF has no URI line")
	}
	return nil
}

// Variants lists the variants (EXT-X-STREAM-INF) of the multivariant
// playlist b, in order, each with its URI line and its PATHWAY-ID and
// STABLE-VARIANT-ID. A media playlist or bytes that are not a playlist, an
// EXT-X-STREAM-INF with no URI line after it, or an attribute list that does
// not read, is an error.
func Variants(b []byte) ([]Variant, error) {
	s, err := multivariant(b)
	if err != nil {
		return nil, err
	}
	var all string // one copy of b, which every string below shares
	var out []Variant
	err = variants(b, s, func(v *variant) error {
		if all == "" {
			all = string(b)
		}
		out = append(out, Variant{
			URI:       all[v.uri.start:v.uri.end],
			PathwayID: all[v.pathway.start:v.pathway.end],
			StableID:  all[v.stable.start:v.stable.end],
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkBackup requires uri to be a URI line: not empty, not a tag or a
// comment, with no control bytes (a line ending would split it) and no
// spaces at its ends.
func checkBackup(uri string) string {
	switch {
	case uri == "":
		return "empty"
	case uri[0] == '#':
		return "begins with '#'"
	case uri[0] == ' ' || uri[0] == '\t' || uri[len(uri)-1] == ' ' || uri[len(uri)-1] == '\t':
		return "spaces at an end"
	}
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Sprintf("control byte %#02x", c)
		}
	}
	return ""
}

// WithBackups returns the multivariant playlist b followed, after the URI
// line of its last variant, by a copy of each variant for each of its backup
// URIs: the URIs backup gives for the variant's URI, first backup first, of
// which the first two are used. All the first backups come first, then all
// the second, each copy being the variant's EXT-X-STREAM-INF line without
// its PATHWAY-ID and the backup URI (the package doc says why). Everything
// of b is kept byte for byte; when backup gives nothing for any variant, the
// result is b. dst is appended to.
func WithBackups(dst, b []byte, backup func(uri string) []string) ([]byte, error) {
	s, err := multivariant(b)
	if err != nil {
		return dst, err
	}
	var stack [16]variant
	vs := stack[:0]
	err = variants(b, s, func(v *variant) error {
		vs = append(vs, *v)
		return nil
	})
	if err != nil {
		return dst, err
	}
	// The backups are asked for once the whole playlist has read, so that a
	// playlist is refused for its own faults first.
	all := string(b)
	extra := 0
	for i := range vs {
		v := &vs[i]
		uri := all[v.uri.start:v.uri.end]
		v.nbackups = copy(v.backups[:], backup(uri))
		for k := range v.nbackups {
			if why := checkBackup(v.backups[k]); why != "" {
				return dst, errAt(0, ErrBackup, fmt.Sprintf("backup %d of variant %d (%.60q): %s", k+1, i+1, uri, why))
			}
			extra += v.inf.end - v.inf.start - (v.drop.end - v.drop.start) + len(v.backups[k]) + 4
		}
	}
	last := len(b)
	if len(vs) > 0 {
		last = vs[len(vs)-1].uri.next
	}
	if extra == 0 {
		return append(dst, b...), nil
	}
	eol := s.lineEnding(b)
	dst = slices.Grow(dst, len(b)+extra)
	dst = append(dst, b[:last]...)
	u := vs[len(vs)-1].uri
	atEOF := u.next == u.end
	if atEOF { // the last URI line ends the file, without a line ending
		if b[len(b)-1] == '\r' {
			// An LF would join the CR that ends the URI into a CR LF, and so
			// change the URI as read.
			dst = append(dst, "\r\n"...)
		} else {
			dst = append(dst, eol...)
		}
	}
	wrote := false
	for k := range 2 {
		for i := range vs {
			v := &vs[i]
			if k >= v.nbackups {
				continue
			}
			if wrote {
				dst = append(dst, eol...)
			}
			if v.drop.start == v.drop.end {
				dst = append(dst, b[v.inf.start:v.inf.end]...)
			} else {
				dst = append(dst, b[v.inf.start:v.drop.start]...)
				dst = append(dst, b[v.drop.end:v.inf.end]...)
			}
			dst = append(dst, eol...)
			dst = append(dst, v.backups[k]...)
			wrote = true
		}
	}
	if !atEOF {
		dst = append(dst, eol...)
	}
	return append(dst, b[last:]...), nil
}

// RewriteVariants returns the multivariant playlist b with each variant's
// URI (the URI line of each EXT-X-STREAM-INF) replaced by uri of it, or
// kept where uri gives ""; every other byte as it came. The front puts a
// viewer's variants on the first pathway of its order with it, before
// WithBackups adds the next two.
func RewriteVariants(dst, b []byte, uri func(string) string) ([]byte, error) {
	s, err := multivariant(b)
	if err != nil {
		return dst, err
	}
	var stack [16]variant
	vs := stack[:0]
	if err := variants(b, s, func(v *variant) error {
		vs = append(vs, *v)
		return nil
	}); err != nil {
		return dst, err
	}
	all := string(b)
	prev := 0
	for i := range vs {
		v := &vs[i]
		old := all[v.uri.start:v.uri.end]
		nu := uri(old)
		if nu == "" {
			continue
		}
		if why := checkBackup(nu); why != "" {
			return dst, errAt(0, ErrBackup, fmt.Sprintf("the URI of variant %d (%.60q): %s", i+1, old, why))
		}
		dst = append(dst, b[prev:v.uri.start]...)
		dst = append(dst, nu...)
		prev = v.uri.end
	}
	return append(dst, b[prev:]...), nil
}
