-- 020: the event type catalog (issue 24 item 16; store/eventtype.go).
-- schema and example are the JSON text the API checked (NULL: none), kept
-- as text, not jsonb, so they read back byte for byte (jsonb reorders
-- keys). event_types_version is one row bumped by every write; each
-- node's schema cache (eventtype.Catalog) polls it.
CREATE TABLE event_types (
    name        text COLLATE "C" PRIMARY KEY, -- byte order, as names are paged
    description text NOT NULL DEFAULT '',
    schema      text,
    example     text,
    deprecated  boolean NOT NULL DEFAULT false,
    validate    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE event_types_version (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint NOT NULL
);
INSERT INTO event_types_version (id, version) VALUES (true, 0);
