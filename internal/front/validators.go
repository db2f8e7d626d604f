package front

// The front's validators (issue 28, "Validators exact"; RFC 9110 §8.8,
// §13, §15.4.5).
//
// # What a 200 carries
//
// The front serves three sorts of answer, and each has its own validators:
//
//   - as the origin wrote it (a media playlist; any playlist while its
//     steering is off): the origin's ETag and Last-Modified, unchanged;
//   - steered (a multivariant playlist or an MPD with the line added): the
//     origin's entity-tag with the digest of the exact line served added
//     inside its quotes, no Last-Modified (it dates the origin's bytes, not
//     the line, which a reload may change at any second), and
//     Vary: User-Agent (the class decides the bytes);
//   - a viewer's own (backup variants): no ETag, no Last-Modified,
//     Cache-Control: private, no-store, and Vary: User-Agent.
//
// The steered tag, for the line #EXT-X-CONTENT-STEERING:SERVER-URI="/s":
//
//	origin:  W/"5d41402a"
//	served:  W/"5d41402a-ws" + 16 hex digits + `"`
//
// the digits the first 8 bytes of the SHA-256 of the line's bytes (the HLS
// tag in a playlist, the element in an MPD), in lowercase; weak stays weak.
// An origin's ETag that is no entity-tag gives no served ETag.
//
// # When the answer is 304
//
// The front decides, on the ETag and Last-Modified its 200 would carry
// (§13.2.2): If-None-Match lists that ETag by the weak comparison, or is
// "*" (§13.1.2); else, with no If-None-Match, If-Modified-Since is the
// 200's Last-Modified exactly: §13.1.3 lets a server honour exact matches
// only, which no clock skew nor file restored from an archive can fool.
// A steered answer has no Last-Modified, so no date ever keeps an old line.
//
// The origin is asked conditionally only when the player's If-None-Match
// lists a tag whose line part is the digest of the line the front would
// write now (and the player is of a class that gets that line): those
// tags' origin parts are passed on, and the origin's 304 then means the
// same bytes with the same line. Every other conditional request is
// fetched whole and judged by the front: a tag of an old line, the
// origin's bare tag for a steered playlist, a date. If-Modified-Since is
// never passed on: alone it cannot tell a change of line, and beside
// If-None-Match the origin ignores it (§13.1.3).
//
// A 304 carries the fields its 200 would, ETag, Vary, Cache-Control and
// Expires among them, and none of its body's (§15.4.5).

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// form is what the front did to the origin's bytes.
type form int

const (
	asWritten   form = iota // the origin's bytes
	steered                 // the line added
	ownPlaylist             // a viewer's own playlist of backups
)

// lineMark separates the origin's opaque tag from the line's digest.
const (
	lineMark   = "-ws"
	lineDigits = 16
)

// lineDigest is the digest of a steering line as it is written into a
// served ETag.
func lineDigest(line string) string {
	d := sha256.Sum256([]byte(line))
	return hex.EncodeToString(d[:lineDigits/2])
}

// servedETag is the ETag of a steered answer: originTag with line's
// digest inside its quotes; false when originTag is no entity-tag.
func servedETag(originTag, line string) (string, bool) {
	if !isEntityTag(originTag) {
		return "", false
	}
	return originTag[:len(originTag)-1] + lineMark + lineDigest(line) + `"`, true
}

// splitTag reads a served ETag back into the origin's entity-tag and the
// line's digest; false when tag carries no line part (the origin's bare
// tag, or no entity-tag at all).
func splitTag(tag string) (originTag, digest string, ok bool) {
	if !isEntityTag(tag) {
		return "", "", false
	}
	body := tag[:len(tag)-1] // without the closing quote
	n := len(lineMark) + lineDigits
	open := strings.IndexByte(tag, '"')
	if len(body)-open-1 < n || body[len(body)-n:len(body)-lineDigits] != lineMark {
		return "", "", false
	}
	digest = body[len(body)-lineDigits:]
	for i := 0; i < len(digest); i++ {
		if c := digest[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return body[:len(body)-n] + `"`, digest, true
}

// isEntityTag reports whether t is one entity-tag (§8.8.3):
//
//	entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc      = %x21 / %x23-7E / obs-text
func isEntityTag(t string) bool {
	t = strings.TrimPrefix(t, "W/")
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return false
	}
	for i := 1; i < len(t)-1; i++ {
		if c := t[i]; c < 0x21 || c == '"' || c == 0x7f {
			return false
		}
	}
	return true
}

// opaqueTag is an entity-tag without its weakness indicator, for the weak
// comparison (§8.8.3.2).
func opaqueTag(t string) string { return strings.TrimPrefix(t, "W/") }

// noneMatch reads If-None-Match, its field lines joined (§5.3): "*", or
// the entity-tags listed (empty elements allowed, §5.6.1.2); ok false when
// the field is absent or does not read, which matches nothing.
func noneMatch(h http.Header) (star bool, tags []string, ok bool) {
	vs := h.Values("If-None-Match")
	if len(vs) == 0 {
		return false, nil, false
	}
	v := strings.Trim(strings.Join(vs, ", "), " \t")
	if v == "*" {
		return true, nil, true
	}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.Trim(part, " \t")
		if part == "" {
			continue
		}
		if !isEntityTag(part) {
			return false, nil, false
		}
		tags = append(tags, part)
	}
	return false, tags, len(tags) > 0
}

