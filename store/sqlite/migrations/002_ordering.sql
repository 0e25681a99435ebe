-- 002: per-key ordering state (fifo and latest subscriptions).
--
-- One row per (subscription, key), created the first time a delivery of
-- the key is claimed. holder is the key's lock: the delivery in flight
-- (with its lease owner and lease), set by the claim and cleared in the
-- transaction that completes, releases or rescues that delivery.
CREATE TABLE delivery_keys (
    subscription_id TEXT NOT NULL,
    event_key       TEXT NOT NULL,
    holder          TEXT,    -- delivery id in flight, NULL when the key is free
    holder_owner    TEXT,
    holder_until    INTEGER,
    last_version    INTEGER, -- highest delivered version (latest)
    last_pos_at     INTEGER, -- publish position of the newest delivered
    last_pos_id     TEXT,    -- versionless delivery (created_at, id)
    last_sent_at    INTEGER, -- last claim of the key (key_interval_ms)
    PRIMARY KEY (subscription_id, event_key)
) WITHOUT ROWID;
-- Rescue frees keys whose holder's lease expired.
CREATE INDEX delivery_keys_held ON delivery_keys (holder_until) WHERE holder IS NOT NULL;

-- A key's unfinished deliveries in publish order (created_at, id): the
-- fifo head and the latest candidates. Replaces 001's deliveries_key,
-- which ordered by id alone.
DROP INDEX deliveries_key;
CREATE INDEX deliveries_key_order ON deliveries (subscription_id, event_key, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');

-- Stats: skipped and superseded counts read only these rows.
CREATE INDEX deliveries_unsent ON deliveries (state) WHERE state IN ('skipped', 'superseded');
