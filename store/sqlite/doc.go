// Package sqlite is herald's embedded store: one node, one database file, no
// server to run. It implements store.Store on github.com/mattn/go-sqlite3
// (cgo), chosen by measurement: it had the best insert throughput of the
// three database/sql drivers at the batch sizes ingest uses (the figures
// are in docs/adr/0001-sqlite-driver.md).
//
// # Durability and concurrency
//
// The database runs in WAL mode with synchronous=FULL by default, so an
// event acknowledged to a producer survives power loss (Config.Synchronous
// may relax this to "normal", which can lose the last commits on power loss
// but never corrupts the file). All writes go through ONE connection and
// start with BEGIN IMMEDIATE: SQLite allows one writer at a time anyway, and
// queueing writers in database/sql rather than in SQLite's busy handler keeps
// SQLITE_BUSY out of the write path. Reads use a separate pool of read-only
// connections so that listing and stats never wait behind a write.
//
// # One process per data directory
//
// Open takes an exclusive flock on Path+".lock" for the life of the Store
// and writes its pid there. A second Open — from this process or another —
// fails with ErrLocked naming the holder, because two processes running
// herald's queue on one file would both believe they own its leases. It
// also means every in_flight row a new process finds was left by a dead
// one: NodeLivenessHold rescues them all at start (store/liveness.go).
//
// # Schema
//
// Migrations are the numbered files in migrations/, embedded in the binary
// and applied by Migrate in one transaction; a database whose schema is newer
// than the code is refused rather than guessed at. Times are INTEGER
// milliseconds since the Unix epoch.
package sqlite
