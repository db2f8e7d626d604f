// Package fastserve serves an http.Handler on fasthttp, with every
// request's bytes owned: fasthttp reuses a connection's buffers (and the
// strings the adaptor makes over them) for its next request once a
// handler has returned, so every string the handler is given is a copy
// (ownRequest), and what a handler keeps of a request stays as it was.
//
// It owns the engine: the handler around fasthttpadaptor (Handler), the
// recovery of a panic as net/http ends such a request (the connection
// closed with no answer), the fasthttp server's limits and its refusals
// of what it cannot read (Limits, NewServer), the listener that lets it
// wait for a request in one read (Listener), and an http.ResponseWriter
// onto a fasthttp response (Writer).
//
// It knows no route: a request that can be answered on fasthttp's own
// request (the server's steering GET) is answered by a hook the caller
// gives (Fast). It may not import the server nor any capability.
package fastserve
