package server

import (
	"net/http"

	"github.com/waisteer/waisteer/internal/api"
)

// writeError answers a refused request (api.WriteError), remembering the
// refusal for the request's log line (count).
func writeError(w http.ResponseWriter, e *api.Error) {
	if sw, ok := w.(*statusWriter); ok {
		sw.refusal = e
	}
	api.WriteError(w, e)
}
