package store

// Node liveness: how a crashed node's leases are taken back as soon as its
// death is known, not when they expire (docs/adr/0020-node-liveness.md).
//
// The rule, for every store:
//
//   - A node that called NodeLivenessHold is alive while its store is open.
//     Its in_flight deliveries are never taken by DeliveryRescueDead; only
//     DeliveryRescue (lease expiry) takes them, the fallback for a node that
//     is alive but stuck.
//   - A node that died (its process ended without Close) is dead at once:
//     DeliveryRescueDead makes its in_flight deliveries pending, due at Now,
//     with DeliveryRescue's rules (attempts and tier unchanged, ordering
//     keys freed).
//   - A lease owner that never called NodeLivenessHold (a node of an older
//     herald, a test engine) is never judged dead: only lease expiry
//     rescues its deliveries.
//   - NodeLivenessHold rescues, at once, what a previous process left under
//     the same NodeID (a node restarted with a stable --node-id).
//
// PostgreSQL: NodeLivenessHold takes a session advisory lock keyed by
// (schema, NodeID) on a dedicated connection kept until Close, and registers
// NodeID in herald_nodes (migration 014). PostgreSQL frees the lock when
// the session ends: at once when the process dies (its socket closes), or
// within the TCP keepalive bounds set on that connection when its host or
// the network vanishes. DeliveryRescueDead judges dead every registered
// node whose lock it can take (a transaction-level try-lock, so it holds
// the lock only while it rescues and unregisters the node).
//
// SQLite: one process owns the data directory (its lock file), so every
// in_flight row NodeLivenessHold finds belongs to a dead process: it
// rescues them all. DeliveryRescueDead has no other process to watch and
// does nothing.
