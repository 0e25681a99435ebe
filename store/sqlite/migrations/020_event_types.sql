-- 020: the event type catalog (issue 24 item 16; store/eventtype.go).
-- schema and example are the JSON text the API checked (NULL: none), kept
-- as text so they read back byte for byte. event_types_version is bumped
-- by every write; each node's schema cache (eventtype.Catalog) polls it.
CREATE TABLE event_types (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    schema      TEXT,
    example     TEXT,
    deprecated  INTEGER NOT NULL DEFAULT 0,
    validate    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

INSERT INTO meta (key, value) VALUES ('event_types_version', 0);
