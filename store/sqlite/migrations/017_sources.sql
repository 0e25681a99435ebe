-- 017: broker sources (issue 23; store/source.go). A source consumes a
-- broker queue, stream or topic into events. It is operator-owned like a
-- connection and names one: connection references it, and ConnectionDelete
-- looks for a source using a connection through sources_connection before
-- it deletes (the foreign key is the backstop). config holds the broker
-- fields (queue, stream, durable, subject, group, topic, prefetch) as JSON
-- and mapping the herald.SourceMapping as JSON (NULL: the defaults), both
-- encoded by store/source_rows.go.
CREATE TABLE sources (
    name       TEXT PRIMARY KEY,
    type       TEXT NOT NULL,
    connection TEXT NOT NULL REFERENCES connections (name),
    config     TEXT NOT NULL DEFAULT '{}',
    mapping    TEXT,
    tenant     TEXT NOT NULL DEFAULT '',
    ordered    INTEGER NOT NULL DEFAULT 0,
    enabled    INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX sources_connection ON sources (connection);

-- Each node's view of each source, written by its periodic report: the
-- counters are cumulative (a report adds its deltas), pending is NULL when
-- the broker does not tell.
CREATE TABLE source_nodes (
    source     TEXT NOT NULL REFERENCES sources (name),
    node       TEXT NOT NULL,
    state      TEXT NOT NULL,
    consumed   INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    rejected   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    pending    INTEGER,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (source, node)
) WITHOUT ROWID;

-- The newest rejected messages of each source (herald.SourceRecentRejects;
-- a report trims the rest). AUTOINCREMENT: ids are never reused, so id
-- order is arrival order even after a source's rows were deleted.
CREATE TABLE source_rejects (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    source     TEXT NOT NULL REFERENCES sources (name),
    node       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    reason     TEXT NOT NULL,
    message    TEXT NOT NULL,
    message_id TEXT NOT NULL DEFAULT '',
    excerpt    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX source_rejects_source ON source_rejects (source, id);

-- The node consuming an ordered source, until expires_at unless it renews.
CREATE TABLE source_leases (
    source     TEXT PRIMARY KEY REFERENCES sources (name),
    node       TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

-- sources_version: bumped by every source create, update and delete;
-- nodes poll it to restart their consumers.
INSERT INTO meta (key, value) VALUES ('sources_version', 0);
