// Package answer writes what a steering route answers, a room's or a
// pool's alike: the headers every answer shares, the checks every steering
// request passes (§4: a GET, a target of bounded length), the CORS
// preflight, and a manifest written from a pooled buffer. It decides
// nothing, and imports no steerer nor the server.
package answer

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/web"
)

// ManifestType is the media type of a steering manifest: the one
// draft-pantos-content-steering registers for it (§11.1 of the draft; the
// IANA media types registry lists application/vnd.apple.steering-list with
// the draft as its reference), which §8.1 has the manifest served with.
const ManifestType = "application/vnd.apple.steering-list"

// Buffers are reused for the decision's signed bytes and the manifest.
var Buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Header values every steering answer shares, set in the header map as
// they are: net/http copies a header's values when it writes them, and
// never changes a slice it was given.
var (
	headerNoStore   = []string{"no-store"}
	headerAnyOrigin = []string{"*"}
	HeaderManifest  = []string{ManifestType}
)

// Headers writes the headers of every answer on a steering route: the
// manifest is the client's own and never cached (§6: each request is
// decided), and a player in a browser on another origin may read it.
func Headers(w http.ResponseWriter) {
	h := w.Header()
	h["Cache-Control"] = headerNoStore
	h["Access-Control-Allow-Origin"] = headerAnyOrigin
}

// Steerable writes the headers of every steering answer, a room's or a
// pool's, and refuses what no steering route takes: a method other than GET
// (§4; OPTIONS is the preflight's), a target over MaxTarget.
func Steerable(w http.ResponseWriter, r *http.Request) bool {
	Headers(w)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, OPTIONS")
		web.Refuse(w, api.Errorf(api.MethodNotAllowed, "a steering request is a GET (§4), not %s", r.Method))
		return false
	}
	if len(r.RequestURI) > MaxTarget {
		web.Refuse(w, api.Errorf(api.TargetTooLong, "the request target is %d bytes, over the %d a steering request may have", len(r.RequestURI), MaxTarget))
		return false
	}
	return true
}

// Preflight answers a CORS preflight: a player in a browser sends CMCD in
// request headers (CTA-5004-B header mode), which makes its GET need one.
func Preflight(w http.ResponseWriter, r *http.Request) {
	web.Preflight(w, "GET, POST, OPTIONS", "CMCD-Request, CMCD-Object, CMCD-Session, CMCD-Status, Content-Type")
}

// Manifest writes m, made in the pooled buffer mb, as a 200 of
// content type ct and length length (nil: counted from m), and gives mb
// back to the pool.
func Manifest(w http.ResponseWriter, ct, length []string, m []byte, mb *[]byte) {
	hd := w.Header()
	hd["Content-Type"] = ct
	if length != nil {
		hd["Content-Length"] = length
	} else {
		hd.Set("Content-Length", strconv.Itoa(len(m)))
	}
	w.WriteHeader(http.StatusOK)
	w.Write(m)
	*mb = m[:0]
	Buffers.Put(mb)
}

// MaxTarget bounds a steering request's target.
const MaxTarget = 16 << 10

// HeaderJSON is a pool manifest's media type: the station seed's.
var HeaderJSON = []string{"application/json"}
