-- 014: the nodes that hold a liveness lock (store/liveness.go). SQLite has
-- one process per data directory, so nothing reads it; the table exists so
-- that a version names the same step in both stores (store/migrate.go).
CREATE TABLE herald_nodes (
    id         TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL
);
