// Package hls rewrites an origin's HLS multivariant playlists as the front
// serves them: the content-steering tag set or removed (SetSteering, §8.2 and
// rfc8216bis-22 §4.4.6.6), each variant repeated for backup pathways
// (WithBackups, the OTT seed's backup variants), and the variants listed
// (Variants). It knows nothing of HTTP or configuration: it reads bytes that
// came from outside, never panics, runs in one or two linear passes, and
// gives back byte for byte everything it does not change.
//
// # Lines
//
// A playlist is read as lines (RFC 8216 §4.1): each ends with LF or CR LF,
// kept per line as it came, and the last may end with neither. A bare CR is
// part of its line. A UTF-8 byte order mark before the first line is
// accepted and kept. A tag is a line that begins with "#EXT"; its name runs
// to the first ':' or the end of the line, and names are compared exactly.
// Other lines beginning with '#' are comments; a line of only spaces and tabs
// is blank; any other line is a URI line.
//
// # Kinds
//
// A playlist's first line is #EXTM3U, optionally followed by spaces or tabs
// (as Media3 reads it). It is multivariant when it holds a tag that only a
// multivariant playlist has (EXT-X-STREAM-INF, EXT-X-I-FRAME-STREAM-INF,
// EXT-X-MEDIA, EXT-X-SESSION-*, EXT-X-CONTENT-STEERING) and media when it
// holds a tag that only a media playlist has (rfc8216bis-22 §4.4.3 to
// §4.4.5: EXTINF, EXT-X-TARGETDURATION, ...). One with both, or with
// neither, is an error: the front has nothing to serve from it.
//
// # The steering tag
//
// SetSteering replaces the first EXT-X-CONTENT-STEERING line's text in place
// (keeping its line ending) and removes every later one, so that a tag is
// never doubled. With none there, the tag goes after the header: the #EXTM3U
// line and the run of EXT-X-VERSION, EXT-X-INDEPENDENT-SEGMENTS and
// EXT-X-START lines directly after it, in any order. Those are the tags that
// describe the whole playlist rather than a variant, and putting the tag
// after them (and before EXT-X-DEFINE, whose variables the rest may use)
// keeps the playlist's own header first, as Apple's examples write it. The
// inserted line ends as the #EXTM3U line does. Removing a tag removes its
// whole line.
//
// # Backup variants
//
// WithBackups writes the playlist unchanged, then, directly after the URI
// line of its last EXT-X-STREAM-INF, the first backup of every variant that
// has one, then the second backup of every variant that has two. Each copy
// is the variant's EXT-X-STREAM-INF line without its PATHWAY-ID attribute,
// then the backup URI, each ending as the #EXTM3U line does. The layout is
// the one the three players fail over with:
//
//   - AVPlayer starts on the first variant listed and, when a variant fails,
//     takes "among alternates at the same bandwidth ... the order listed in
//     the playlist" (Apple, HTTP Live Streaming Overview, "Failover
//     Protection"). Primaries first means every viewer starts on its own
//     pathway, and for each bandwidth the order listed is primary, first
//     backup, second backup.
//   - hls.js 1.7 (src/controller/level-controller.ts, onManifestLoaded)
//     groups variants by PATHWAY-ID, BANDWIDTH, RESOLUTION, FRAME-RATE,
//     CODECS, VIDEO-RANGE and HDCP-LEVEL, and names the n-th variant of a
//     group that has no PATHWAY-ID the redundant pathway of n dots (".",
//     "..", "..."), by the order the variants are listed. Its
//     content-steering controller (built in by default, and at work with no
//     steering tag) plays the pathway "." and, on a failure, moves to the
//     next pathway of that order. So the primaries are ".", the first
//     backups "..", the second "...", whatever the order of the variants
//     within each copy. An hls.js built or configured without that controller
//     (contentSteeringController unset) keeps every copy as a level of its
//     ladder, and its choice by bandwidth, which scans the ladder from the
//     top (abr-controller.ts, findBestLevel), can take the last of equal
//     levels, a second backup: the redundant streams need the controller,
//     even where the playlist carries no steering tag.
//   - Media3 (BaseTrackSelection) sorts a group's formats by bitrate with
//     Java's stable sort, and its adaptive selection takes the first that is
//     not excluded; a variant whose playlist fails is excluded for a minute.
//     Among equal bitrates that is the order listed again: primary, first
//     backup, second backup. (Whether Media3's own content steering, when a
//     playlist carries a steering tag, changes this has not been read.)
//
// Copies drop PATHWAY-ID because hls.js treats a variant that repeats
// another's attributes with the same PATHWAY-ID as the same variant and
// discards its URI: a copy that kept it would give hls.js no backup. A
// primary that has a PATHWAY-ID keeps it in WithBackups; the copies of such
// a variant then form hls.js's "." and ".." pathways, and hls.js starts on
// the first backups. STABLE-VARIANT-ID is kept, so that hls.js keeps the
// same rendition when it moves.
//
// # Backup playlists
//
// Backup is the whole playlist the front gives a player that does not
// steer (issue 28): the variants put on the viewer's pathway
// (RewriteVariants), their backups added (WithBackups), and then every
// steering tag and every variant's PATHWAY-ID (EXT-X-I-FRAME-STREAM-INF's
// too) removed, with a variant that then repeats an earlier one byte for
// byte (the same variant on another of the origin's pathways, now on the
// same one) written once. Such a player steers by the order listed alone,
// and a steering tag would send one that reads it back to the origin's
// steering server and pathways.
//
// The renditions (EXT-X-MEDIA) and I-frame variants the variants use are
// then put on the same pathways (PlaceRenditions, issue 28): each group
// written once per backup pathway under a suffixed GROUP-ID, each backup
// variant naming its own pathway's groups, each I-frame variant repeated
// per pathway. Left relative, they would be loaded from the front by every
// backup viewer, and a failover would move the video but not its audio.
package hls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Kind of an HLS playlist.
type Kind int

