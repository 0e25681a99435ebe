-- 001: herald's first schema.
--
-- Times are INTEGER milliseconds since the Unix epoch (UTC): the store keeps
-- millisecond precision, and integers compare and index cheaply.

-- meta holds single-row counters: subscriptions_version (bumped by every
-- subscription change; the fan-out cache reloads when it moves) and
-- delivered_total (a running count, so retention can delete delivered rows
-- without changing the figure).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('subscriptions_version', 0), ('delivered_total', 0);

CREATE TABLE api_tokens (
    hash       TEXT PRIMARY KEY, -- hex(sha256(token)); the token is never stored
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Subscriptions are soft-deleted (deleted_at) so their deliveries and
-- attempts keep a valid foreign key for listing and retention.
CREATE TABLE subscriptions (
    id               TEXT PRIMARY KEY,
    url              TEXT NOT NULL,
    method           TEXT NOT NULL,
    event_types      TEXT NOT NULL DEFAULT '[]', -- JSON array of globs
    filter           TEXT,                       -- JSON herald.Filter, NULL when none
    headers          TEXT NOT NULL DEFAULT '{}', -- JSON object
    ordering         TEXT NOT NULL DEFAULT 'none',
    key_interval_ms  INTEGER NOT NULL DEFAULT 0,
    rate_max         INTEGER,                    -- NULL when no rate limit
    rate_per_seconds INTEGER,
    max_in_flight    INTEGER NOT NULL DEFAULT 0,
    timeout_ms       INTEGER NOT NULL DEFAULT 0,
    description      TEXT NOT NULL DEFAULT '',
    metadata         TEXT,                       -- JSON, NULL when none
    state            TEXT NOT NULL,
    disabled_reason  TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    deleted_at       INTEGER
);

-- Secrets in creation order (id); "newest first" is ORDER BY created_at DESC, id DESC.
CREATE TABLE subscription_secrets (
    id              INTEGER PRIMARY KEY,
    subscription_id TEXT NOT NULL REFERENCES subscriptions (id),
    secret          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER
);
CREATE INDEX subscription_secrets_subscription ON subscription_secrets (subscription_id, created_at);

CREATE TABLE events (
    id             TEXT PRIMARY KEY,
    type           TEXT NOT NULL,
    key            TEXT NOT NULL DEFAULT '',
    version        INTEGER,
    data           BLOB NOT NULL,
    delivery_count INTEGER NOT NULL, -- answered again to a duplicate publish
    created_at     INTEGER NOT NULL
);
-- Retention deletes old events (and their finished deliveries) by age.
CREATE INDEX events_created_at ON events (created_at);

-- Deliveries copy the event's key and version so per-key ordering and
-- stale-version skipping are decided without a join.
CREATE TABLE deliveries (
    id              TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL REFERENCES events (id),
    subscription_id TEXT NOT NULL REFERENCES subscriptions (id),
    state           TEXT NOT NULL,
    tier            INTEGER NOT NULL DEFAULT 0,
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,          -- NULL unless pending
    event_key       TEXT NOT NULL DEFAULT '',
    event_version   INTEGER,
    lease_owner     TEXT,             -- set while in_flight
    lease_until     INTEGER,
    last_status     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    last_message    TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
-- The claim path: per tier and subscription, due work in order. Partial, so
-- the index holds only the queue, not the history.
CREATE INDEX deliveries_pending ON deliveries (tier, subscription_id, next_attempt_at, id)
    WHERE state = 'pending';
-- Rescue of expired leases and in-flight counts per tier.
CREATE INDEX deliveries_in_flight ON deliveries (tier, lease_until)
    WHERE state = 'in_flight';
-- Per-key ordering (fifo/latest): the unfinished deliveries of one key.
CREATE INDEX deliveries_key ON deliveries (subscription_id, event_key, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');
-- Dead letters: listing and redrive by subscription and time of death.
CREATE INDEX deliveries_dead ON deliveries (subscription_id, updated_at)
    WHERE state = 'dead';
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, id);

-- Attempts live in their own table: a delivery row stays small however
-- often it is retried. id orders them; n is not unique because a stale
-- attempt (lease lost, then attempted again elsewhere) is recorded too.
CREATE TABLE attempts (
    id               INTEGER PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES deliveries (id),
    n                INTEGER NOT NULL,
    at               INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL DEFAULT 0,
    status           INTEGER NOT NULL DEFAULT 0,
    error            TEXT NOT NULL DEFAULT '',
    error_message    TEXT NOT NULL DEFAULT '',
    response_excerpt TEXT NOT NULL DEFAULT '',
    tier             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX attempts_delivery ON attempts (delivery_id, id);
