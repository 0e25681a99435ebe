-- 014: the nodes that hold a liveness lock (store/liveness.go). A row says
-- "this lease owner holds its advisory lock while it lives": only the
-- owners listed here are judged dead by their lock being free, so a node of
-- an older herald (which holds no such lock) is never taken for dead.
CREATE TABLE herald_nodes (
    id         text PRIMARY KEY,
    started_at timestamptz NOT NULL
);
