package web

import (
	"net/http"
	"sync"

	"github.com/waisteer/waisteer/internal/api"
)

// Writer remembers the status a handler wrote and the refusal it wrote with
// Refuse, for the request's metrics and its log line.
type Writer struct {
	http.ResponseWriter
	status  int
	refusal *api.Error
}

// WriteHeader records the first status written.
func (w *Writer) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

// Write records 200 when nothing was written before.
func (w *Writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Result is the status written (200 when none was) and the refusal, if any.
func (w *Writer) Result() (int, *api.Error) {
	if w.status == 0 {
		return http.StatusOK, w.refusal
	}
	return w.status, w.refusal
}

// writers are reused: one per request would be the only allocation the
// counting adds.
var writers = sync.Pool{New: func() any { return new(Writer) }}

// NewWriter wraps w; Release gives it back once the request is answered.
func NewWriter(w http.ResponseWriter) *Writer {
	sw := writers.Get().(*Writer)
	sw.ResponseWriter, sw.status, sw.refusal = w, 0, nil
	return sw
}

// Release returns the writer for reuse; it must not be used after.
func (w *Writer) Release() {
	w.ResponseWriter, w.refusal = nil, nil
	writers.Put(w)
}

// Refuse answers a refused request (api.WriteError), remembering the
// refusal for the request's log line when w is a Writer.
func Refuse(w http.ResponseWriter, e *api.Error) {
	if sw, ok := w.(*Writer); ok {
		sw.refusal = e
	}
	api.WriteError(w, e)
}
