// Package follow follows the other servers' writes on a shared store
// (store.Feed, issue 15): a record another server accepted joins this
// server's evidence, and a policy or key log head another server installed
// is installed here, each as soon as it is committed.
//
// It owns the follower's loop (Follower.Follow: retries while the store
// cannot be reached, a wake-up when the store says it is back), the
// applying of one batch of the feed (Follower.Apply), and the counter of
// its failures (waisteer_feed_failures_total, WriteMetrics).
//
// It may not touch a room's state itself: what it does to a room (read a
// record, add records from peers, install a policy or a key log head) it
// asks of the Room interface, which the server implements; and it reads
// the store only through Store. It imports no capability's package and
// not the server.
package follow
