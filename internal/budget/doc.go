// Package budget holds the budgets of the steering routes (issue 26 item 5). Every steering request
// a room decides is signed and stored, and every one without a session
// mints one; so a client address and its network each have a budget of
// decisions a second, and of requests without a session a second, each a
// token bucket with a burst (internal/limit). A request over a budget is
// not decided. It is answered so that players keep steering (players.md:
// 404, 410 and 429 stop them, and one 5xx may end steering in video.js):
//
//   - a request whose session had its latest manifest from this server
//     less than the room's min_ttl_s ago (§6.5: the shortest TTL a room
//     gives) is answered that manifest again, as it was: the same
//     decision, no new signature, nothing stored, no load counted. An
//     honest player never asks sooner than its manifest's TTL, so what is
//     answered so is a flood that keeps a session;
//   - a pool's request with a session it minted is answered the manifest
//     the pool orders for it, with nothing counted: a pool stores nothing
//     and its answer is the session's while its edges stand;
//   - anything else is answered 503 over_budget with Retry-After the
//     room's min_ttl_s (a pool's TTL), which every player retries: hls.js
//     and Shaka after the TTL, dash.js after its TTL unless it was its
//     first request, Media3 after 300 s.
//
// Each is counted by reason and answer (Counts), in /metrics and in the
// room's or pool's status. What a room stores is then at most its budgets'
// worth.
//
// It owns the tables of buckets (Budgets), the refusal (Refuse), the counts
// and a table of each session's latest answer (Latest); what a replayed
// answer is, the steerer that made it knows. It is a part the steerers
// (roomsteer, poolsteer) are made of, below them: it imports none of them,
// nor the server.
package budget
