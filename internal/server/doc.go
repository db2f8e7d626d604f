// Package server is the steering server of the energy-aware steering
// extension over HTTP. It composes the capabilities and keeps only what
// every route shares: the route table (routes.go) and the one set of routes
// (newMux), operator auth (operator.go), the body limit, the metrics'
// registry (metrics.go), the group commits' lifecycle, and start, reload
// and close (lifecycle.go). New reads as the list of capabilities it
// composes:
//
//   - energy rooms (internal/roomsteer): players' steering requests
//     answered with signed manifests (§4 to §8.1), hops' records (COMPANION
//     §5), the operator's policy and key log head, a room's health and QoE
//     overlays (internal/overlay);
//   - pools (internal/poolsteer): health-checked, weighted edges, unsigned,
//     as the station seed runs them, and their operator routes;
//   - the auditors' routes and each room's log (internal/audit);
//   - the front (internal/front): playlists as served, and players that
//     cannot steer (front.go is its glue);
//   - the dashboard (internal/dashboard);
//   - the follower of other servers on a shared store (internal/follow);
//   - the restart's recount of live sessions (internal/restore);
//   - the fasthttp engine (internal/fastserve).
//
// A room and a pool differ only in how a steering route is answered (the
// steerer interface): the route table finds the steerer, and the steerer
// goes down to its rule and the store; no capability calls back into the
// server on that path. What a capability needs of the server it declares
// in its own package (a Deps struct, a small interface), and the server's
// glue files (*glue.go) implement it. Either steerer may steer by what its
// players report (internal/qoewatch), which the server evaluates every
// second (qoe.go).
//
// # Routes
//
// The paths of each room's policy URIs (the host is ignored):
//
//	GET     <server_uri path>, <reload_uri path>   the steering manifest (§8.1)
//	OPTIONS the same                               CORS preflight (CMCD header mode, event reports)
//	POST    the same                               CMCD v2 event reports, when the room steers by QoE
//	GET     <decision_uri path><digest>            the decision's WSD1 bytes (§8.4)
//
// and the server's own:
//
//	GET  /v1/decisions/{digest}                    a decision, whatever its policy's decision_uri
//	GET  /v1/policies/{digest}                     a policy's WSP1 bytes, the active one or any earlier
//	GET  /v1/records/{digest}                      a per-hop record's WMH1 bytes
//	GET  /v1/rooms/{room}/descriptor               the room descriptor (COMPANION §4)
//	GET  /v1/rooms/{room}/keylog                   the current key log head; 404 for a room with no origin
//	POST /v1/rooms/{room}/records                  a hop's records, back to back
//	PUT  /v1/rooms/{room}/policy                   a new policy (operator token)
//	PUT  /v1/rooms/{room}/keylog                   a newer key log head (operator token)
//	GET  /v1/rooms/{room}/status                   the room's status as JSON (operator token)
//	GET  /v1/rooms/{room}/log/checkpoint           the room's log 0 of decisions: its signed checkpoint (internal/audit)
//	GET  /v1/rooms/{room}/log/tile/...             its tiles (C2SP tlog-tiles)
//	GET  /v1/rooms/{room}/log/inclusion/{digest}   a decision's index and inclusion proof [?size=N]; 307 to its log's without N
//	GET  /v1/rooms/{room}/log/consistency          a consistency proof ?from=M[&size=N]
//	GET  /v1/rooms/{room}/log/epochs               the key log heads with a start in log 0, from which leaf
//	GET  /v1/rooms/{room}/logs                     the room's logs: number, server, size, sealed (issue 31)
//	GET  /v1/rooms/{room}/logs/{n}/...             log n as /log/... serves log 0: checkpoint, tile/..., epochs,
//	                                               inclusion/{digest} (404 naming the log of another log's
//	                                               decision), consistency
//	GET  /v1/rooms/{room}/keylog/{seq}             a head the room has had, by seq
//	GET  /healthz, /readyz, /metrics
//
// and each pool's, at its path P (default /api/v1/steering):
//
//	GET    P                                      the pool's manifest (the station seed's)
//	GET    P/edges                                the edges and their health (operator token)
//	POST   P/edges/{pathway}/drain, DELETE the same  drain, undrain (operator token)
//	PUT    P/edges/{pathway}/weight               {"weight": N} (operator token)
//
// A manifest is served with the media type draft-pantos-content-steering
// §11.1 registers (ManifestType), Cache-Control: no-store and
// Access-Control-Allow-Origin: *. Signed bytes named by a digest are served
// as application/octet-stream with immutable caching. A refusal is JSON,
// {"error": CODE, "detail": TEXT}, with CODE one of the text's refusal
// codes (for the bytes a request carries) or the server's own; statusOf is
// the one table from codes to statuses.
//
// # A steering request
//
// Per request the server reads the query once (§4.1) for the session and
// the report; takes the client's draw (§6.3); takes the room's loads and
// applies the steps of the rule that read them under the room's lock in
// the table of loads (§6, store.Loads.Steer), so that the loads are exact
// under concurrent requests; builds and signs the decision (§7.3); hands
// the compacted decision to the group committer, which writes every
// decision waiting in one durable write (the next write starts as soon as
// the last has returned); and writes the manifest only once its decision
// is durable. A hop's records are likewise written with those of the
// POSTs that arrive meanwhile. The
// evidence, the ranks and the order are computed once per window and
// again when a record arrives (decision.Ranking), and read through an
// atomic pointer.
//
// A session counts toward the pathway its latest decision put first until
// its manifest's TTL and Config.SessionGrace have passed since the
// decision (DefaultSessionGrace gives the reason for 20 s).
//
// While a room has a policy its steering route never answers 404, 410 or
// 429, which make real players stop steering for good: a decision the
// store cannot take is answered 503 with Retry-After min_ttl_s (§6.5), a
// status every player retries, and never with a manifest naming a
// decision an auditor could not fetch.
package server
