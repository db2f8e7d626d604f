// Package roomsteer steers one energy room (the WAI energy-aware steering
// extension): its state (room, key log head, policy), its evidence from
// the hops' records (§5), the ranking computed from it (§6.2), and each
// steering request's decision, made by the rule (internal/decision),
// signed (§7.3), committed durably with others (internal/commit) and
// answered as a manifest (§8.1). It also takes the hops' records
// (COMPANION §5), the operator's changes of policy and key log head, the
// recount of live sessions after a restart, and the overlay policy its
// pathways' health and QoE call for (internal/overlay).
//
// A steering request goes down only: the server's routes find the Room
// (ServeSteer), which spends the budgets (internal/budget), reads the
// report (report), ranks and decides (decision), counts the session in the
// table of loads and commits the decision (store, commit). What the room
// takes of the server is in Deps, all of it values of lower packages but
// Routes, KnowPolicy, PolicyOf and KeepEpoch, which only the operator's
// changes and a start call. It may not import internal/server, nor another
// capability's package (poolsteer, audit, dashboard, follow, front).
package roomsteer
