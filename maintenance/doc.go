// Package maintenance runs herald's background services that must run on
// one node at a time: the queue staleness alarm (herald.queue.stale) and
// the retention sweeper.
//
// Leadership comes from the store (store.Store.LeaderAttempt): on
// PostgreSQL a session advisory lock on a dedicated connection, so exactly
// one node of a deployment sweeps and alarms; on SQLite the single node.
// Every node runs a Maintainer; only the leader does the work, and when it
// dies another node takes over within LeaderInterval.
package maintenance
