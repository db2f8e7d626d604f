// Package poolsteer is steering a pool and operating it: the server's
// side of a pool (internal/pool holds its rule). A Steerer answers a
// pool's steering route with the session's manifest, as the station seed
// does, runs the health checks of its edges, counts its sessions in the
// table of loads, feeds and applies its QoE watch and the per-client rule,
// and answers the operator's routes of its edges (GET P/edges, a drain, a
// weight). Pools are the set the server steers: opened from the
// configuration, reloaded in place (SIGHUP), and written to /metrics
// (waisteer_pool_*).
//
// A steering request's path goes down the layers only: the server's
// routes find the Steerer, which orders the session's edges by the rule
// (pool.Pool.Steer) and counts it in the store's table of loads.
//
// It owns the pools, their checkers, their edges' changes, their clients
// kept away and their metrics. What it needs of the server it is given at
// construction (Deps): the table of loads, the store's session secret, the
// clock, the logger, the steering budgets (Budget), the QoE watch the
// server evaluates (Watch), the operator's token check and the rebuild of
// the route table after a reload. It may not import internal/server nor
// another capability's package, and it signs nothing and stores no
// decision: a pool's answer is unsigned (players.md, the station seed).
package poolsteer
