// Package audit is what an auditor fetches from the server: every signed
// byte a decision needs to be verified (§8.4, §9.1) and each room's log of
// decisions (issue 16, internal/declog), over HTTP.
//
// It owns the auditors' routes (a decision by its digest, a policy, a
// record, a room's descriptor and key log head) and the logs' (the list of
// a room's logs, and each log's checkpoint, epochs, tiles, inclusion and
// consistency proofs; /log/ is log 0, issue 16's, and /logs/{n}/ each log
// of a room several servers steer, issue 31), the heads a room has had,
// the signed checkpoint each steered room's logs last had, and the epochs
// of a room's key log as the store keeps them, each started in the log of
// the server that signs under it (KeepEpoch). Signed bytes are served
// exactly as they were signed.
//
// It reads the rooms through Rooms (a steered room's steering key and
// current descriptor and head, a room the store holds and the server no
// longer steers) and the store; it changes no room, makes no decision and
// writes to the store only a key log epoch. It imports no capability and
// not the server, which registers its Routes and calls ServeDecision for a
// policy's decision_uri.
package audit
