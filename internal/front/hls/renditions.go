package hls

import (
	"bytes"
	"fmt"
	"strconv"
)

// Renditions and I-frame playlists of a backup playlist (issue 28,
// "Backups' renditions and I-frame playlists"). Backup puts the variants
// (EXT-X-STREAM-INF) on the viewer's pathways; PlaceRenditions then puts
// what they reference by URI attribute on the same pathways, so that a
// player that fails over from a variant to its backup moves its audio,
// subtitles and trick play with it rather than loading them from the
// front:
//
//   - each EXT-X-MEDIA rendition with a URI has it put on the viewer's own
//     pathway (k = 0) in place;
//   - for each backup pathway k = 1, 2, … that a variant is on, every
//     AUDIO, VIDEO and SUBTITLES group is written once more, directly after
//     the last EXT-X-MEDIA line, its GROUP-ID suffixed "-backup<k>" (more
//     "-backup" parts while that names a group already there) and each URI
//     on pathway k; CLOSED-CAPTIONS groups, which have no URI (rfc8216bis-22
//     §4.4.6.1), are not repeated;
//   - each variant on backup pathway k has its AUDIO, VIDEO and SUBTITLES
//     attributes renamed to its pathway's groups, so that hls.js, AVPlayer
//     and Media3, which take a variant's renditions from its groups, move
//     them when they move the variant;
//   - each EXT-X-I-FRAME-STREAM-INF has its URI put on the own pathway in
//     place, then is written again directly after, once per backup
//     pathway, its URI on that pathway and its VIDEO group renamed as the
//     variants'.
//
// Every other byte is kept; a URI for which place gives "" stays as it
// was (in a group's copy too, so that the group is whole), and an
// I-frame variant's copy is left out for that pathway. which says on which
// pathway Backup put the variant of a URI line (0 for any it does not
// know); n is the number of pathways.
func PlaceRenditions(dst, b []byte, n int, which func(variantURI string) int, place func(uri string, k int) string) ([]byte, error) {
	s, err := multivariant(b)
	if err != nil {
		return dst, err
	}
	type media struct {
		l      line
		group  span
		uri    span
		copyOK bool // a group type that has URIs (not CLOSED-CAPTIONS)
	}
	var ms []media
	groups := map[string]bool{}
	used := make([]bool, max(n, 1)) // the backup pathways a variant is on
	n0 := 1
	for at, ln := 0, 0; at < len(b); {
		ln++
		l := lineAt(b, at)
		at = l.next
		text := b[l.start:l.end]
		switch string(tagName(text)) {
		case "EXT-X-MEDIA":
			var m media
			m.l = l
			typ := span{}
			if err := eachAttr(b, l.start+len("#EXT-X-MEDIA:"), l.end, ln, func(name string, v span) {
				switch name {
				case "GROUP-ID":
					m.group = v
				case "URI":
					m.uri = v
				case "TYPE":
					typ = v
				}
			}); err != nil {
				return dst, err
			}
			// A member of no group (no GROUP-ID, which the RFC requires)
			// has no group to repeat.
			m.copyOK = string(b[typ.start:typ.end]) != "CLOSED-CAPTIONS" && m.group.end > m.group.start
			groups[string(b[m.group.start:m.group.end])] = true
			ms = append(ms, m)
		case "EXT-X-STREAM-INF":
			if at < len(b) {
				if u := lineAt(b, at); isURILine(b[u.start:u.end]) {
					if k := which(string(b[u.start:u.end])); k > 0 && k < n {
						used[k] = true
						n0 = max(n0, k+1)
					}
				}
			}
		}
	}
	// The suffix of each backup pathway's groups, naming none there.
	suffix := make([]string, n0)
	for k := 1; k < n0; k++ {
		sfx := "-backup" + strconv.Itoa(k)
		for clash := true; clash; {
			clash = false
			for g := range groups {
				if groups[g+sfx] {
					clash = true
					sfx = "-backup" + sfx
					break
				}
			}
		}
		suffix[k] = sfx
	}
	renamed := func(g []byte, k int) []byte {
		if k <= 0 || k >= n0 || !groups[string(g)] {
			return g
		}
		return append(bytes.Clone(g), suffix[k]...)
	}
	eol := s.lineEnding(b)
	var lastMediaEnd int = -1
	if len(ms) > 0 {
		lastMediaEnd = ms[len(ms)-1].l.next
	}
	mi := 0
	pendingK := -1 // the pathway of the variant whose URI line comes next
	for at, ln := 0, 0; at < len(b); {
		ln++
		l := lineAt(b, at)
		at = l.next
		text := b[l.start:l.end]
		name := string(tagName(text))
		switch {
		case name == "EXT-X-MEDIA" && mi < len(ms):
			m := ms[mi]
			mi++
			dst = writeWith(dst, b, l, m.uri, place, 0, span{}, nil)
			if l.next == lastMediaEnd {
				atEOF := l.next == l.end // the last line, without an ending
				before := len(dst)
				for k := 1; k < n0; k++ {
					if !used[k] {
						continue
					}
					for _, c := range ms {
						if !c.copyOK {
							continue
						}
						// A URI not placed on k stays as written: the group
						// must be there for the variants that name it.
						u := ""
						if c.uri.start != c.uri.end {
							u = place(string(b[c.uri.start:c.uri.end]), k)
						}
						if atEOF || len(dst) > before {
							dst = append(dst, eol...)
						}
						dst = writeWith(dst, b, line{c.l.start, c.l.end, c.l.end}, c.uri, func(string, int) string { return u }, k,
							c.group, renamed(b[c.group.start:c.group.end], k))
					}
				}
				if !atEOF && len(dst) > before {
					dst = append(dst, eol...)
				}
			}
		case name == "EXT-X-STREAM-INF":
			pendingK = 0
			if at < len(b) {
				if u := lineAt(b, at); isURILine(b[u.start:u.end]) {
					pendingK = which(string(b[u.start:u.end]))
				}
			}
			dst = renameGroups(dst, b, l, ln, pendingK, renamed)
		case name == "EXT-X-I-FRAME-STREAM-INF":
			var uri span
			if err := eachAttr(b, l.start+len("#EXT-X-I-FRAME-STREAM-INF:"), l.end, ln, func(name string, v span) {
				if name == "URI" {
					uri = v
				}
			}); err != nil {
				return dst, err
			}
			dst = writeWith(dst, b, l, uri, place, 0, span{}, nil)
			for k := 1; k < n; k++ {
				if uri.start == uri.end {
					break
				}
				u := place(string(b[uri.start:uri.end]), k)
				if u == "" {
					continue
				}
				if l.next == l.end {
					dst = append(dst, eol...)
				}
				start := len(dst)
				dst = writeWith(dst, b, line{l.start, l.end, l.end}, uri, func(string, int) string { return u }, k, span{}, nil)
				// Its VIDEO group renamed as the variants' (a copy of the line
				// as written, then its groups).
				cp := append([]byte(nil), dst[start:]...)
				dst = renameGroups(dst[:start], cp, line{0, len(cp), len(cp)}, ln, k, renamed)
				dst = append(dst, eol...)
			}
		default:
			dst = append(dst, b[l.start:l.next]...)
		}
	}
	return dst, nil
}

