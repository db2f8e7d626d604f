package web

import "net/http"

// A Route is one pattern a capability answers: its method and path, in
// net/http.ServeMux's syntax ("/v1/rooms/{room}/log/checkpoint"), and the
// family its requests are counted under in the server's metrics
// (waisteer_http_requests_total's route label). The server registers it,
// answers 405 for another method on its path, and counts every request.
type Route struct {
	Method  string
	Pattern string
	Family  string
	Serve   http.HandlerFunc
}