// revalidation is what the front asks the origin when a player's tag
// names the line the front would write now.
type revalidation struct {
	sent []string // the origin's tags passed on
	line string   // the line those tags were served with
}

// revalidate finds the tags of the player's If-None-Match that name the
// line it would get now: a multivariant playlist's line for a player that
// steers, an MPD's for any class the front serves one to. Nil when there
// is none: the request is fetched whole.
func revalidate(h http.Header, class Class, hlsTag, dashEl string, off bool) *revalidation {
	if off {
		return nil
	}
	_, tags, ok := noneMatch(h)
	if !ok {
		return nil
	}
	var lines []string
	if class == Steers {
		lines = append(lines, hlsTag)
	}
	if class != RedirectOnly {
		lines = append(lines, dashEl)
	}
	for _, line := range lines {
		want := lineDigest(line)
		var rv revalidation
		for _, t := range tags {
			if o, d, ok := splitTag(t); ok && d == want {
				rv.sent = append(rv.sent, o)
			}
		}
		if len(rv.sent) > 0 {
			rv.line = line
			return &rv
		}
	}
	return nil
}

// ifNoneMatch is the field passed on to the origin.
func (rv *revalidation) ifNoneMatch() string {
	if rv == nil {
		return ""
	}
	return strings.Join(rv.sent, ", ")
}

// notModified is the front's 304 for the origin's, whose fields are
// originHeader: false when the origin's 304 names a tag other than those
// passed on, or none when several were (then which bytes it kept is not
// known, and the front fetches them whole).
func (rv *revalidation) notModified(originHeader http.Header) (http.Header, bool) {
	if rv == nil {
		return nil, false // nothing was asked
	}
	tag := originHeader.Get("ETag")
	switch {
	case tag == "" && len(rv.sent) == 1:
		tag = rv.sent[0]
	case tag == "" || !isEntityTag(tag):
		return nil, false
	default:
		found := false
		for _, s := range rv.sent {
			found = found || opaqueTag(s) == opaqueTag(tag)
		}
		if !found {
			return nil, false
		}
	}
	h := originHeader.Clone()
	h.Set("ETag", tag)
	shape(h, steered, rv.line)
	return h, true
}

// shape turns the origin's caching fields h into those of an answer of
// form s (the package's "What a 200 carries"); line is the one served.
func shape(h http.Header, s form, line string) {
	switch s {
	case steered:
		if t, ok := servedETag(h.Get("ETag"), line); ok {
			h.Set("ETag", t)
		} else {
			h.Del("ETag")
		}
		h.Del("Last-Modified")
		addVary(h, "User-Agent")
	case ownPlaylist:
		// A viewer's own playlist: never kept by a shared cache, nor by a
		// CDN told otherwise by the origin (dropTargeted).
		h.Set("Cache-Control", "private, no-store")
		dropTargeted(h)
		h.Del("ETag")
		h.Del("Last-Modified")
		addVary(h, "User-Agent")
	}
}

// addVary adds name to h's Vary unless it is listed there, or "*" is.
func addVary(h http.Header, name string) {
	for _, v := range h.Values("Vary") {
		for part := range strings.SplitSeq(v, ",") {
			p := strings.Trim(part, " \t")
			if p == "*" || strings.EqualFold(p, name) {
				return
			}
		}
	}
	h.Add("Vary", name)
}

// fresh reports whether a GET or HEAD answered with the fields h (the
// 200's) is answered 304 instead (§13.2.2, and the package's "When the
// answer is 304").
func fresh(req, h http.Header) bool {
	if len(req.Values("If-None-Match")) > 0 {
		star, tags, ok := noneMatch(req)
		if !ok {
			return false // a field that does not read matches nothing
		}
		if star {
			return true
		}
		etag := h.Get("ETag")
		if etag == "" || !isEntityTag(etag) {
			return false
		}
		for _, t := range tags {
			if opaqueTag(t) == opaqueTag(etag) {
				return true
			}
		}
		return false
	}
	// §13.1.3: ignored unless one valid HTTP-date; 304 only when it is
	// the 200's Last-Modified.
	ims := req.Values("If-Modified-Since")
	lm := h.Values("Last-Modified")
	if len(ims) != 1 || len(lm) != 1 {
		return false
	}
	since, err := http.ParseTime(ims[0])
	if err != nil {
		return false
	}
	mod, err := http.ParseTime(lm[0])
	return err == nil && since.Equal(mod)
}

// writeNotModified answers 304 with h, the fields its 200 would carry
// (§15.4.5): the body's own, Content-Type and Content-Length, are not in
// h.
func writeNotModified(w http.ResponseWriter, h http.Header) {
	wh := w.Header()
	for k, vs := range h {
		wh[k] = vs
	}
	wh.Del("Content-Type")
	wh.Del("Content-Length")
	w.WriteHeader(http.StatusNotModified)
}
