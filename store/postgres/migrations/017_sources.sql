-- 017: broker sources (issue 23; store/source.go). A source consumes a
-- broker queue, stream or topic into events. It is operator-owned like a
-- connection and names one: connection references it, and ConnectionDelete
-- looks for a source using a connection through sources_connection before
-- it deletes (the foreign key is the backstop, and its KEY SHARE lock
-- orders a source write with a connection delete). config holds the
-- broker fields (queue, stream, durable, subject, group, topic, prefetch)
-- and mapping the herald.SourceMapping (NULL: the defaults), both encoded
-- by store/source_rows.go.
CREATE TABLE sources (
    name       text COLLATE "C" PRIMARY KEY, -- byte order, as names are paged
    type       text NOT NULL,
    connection text COLLATE "C" NOT NULL REFERENCES connections (name),
    config     jsonb NOT NULL DEFAULT '{}',
    mapping    jsonb,
    tenant     text NOT NULL DEFAULT '',
    ordered    boolean NOT NULL DEFAULT false,
    enabled    boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX sources_connection ON sources (connection);

-- Each node's view of each source, written by its periodic report: the
-- counters are cumulative (a report adds its deltas), pending is NULL when
-- the broker does not tell.
CREATE TABLE source_nodes (
    source     text COLLATE "C" NOT NULL REFERENCES sources (name),
    node       text NOT NULL,
    state      text NOT NULL,
    consumed   bigint NOT NULL DEFAULT 0,
    duplicates bigint NOT NULL DEFAULT 0,
    rejected   bigint NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT '',
    pending    bigint,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (source, node)
);

-- The newest rejected messages of each source (herald.SourceRecentRejects;
-- a report trims the rest).
CREATE TABLE source_rejects (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source     text COLLATE "C" NOT NULL REFERENCES sources (name),
    node       text NOT NULL,
    at         timestamptz NOT NULL,
    reason     text NOT NULL,
    message    text NOT NULL,
    message_id text NOT NULL DEFAULT '',
    excerpt    text NOT NULL DEFAULT ''
);
CREATE INDEX source_rejects_source ON source_rejects (source, id);

-- The node consuming an ordered source, until expires_at unless it renews.
CREATE TABLE source_leases (
    source     text COLLATE "C" PRIMARY KEY REFERENCES sources (name),
    node       text NOT NULL,
    expires_at timestamptz NOT NULL
);

-- One row, bumped by every source create, update and delete; nodes poll it
-- to restart their consumers.
CREATE TABLE sources_version (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint NOT NULL
);
INSERT INTO sources_version (id, version) VALUES (true, 0);
