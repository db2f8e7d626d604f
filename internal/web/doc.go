// Package web is what answering one HTTP route takes, shared by the server
// and by every capability that owns routes (a pool's operations, the log's
// routes, the dashboard, the front): a route's declaration (Route), a
// refusal that the request's log line remembers (Refuse, Writer), the
// checks every route makes (Allow, NoQuery, Digest), a store's failure told
// without its internals (StoreFailures), and the two kinds of metric the
// server writes by hand (Counters, Histogram).
//
// It holds no state of a room, a pool or the server, and imports none of
// their packages: a capability that imports it stays below the server.
package web
