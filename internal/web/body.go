package web

import (
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/waisteer/waisteer/internal/api"
)

// OctetStream refuses a body the route cannot read as sent: one with a
// Content-Type other than application/octet-stream, or any
// Content-Encoding.
func OctetStream(r *http.Request) *api.Error {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return api.Errorf(api.MediaType, "the body is %s-encoded; send it as it is", enc)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/octet-stream" {
		return api.Errorf(api.MediaType, "Content-Type %q: the body is binary, application/octet-stream", ct)
	}
	return nil
}

// ReadBody reads a request's body up to limit bytes; a longer one is
// body_too_large.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *api.Error) {
	if r.ContentLength > limit {
		return nil, api.Errorf(api.BodyTooLarge, "the body is %d bytes, over the limit of %d", r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, api.Errorf(api.BodyTooLarge, "the body is over the limit of %d bytes", limit)
		}
		return nil, api.Errorf(api.BadBody, "reading the body: %v", err)
	}
	return b, nil
}