// writeWith writes line l of b with its URI attribute value (the span
// uri, empty for none) replaced by place(uri, k) when that is not "", and
// the span group replaced by newGroup when newGroup is not nil.
func writeWith(dst, b []byte, l line, uri span, place func(string, int) string, k int, group span, newGroup []byte) []byte {
	type edit struct {
		at   span
		with []byte
	}
	var es []edit
	if uri.start != uri.end {
		if u := place(string(b[uri.start:uri.end]), k); u != "" && checkBackup(u) == "" && !bytes.ContainsRune([]byte(u), '"') {
			es = append(es, edit{uri, []byte(u)})
		}
	}
	if newGroup != nil {
		es = append(es, edit{group, newGroup})
	}
	if len(es) == 2 && es[1].at.start < es[0].at.start {
		es[0], es[1] = es[1], es[0]
	}
	prev := l.start
	for _, e := range es {
		if e.at.start < prev {
			continue // overlapping spans: not reached by attribute lists that read
		}
		dst = append(dst, b[prev:e.at.start]...)
		dst = append(dst, e.with...)
		prev = e.at.end
	}
	return append(dst, b[prev:l.next]...)
}

// renameGroups writes line l of b (an EXT-X-STREAM-INF or
// EXT-X-I-FRAME-STREAM-INF) with its AUDIO, VIDEO and SUBTITLES values
// renamed for pathway k.
func renameGroups(dst, b []byte, l line, ln, k int, renamed func([]byte, int) []byte) []byte {
	name := tagName(b[l.start:l.end])
	var spans []span
	err := eachAttr(b, l.start+2+len(name), l.end, ln, func(n string, v span) {
		switch n {
		case "AUDIO", "VIDEO", "SUBTITLES":
			spans = append(spans, v)
		}
	})
	if err != nil || k <= 0 {
		return append(dst, b[l.start:l.next]...)
	}
	prev := l.start
	for _, v := range spans {
		dst = append(dst, b[prev:v.start]...)
		dst = append(dst, renamed(b[v.start:v.end], k)...)
		prev = v.end
	}
	return append(dst, b[prev:l.next]...)
}

// eachAttr calls fn with each attribute of the list b[start:end] on line
// ln and its value's span (without quotes), as attrs reads the list
// (rfc8216bis-22 §4.2, spaces after a comma allowed). A list that does not
// read is an error; start past end is an empty list.
func eachAttr(b []byte, start, end, ln int, fn func(name string, v span)) error {
	bad := func(at int, what string) error {
		return errAt(ln, ErrVariant, fmt.Sprintf("attribute list, byte %d: %s", at-start+1, what))
	}
	if start >= end {
		return nil
	}
	for i := start; i < end; {
		nameStart := i
		for i < end && isNameByte(b[i]) {
			i++
		}
		if i == nameStart {
			return bad(i, "an attribute name expected")
		}
		name := string(b[nameStart:i])
		if i == end || b[i] != '=' {
			return bad(i, "'=' expected")
		}
		i++
		var v span
		if i < end && b[i] == '"' {
			q := bytes.IndexByte(b[i+1:end], '"')
			if q < 0 {
				return bad(i, "an unterminated quoted string")
			}
			v = span{i + 1, i + 1 + q}
			i += q + 2
		} else {
			vs := i
			for i < end && b[i] != ',' {
				i++
			}
			v = span{vs, i}
		}
		fn(name, v)
		if i < end {
			if b[i] != ',' {
				return bad(i, "',' expected")
			}
			i++
			for i < end && b[i] == ' ' {
				i++
			}
		}
	}
	return nil
}
