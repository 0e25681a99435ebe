// Package postgres is herald's PostgreSQL store: the backend for several
// nodes sharing one database. It implements store.Store with pgx/v5 and a
// pgxpool.
//
// Schema: migrations are embedded (migrations/NNN_name.sql) and applied by
// Migrate in one transaction holding a transaction-scoped advisory lock keyed
// by the schema name, so nodes booting together serialize instead of racing;
// a schema newer than the code is refused. Config.Schema puts every table in
// a schema of its own (created on Open) through the connections'
// search_path.
//
// The queue stays small: deliveries is partitioned by state (migration 005)
// into deliveries_active (pending, in_flight), which claims, completions
// and rescue touch, and deliveries_done, where finished rows wait for
// retention; an UPDATE that finishes or retries a delivery moves its row.
// A statement that waited for a row another transaction moved fails with
// 40001, and retryMoved runs it again. QueueVacuum (store.Vacuumer), run by
// the leader every few seconds, removes the dead row versions every claim
// and completion leaves behind, whether or not the server's autovacuum runs.
//
// Queue paths:
//   - EventInsertMany is one statement: the events go in with
//     INSERT … SELECT unnest(…) ON CONFLICT DO NOTHING, and a data-modifying
//     CTE inserts the deliveries of the events that were actually inserted.
//     Duplicates are read back (with their original delivery count) only
//     when there are some.
//   - DeliveryClaim walks the enabled subscriptions, takes at most Limit due
//     rows of each from the partial pending index (LATERAL … LIMIT), ranks
//     them per subscription (round-robin order), and locks the first Limit
//     still pending with FOR UPDATE SKIP LOCKED before marking them
//     in_flight — so two nodes never claim one delivery, and one claim costs
//     (enabled subscriptions + their due rows up to Limit each), never the
//     backlog.
//   - DeliveryCompleteMany sends its attempts, state changes, disables and
//     system events as one pgx.Batch inside one transaction.
//
// Node liveness (liveness.go, rule in store/liveness.go): each node holds a
// session advisory lock on a dedicated connection and is registered in
// herald_nodes; DeliveryRescueDead takes the leases of registered nodes
// whose lock is free.
//
// Errors: failures to reach the server (dial errors, a closed pool, a
// connection lost mid-query, a deadline against a dead server, SQLSTATE
// classes 08 and 57P) wrap herald.ErrStoreUnavailable; missing rows are
// herald.ErrNotFound and state conflicts herald.ErrConflict.
package postgres
