package web

import (
	"net/http"
	"slices"
	"strings"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/sig"
)

// Allow answers 405 unless the request's method is one of methods.
func Allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	Refuse(w, api.Errorf(api.MethodNotAllowed, "%s is not answered here; use %s", r.Method, strings.Join(methods, ", ")))
	return false
}

// NoQuery answers 400 when a route that reads no query is given one.
func NoQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return true
	}
	Refuse(w, api.Errorf(api.QueryNotAllowed, "this route reads no query, and was given %q", r.URL.RawQuery))
	return false
}

// Digest reads a path segment of 64 lowercase hexadecimal digits, as the
// server writes digests and room ids (§8.1, §8.4).
func Digest(s string) (sig.Hash, *api.Error) {
	var h sig.Hash
	if len(s) != 2*len(h) {
		return h, api.Errorf(api.BadDigest, "%q is not 64 lowercase hexadecimal digits", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, api.Errorf(api.BadDigest, "%q is not 64 lowercase hexadecimal digits", s)
		}
	}
	h, _ = sig.ParseHash(s)
	return h, nil
}

// PathDefect says what is wrong with an escaped path, or "" when nothing
// is: it must be absolute, with no empty segment (a single "/" at its end
// ends its last segment) and no dot segment (RFC 3986 §3.3, §5.2.4).
func PathDefect(p string) string {
	if p == "" || p[0] != '/' {
		return "is not an absolute path"
	}
	rest := p[1:]
	for rest != "" {
		seg, after, more := strings.Cut(rest, "/")
		switch {
		case seg == "" && more:
			return "has an empty segment (//)"
		case isDotSegment(seg):
			return "has a dot segment (" + seg + ")"
		}
		rest = after
	}
	return ""
}

// isDotSegment reports whether a segment is "." or ".." once its
// percent-encodings are decoded ("%2e" is ".").
func isDotSegment(seg string) bool {
	dots := 0
	for seg != "" && dots < 3 {
		switch {
		case seg[0] == '.':
			seg = seg[1:]
		case len(seg) >= 3 && seg[0] == '%' && seg[1] == '2' && (seg[2] == 'e' || seg[2] == 'E'):
			seg = seg[3:]
		default:
			return false
		}
		dots++
	}
	return seg == "" && (dots == 1 || dots == 2)
}

// Preflight answers a CORS preflight (the Fetch standard's
// CORS-preflight request) with 204 and no body: any origin may send the
// methods and request headers listed, and may cache the answer for a day.
func Preflight(w http.ResponseWriter, methods, headers string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", headers)
	h.Set("Access-Control-Max-Age", "86400")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// A RoomName is a room the server holds, by its id and its descriptor's
// name, for RoomOf.
type RoomName struct {
	ID   sig.Hash
	Name string
}

// RoomOf finds the room a {room} path segment names, among rooms: by its
// digest (64 lowercase hexadecimal digits, the room id), or else by its
// descriptor's name, matched exactly (issue 29: operator routes took only
// the digest). A segment of a digest is returned whether or not rooms hold
// it (the caller's lookup says); a name no room has is 404 room_not_found,
// and a name several rooms share is 400 room_not_identified.
func RoomOf(segment string, rooms []RoomName) (sig.Hash, *api.Error) {
	if id, aerr := Digest(segment); aerr == nil {
		return id, nil
	}
	var found []sig.Hash
	for _, r := range rooms {
		if r.Name == segment && !slices.Contains(found, r.ID) {
			found = append(found, r.ID)
		}
	}
	switch len(found) {
	case 0:
		return sig.Hash{}, api.Errorf(api.RoomNotFound, "the server holds no room named %q (a room is named by its descriptor's name or its 64-digit id)", segment)
	case 1:
		return found[0], nil
	}
	return sig.Hash{}, api.Errorf(api.RoomAmbiguous, "%d rooms are named %q: name one by its 64-digit id", len(found), segment)
}
