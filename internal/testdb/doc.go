// Package testdb opens fresh, migrated stores for tests: a SQLite file in
// the test's temporary directory, or a PostgreSQL schema no other test
// uses meanwhile.
//
// PostgreSQL comes from HERALD_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When no server
// answers the test is skipped with a visible message — except under CI=true,
// where it fails: CI must never silently skip the PostgreSQL half.
//
// Migrating is most of what a store test costs (on PostgreSQL 0.7 s or more
// of DDL per schema, against tens of milliseconds to empty one), so:
//
//   - Postgres hands out schemas from a pool of the test process. A schema
//     is migrated by the store's own Migrate the first time; when its test
//     ends it is reset (rows deleted, the migrations' own rows put back,
//     sequences restarted) and reused. One the test changed beyond its rows
//     (a definition, planner statistics, over a MiB of growth) is dropped
//     instead. The test still has a store of its own on real connections:
//     LISTEN/NOTIFY, advisory locks and leader election keyed by the schema
//     behave as on a fresh one.
//   - PostgresSchema is an empty schema of the test's own, dropped on
//     cleanup: for tests that migrate it themselves (concurrent or partial
//     migrations) or open several stores or a herald process on it.
//   - SQLite copies a file migrated once per test process.
//
// Parallel test processes (go test -p) share the server: every name is
// unique (herald_test_ or herald_pool_, the creation time, a random part),
// and a process holds a session advisory lock on each pooled schema for as
// long as it runs. The first PostgreSQL test of a process sweeps what
// others left: pooled schemas whose lock is free (their process ended or
// was killed) and a test's own schemas older than an hour. A package whose
// TestMain calls PoolDrop leaves nothing behind.
package testdb
