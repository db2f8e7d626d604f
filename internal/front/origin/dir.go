package origin

// The fetch from a directory, and its answers to conditional requests
// (RFC 9110 §13): the package doc says how the ETag and Last-Modified are
// made and why a 304 never hides a change.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"syscall"
	"time"
)

// contentTypes are the types by extension (RFC 8216 §4, ISO/IEC 23009-1
// Annex C).
var contentTypes = map[string]string{
	".m3u8": "application/vnd.apple.mpegurl",
	".mpd":  "application/dash+xml",
}

// errPathEscapes is os.Root's refusal of a name that leads out of its
// directory; os keeps its sentinel unexported, so its words are compared
// (TestDirSymlinks fails should they change).
const errPathEscapes = "path escapes from parent"

func (o *Origin) fetchDir(ctx context.Context, r *Request) (*Response, *Error) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, fail(CodeCanceled, err, "the request was cancelled before the file was read")
		}
		return nil, fail(CodeTimeout, err, "the request's time ran out before the file was read")
	}
	root, err := os.OpenRoot(o.dir)
	if err != nil {
		return nil, fail(CodeUnreachable, err, "the origin's directory cannot be opened: %v", errors.Unwrap(err))
	}
	defer root.Close()
	// O_NONBLOCK, so that a FIFO put in the directory is refused below
	// rather than waited on for a writer.
	f, err := root.OpenFile(r.Path[1:], os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fail(CodeUnreadable, err, "the file cannot be read: %v", errors.Unwrap(err))
	}
	switch {
	case st.IsDir():
		return nil, fail(CodeNotFound, nil, "the path names a directory, not a file")
	case !st.Mode().IsRegular():
		return nil, fail(CodeUnreadable, nil, "the path names something that is not a regular file")
	case st.Size() > o.maxBytes:
		return nil, fail(CodeTooLarge, nil, "the file is %d bytes, over the limit of %d", st.Size(), o.maxBytes)
	}
	// The file may grow between the stat and the read.
	b, err := io.ReadAll(io.LimitReader(f, o.maxBytes+1))
	switch {
	case err != nil:
		return nil, fail(CodeUnreadable, err, "the file cannot be read: %v", errors.Unwrap(err))
	case int64(len(b)) > o.maxBytes:
		return nil, fail(CodeTooLarge, nil, "the file is over the limit of %d bytes", o.maxBytes)
	case len(b) == 0:
		return nil, fail(CodeEmpty, nil, "the file is empty, which is no playlist")
	}

	now := time.Now()
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := http.Header{"Etag": {etag}}
	mtime := st.ModTime()
	// Rounded up, and only once that second is past, so that no write
	// after it can share its date (and Date, the front's, is never
	// earlier: RFC 9110 §8.8.2.1).
	lm := mtime.Truncate(time.Second)
	if lm.Before(mtime) {
		lm = lm.Add(time.Second)
	}
	if !lm.After(now.Truncate(time.Second)) {
		h.Set("Last-Modified", lm.UTC().Format(http.TimeFormat))
	}
	if notModified(r, etag, mtime, now) {
		return &Response{Status: http.StatusNotModified, Header: h}, nil
	}
	return &Response{
		Status:      http.StatusOK,
		Body:        b,
		ContentType: contentTypes[path.Ext(r.Path)],
		Header:      h,
	}, nil
}

// openError judges a file that does not open.
func openError(err error) *Error {
	var pe *fs.PathError
	inner := err
	if errors.As(err, &pe) {
		inner = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return fail(CodeNotFound, err, "the origin has no such file")
	case inner.Error() == errPathEscapes:
		return fail(CodeNotFound, err, "the path leads out of the origin's directory")
	case errors.Is(err, syscall.ELOOP):
		return fail(CodeNotFound, err, "the path's symbolic links loop")
	}
	return fail(CodeUnreadable, err, "the file cannot be opened: %v", inner)
}

// notModified evaluates the request's preconditions for a GET (RFC 9110
// §13.2.2): If-None-Match when present, else If-Modified-Since; true means
// the answer is 304.
func notModified(r *Request, etag string, mtime, now time.Time) bool {
	if r.IfNoneMatch != "" {
		return noneMatchFails(r.IfNoneMatch, etag)
	}
	if r.IfModifiedSince == "" {
		return false
	}
	// §13.1.3: a value that is not an HTTP-date is ignored; so is one
	// later than now, which no copy of ours could carry.
	since, err := http.ParseTime(r.IfModifiedSince)
	if err != nil || since.After(now) {
		return false
	}
	return !mtime.After(since)
}

// noneMatchFails reports whether the If-None-Match value v evaluates to
// false for a representation whose entity tag is etag (RFC 9110 §13.1.2):
// v is "*", or lists a tag that matches etag by the weak comparison. A
// value that does not read as the field's grammar matches nothing, so that
// the player gets the whole body.
//
//	If-None-Match = "*" / #entity-tag
//	entity-tag    = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc         = %x21 / %x23-7E / obs-text
func noneMatchFails(v, etag string) bool {
	v = trimOWS(v)
	if v == "*" {
		return true
	}
	want := opaque(etag)
	match := false
	i := 0
	for {
		// Empty list elements are allowed (§5.6.1.2).
		for i < len(v) && (v[i] == ',' || v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i == len(v) {
			return match
		}
		if len(v)-i >= 2 && v[i] == 'W' && v[i+1] == '/' {
			i += 2
		}
		if i == len(v) || v[i] != '"' {
			return false
		}
		tagStart := i
		i++
		for i < len(v) && v[i] != '"' {
			if c := v[i]; c < 0x21 || c == 0x7f {
				return false
			}
			i++
		}
		if i == len(v) {
			return false
		}
		i++
		match = match || v[tagStart:i] == want
		// After a tag: white space, then a comma or the end.
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i < len(v) && v[i] != ',' {
			return false
		}
	}
}

// opaque is an entity tag without its weakness indicator.
func opaque(tag string) string {
	if len(tag) >= 2 && tag[:2] == "W/" {
		return tag[2:]
	}
	return tag
}

func trimOWS(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	return s[i:j]
}