// The kinds Classify reads.
const (
	NotPlaylist Kind = iota
	Multivariant
	Media
)

func (k Kind) String() string {
	switch k {
	case Multivariant:
		return "multivariant playlist"
	case Media:
		return "media playlist"
	}
	return "not a playlist"
}

// The reasons a playlist is refused; every error wraps one of them.
var (
	ErrNotPlaylist = errors.New("not an HLS playlist (no #EXTM3U first line)")
	ErrMedia       = errors.New("a media playlist, which is never changed")
	ErrMixed       = errors.New("both multivariant and media playlist tags")
	ErrEmpty       = errors.New("neither a variant nor a media segment tag")
	ErrTag         = errors.New("not a steering tag")
	ErrVariant     = errors.New("a bad variant")
	ErrBackup      = errors.New("a backup URI that cannot be a URI line")
)

// lineError is a reason at a line, counted from 1.
type lineError struct {
	line   int
	err    error
	detail string
}

func (e *lineError) Error() string {
	s := "hls: "
	if e.line > 0 {
		s += fmt.Sprintf("line %d: ", e.line)
	}
	s += e.err.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

func (e *lineError) Unwrap() error { return e.err }

func errAt(line int, err error, detail string) error {
	return &lineError{line: line, err: err, detail: detail}
}

// SteeringTag is the name of the content-steering tag (rfc8216bis-22
// §4.4.6.6).
const SteeringTag = "EXT-X-CONTENT-STEERING"

const bom = "\xef\xbb\xbf"

// line is one line of b: its text is b[start:end], its line ending
// b[end:next] ("", "\n" or "\r\n").
type line struct{ start, end, next int }

// lineAt reads the line that begins at at (< len(b)).
func lineAt(b []byte, at int) line {
	i := bytes.IndexByte(b[at:], '\n')
	if i < 0 {
		return line{at, len(b), len(b)}
	}
	end := at + i
	if end > at && b[end-1] == '\r' {
		end--
	}
	return line{at, end, at + i + 1}
}

// tagName is the name of the tag on text, or "" when text is not a tag.
func tagName(text []byte) []byte {
	if !bytes.HasPrefix(text, []byte("#EXT")) {
		return nil
	}
	text = text[1:]
	if i := bytes.IndexByte(text, ':'); i >= 0 {
		return text[:i]
	}
	return text
}

func isBlank(text []byte) bool {
	for _, c := range text {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func isURILine(text []byte) bool {
	return len(text) > 0 && text[0] != '#' && !isBlank(text)
}

// multivariantOnly reports whether a tag of this name appears only in a
// multivariant playlist (rfc8216bis-22 §4.4.6).
func multivariantOnly(name []byte) bool {
	switch string(name) {
	case "EXT-X-STREAM-INF", "EXT-X-I-FRAME-STREAM-INF", "EXT-X-MEDIA", SteeringTag:
		return true
	}
	return bytes.HasPrefix(name, []byte("EXT-X-SESSION-"))
}

// mediaOnly reports whether a tag of this name appears only in a media
// playlist (rfc8216bis-22 §4.4.3 to §4.4.5).
func mediaOnly(name []byte) bool {
	switch string(name) {
	case "EXTINF", "EXT-X-TARGETDURATION", "EXT-X-MEDIA-SEQUENCE",
		"EXT-X-DISCONTINUITY-SEQUENCE", "EXT-X-ENDLIST", "EXT-X-PLAYLIST-TYPE",
		"EXT-X-I-FRAMES-ONLY", "EXT-X-PART-INF", "EXT-X-SERVER-CONTROL",
		"EXT-X-BYTERANGE", "EXT-X-DISCONTINUITY", "EXT-X-KEY", "EXT-X-MAP",
		"EXT-X-PROGRAM-DATE-TIME", "EXT-X-GAP", "EXT-X-BITRATE", "EXT-X-PART",
		"EXT-X-DATERANGE", "EXT-X-SKIP", "EXT-X-PRELOAD-HINT", "EXT-X-RENDITION-REPORT":
		return true
	}
	return false
}

// headerTag reports whether a tag of this name belongs to the header the
// steering tag is inserted after.
func headerTag(name []byte) bool {
	switch string(name) {
	case "EXT-X-VERSION", "EXT-X-INDEPENDENT-SEGMENTS", "EXT-X-START":
		return true
	}
	return false
}

// scan is what one pass over a playlist finds.
type scan struct {
	kind     Kind
	first    line // the #EXTM3U line
	header   line // the last line of the header
	steering int  // the start of the first steering tag line; -1 for none
	hasOther bool // a multivariant-only tag other than a steering tag
}

// read scans b once, classifying it.
func read(b []byte) (scan, error) {
	s := scan{steering: -1}
	at := 0
	if bytes.HasPrefix(b, []byte(bom)) {
		at = len(bom)
	}
	if at == len(b) {
		return s, nil
	}
	s.first = lineAt(b, at)
	text := b[s.first.start:s.first.end]
	if !bytes.HasPrefix(text, []byte("#EXTM3U")) || !isBlank(text[len("#EXTM3U"):]) {
		return s, nil
	}
	s.header = s.first
	inHeader := true
	multi, media := 0, 0 // the line numbers of the first of each
	n := 1
	for at = s.first.next; at < len(b); {
		n++
		l := lineAt(b, at)
		at = l.next
		name := tagName(b[l.start:l.end])
		if inHeader && headerTag(name) {
			s.header = l
			continue
		}
		inHeader = false
		switch {
		case len(name) == 0:
		case multivariantOnly(name):
			if multi == 0 {
				multi = n
			}
			if string(name) == SteeringTag {
				if s.steering < 0 {
					s.steering = l.start
				}
			} else {
				s.hasOther = true
			}
		case mediaOnly(name):
			if media == 0 {
				media = n
			}
		}
	}
	switch {
	case multi > 0 && media > 0:
		return s, errAt(max(multi, media), ErrMixed,
			fmt.Sprintf("a multivariant tag at line %d and a media tag at line %d", multi, media))
	case multi > 0:
		s.kind = Multivariant
	case media > 0:
		s.kind = Media
	default:
		return s, errAt(0, ErrEmpty, "")
	}
	return s, nil
}

// Classify reads b's kind: an HLS playlist starts with #EXTM3U (after an
// optional UTF-8 BOM); it is multivariant when it has an EXT-X-STREAM-INF
// (or EXT-X-I-FRAME-STREAM-INF, EXT-X-MEDIA, EXT-X-SESSION-*,
// EXT-X-CONTENT-STEERING) tag and no media-playlist tag (EXT-X-TARGETDURATION,
// EXTINF, ...). Bytes that do not start with #EXTM3U are NotPlaylist, with no
// error; a playlist with both kinds of tag, or with neither, is an error
// (wrapping ErrMixed or ErrEmpty).
func Classify(b []byte) (Kind, error) {
	s, err := read(b)
	if err != nil {
		return NotPlaylist, err
	}
	return s.kind, nil
}

// multivariant reads b and requires a multivariant playlist.
func multivariant(b []byte) (scan, error) {
	s, err := read(b)
	if err != nil {
		return s, err
	}
	switch s.kind {
	case NotPlaylist:
		return s, errAt(0, ErrNotPlaylist, "")
	case Media:
		return s, errAt(0, ErrMedia, "")
	}
	return s, nil
}

// lineEnding is the line ending of the #EXTM3U line, or LF when it has
// none.
func (s scan) lineEnding(b []byte) []byte {
	if s.first.next > s.first.end {
		return b[s.first.end:s.first.next]
	}
	return []byte("\n")
}

// checkTag requires tag to be "" or one steering tag line.
func checkTag(tag string) error {
	if tag == "" {
		return nil
	}
	if !strings.HasPrefix(tag, "#"+SteeringTag+":") {
		return errAt(0, ErrTag, fmt.Sprintf("%.40q does not begin #%s:", tag, SteeringTag))
	}
	if strings.ContainsAny(tag, "\r\n") {
		return errAt(0, ErrTag, "a line ending in the tag")
	}
	return nil
}

// SetSteering returns the multivariant playlist b with its steering tag set
// to tag, a whole tag line without its line end
// (`#EXT-X-CONTENT-STEERING:SERVER-URI="…",PATHWAY-ID="…"`), or with every
// steering tag removed when tag is "". A tag already there is replaced in
// place (the first one; any later ones removed: never doubled); otherwise
// the tag is inserted after the header (#EXTM3U and the EXT-X-VERSION,
// EXT-X-INDEPENDENT-SEGMENTS and EXT-X-START lines directly after it) with
// the #EXTM3U line's line ending. A media playlist, or bytes that are not a
// playlist, is an error (the caller never changes those). dst is appended
// to.
func SetSteering(dst, b []byte, tag string) ([]byte, error) {
	if err := checkTag(tag); err != nil {
		return dst, err
	}
	s, err := multivariant(b)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(b)+len(tag)+2)
	if s.steering < 0 {
		if tag == "" {
			return append(dst, b...), nil
		}
		eol := s.lineEnding(b)
		h := s.header
		dst = append(dst, b[:h.next]...)
		if h.next == h.end { // the header ends the file: not reached for a multivariant playlist
			dst = append(dst, eol...)
			return append(dst, tag...), nil
		}
		dst = append(dst, tag...)
		dst = append(dst, eol...)
		return append(dst, b[h.next:]...), nil
	}
	copied, done := 0, false
	for at := s.steering; at < len(b); {
		l := lineAt(b, at)
		at = l.next
		if string(tagName(b[l.start:l.end])) != SteeringTag {
			continue
		}
		dst = append(dst, b[copied:l.start]...)
		if !done && tag != "" {
			dst = append(dst, tag...)
			dst = append(dst, b[l.end:l.next]...)
		}
		copied, done = l.next, true
	}
	return append(dst, b[copied:]...), nil
}
