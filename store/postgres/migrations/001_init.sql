-- herald schema, version 1.
--
-- Times are timestamptz with millisecond precision (the Go side truncates on
-- write). Payloads that must come back byte for byte (event data, metadata,
-- ES queries) are json, not jsonb: json keeps the producer's text verbatim.

CREATE TABLE api_tokens (
    hash       text PRIMARY KEY,
    created_at timestamptz NOT NULL
);

CREATE TABLE subscriptions (
    id                     text PRIMARY KEY,
    url                    text NOT NULL,
    method                 text NOT NULL,
    event_types            text[],
    filter_cel             text NOT NULL DEFAULT '',
    filter_jmespath        text NOT NULL DEFAULT '',
    filter_es_query        json,
    headers                jsonb,
    ordering               text NOT NULL,
    key_interval_ms        bigint NOT NULL DEFAULT 0,
    -- NULL when the subscription has no rate limit.
    rate_limit_max         integer,
    rate_limit_per_seconds integer,
    max_in_flight          integer NOT NULL DEFAULT 0,
    timeout_ms             bigint NOT NULL DEFAULT 0,
    description            text NOT NULL DEFAULT '',
    metadata               json,
    state                  text NOT NULL,
    disabled_reason        text NOT NULL DEFAULT '',
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    -- Soft delete: deliveries, attempts and dead letters keep pointing at a
    -- row that still explains them.
    deleted_at             timestamptz
);

CREATE TABLE subscription_secrets (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_id text NOT NULL REFERENCES subscriptions (id),
    value           text NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz
);
CREATE INDEX subscription_secrets_subscription_idx
    ON subscription_secrets (subscription_id, created_at DESC, id DESC);

-- One row, bumped by every subscription change; nodes poll it to know when
-- to reload their fan-out cache.
CREATE TABLE subscriptions_version (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint NOT NULL
);
INSERT INTO subscriptions_version (id, version) VALUES (true, 0);

-- delivered_total as a running count (retention deletes delivered rows; the
-- total must not go down). 16 shards so completers on several nodes do not
-- queue on one row; StatsGet sums them.
CREATE TABLE delivered_counter (
    shard int PRIMARY KEY,
    n     bigint NOT NULL DEFAULT 0
);
INSERT INTO delivered_counter (shard, n) SELECT g, 0 FROM generate_series(0, 15) AS g;

CREATE TABLE events (
    id             text PRIMARY KEY,
    type           text NOT NULL,
    key            text NOT NULL DEFAULT '',
    version        bigint,
    data           json NOT NULL,
    created_at     timestamptz NOT NULL,
    -- Deliveries fan-out created with the event, so a duplicate publish is
    -- answered without counting the (hot) deliveries table.
    delivery_count integer NOT NULL
);

-- The hot table: every claim and completion updates a row. It stays lean:
-- no foreign keys (each would cost a lookup per inserted row), only the
-- indexes the queue paths need, and a fillfactor that leaves room on each
-- page for the new row versions updates create.
CREATE TABLE deliveries (
    id              text PRIMARY KEY,
    event_id        text NOT NULL,
    subscription_id text NOT NULL,
    state           text NOT NULL,
    tier            integer NOT NULL,
    attempt_count   integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_owner     text,
    lease_until     timestamptz,
    -- Copies of the event's key and version: per-key ordering decides
    -- without joining events.
    event_key       text NOT NULL DEFAULT '',
    event_version   bigint,
    last_status     integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    last_message    text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
) WITH (fillfactor = 70);

-- The claim index: per tier, per subscription, earliest first. Partial, so
-- finished deliveries (the bulk of the table) never enter it.
CREATE INDEX deliveries_pending_idx
    ON deliveries (tier, subscription_id, next_attempt_at, id)
    WHERE state = 'pending';
-- Lease rescue and in-flight counts.
CREATE INDEX deliveries_in_flight_idx
    ON deliveries (lease_until)
    WHERE state = 'in_flight';
-- Dead letters: redrive by subscription and time, dead counts.
CREATE INDEX deliveries_dead_idx
    ON deliveries (subscription_id, updated_at)
    WHERE state = 'dead';
-- EventGet and the event_id filter of DeliveryList.
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
-- DeliveryList by subscription (newest first) and cancellation on delete.
CREATE INDEX deliveries_subscription_idx ON deliveries (subscription_id, id);

CREATE TABLE attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    delivery_id      text NOT NULL,
    n                integer NOT NULL,
    at               timestamptz NOT NULL,
    duration_ms      bigint NOT NULL,
    status           integer NOT NULL,
    error            text NOT NULL DEFAULT '',
    error_message    text NOT NULL DEFAULT '',
    response_excerpt text NOT NULL DEFAULT '',
    tier             integer NOT NULL,
    -- Keyed by delivery so DeliveryGet reads one index range; id breaks
    -- ties when a stale lease holder recorded the same attempt number.
    PRIMARY KEY (delivery_id, n, id)
);
