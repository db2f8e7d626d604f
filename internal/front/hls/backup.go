package hls

import "fmt"

// Backup is the playlist of backup variants the front gives a player that
// cannot steer (the OTT seed: the master playlist names the backup nodes,
// and a player that fails over between variants moves to them): b with
// each variant's URI put on the viewer's own pathway by own (kept where
// own gives ""), a copy of each variant for its backups (WithBackups; the
// backups are asked for by the URI the origin wrote), and then, because
// such a player steers by nothing but the order listed:
//
//   - every EXT-X-CONTENT-STEERING line removed: a player that read one
//     would steer by the origin's steering server, between pathways whose
//     variants this playlist no longer lists as the origin wrote them;
//   - the PATHWAY-ID of every EXT-X-STREAM-INF and EXT-X-I-FRAME-STREAM-INF
//     removed: the primaries were put on the viewer's pathway whatever the
//     origin's PATHWAY-ID said, and hls.js (the package doc) reads the
//     primaries, first backups and second backups as its pathways ".",
//     ".." and "..." only when none carries one;
//   - a variant that, so written, repeats one before it byte for byte
//     (its EXT-X-STREAM-INF line and a URI line directly after it, or its
//     EXT-X-I-FRAME-STREAM-INF line) removed: it was the same variant on
//     another of the origin's pathways, put on the same one.
//
// URIs are written as own and backup give them; the rest of b byte for
// byte. A playlist whose only multivariant tags were steering tags is
// refused (ErrEmpty), as WithBackups refuses what Variants refuses. dst is
// appended to.
func Backup(dst, b []byte, own func(string) string, backup func(string) []string) ([]byte, error) {
	written := map[string]string{} // a URI own wrote → the origin's
	ownb, err := RewriteVariants(nil, b, func(uri string) string {
		u := own(uri)
		if u != "" {
			written[u] = uri
		}
		return u
	})
	if err != nil {
		return dst, err
	}
	all, err := WithBackups(nil, ownb, func(uri string) []string {
		if orig, ok := written[uri]; ok {
			uri = orig
		}
		return backup(uri)
	})
	if err != nil {
		return dst, err
	}
	n := len(dst)
	dst, err = dropPathways(dst, all)
	if err != nil {
		return dst[:n], err
	}
	// A playlist whose only multivariant tags were steering tags has none
	// left: nothing a player could play.
	if _, err := Classify(dst[n:]); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// dropPathways is the multivariant playlist b (already read whole by
// WithBackups) without its steering lines, without PATHWAY-ID in its
// variants, and without the variants that then repeat an earlier one. Each
// variant is written into dst as it is read and taken back when it
// repeats one, so that only the first of each is copied for the set.
func dropPathways(dst, b []byte) ([]byte, error) {
	seen := map[string]struct{}{}
	pending := -1 // where in dst an EXT-X-STREAM-INF line, so written, waits for its URI line
	for at, n := 0, 1; at < len(b); n++ {
		l := lineAt(b, at)
		at = l.next
		text := b[l.start:l.end]
		if pending >= 0 {
			p := pending
			pending = -1
			if isURILine(text) {
				dst = append(dst, text...)
				if _, ok := seen[string(dst[p:])]; ok {
					dst = dst[:p]
					continue
				}
				seen[string(dst[p:])] = struct{}{}
				dst = append(dst, b[l.end:l.next]...)
				continue
			}
			// Something between a variant and its URI: the variant stays.
		}
		name := tagName(text)
		switch string(name) {
		case SteeringTag:
			continue
		case "EXT-X-STREAM-INF", "EXT-X-I-FRAME-STREAM-INF":
		default:
			dst = append(dst, b[l.start:l.next]...)
			continue
		}
		if len(text) == 1+len(name) || text[1+len(name)] != ':' {
			return dst, errAt(n, ErrVariant, fmt.Sprintf("%s without an attribute list", name))
		}
		var v variant
		if err := attrs(b, l.start+2+len(name), l.end, n, &v); err != nil {
			return dst, err
		}
		start := len(dst)
		if v.drop.start == v.drop.end {
			dst = append(dst, text...)
		} else {
			dst = append(dst, b[l.start:v.drop.start]...)
			dst = append(dst, b[v.drop.end:l.end]...)
		}
		if string(name) == "EXT-X-STREAM-INF" {
			dst = append(dst, b[l.end:l.next]...)
			pending = start
			continue
		}
		if _, ok := seen[string(dst[start:])]; ok {
			dst = dst[:start]
			continue
		}
		seen[string(dst[start:])] = struct{}{}
		dst = append(dst, b[l.end:l.next]...)
	}
	return dst, nil
}
