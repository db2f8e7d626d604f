package fastserve

import (
	"net/http"

	"github.com/valyala/fasthttp"
)

// Writer is an http.ResponseWriter onto a fasthttp response: the header
// map is copied into it when the status is written. A Writer may be
// reused (Reset), as the server's pooled steering requests do.
type Writer struct {
	c     *fasthttp.RequestCtx
	h     http.Header
	wrote bool
}

// NewWriter returns a Writer onto c's response.
func NewWriter(c *fasthttp.RequestCtx) *Writer {
	return &Writer{c: c, h: make(http.Header, 4)}
}

// Reset makes w a Writer onto c's response (onto none for nil), with an
// empty header and nothing written.
func (w *Writer) Reset(c *fasthttp.RequestCtx) {
	if w.h == nil {
		w.h = make(http.Header, 8)
	}
	clear(w.h)
	w.c, w.wrote = c, false
}

func (w *Writer) Header() http.Header { return w.h }

func (w *Writer) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	rh := &w.c.Response.Header
	for k, vs := range w.h {
		for _, v := range vs {
			rh.Add(k, v)
		}
	}
	w.c.SetStatusCode(status)
}

func (w *Writer) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.c.Write(b)
}
