-- herald schema, version 2: per-key ordering state (fifo and latest).
--
-- One row per (subscription, key), created the first time a delivery of
-- the key is claimed. The claim locks the row (FOR UPDATE) before it reads
-- the key's deliveries, so two nodes never both decide for one key. holder
-- is the key's lock: the delivery in flight (with its lease owner and
-- lease), set by the claim and cleared in the transaction that completes,
-- releases or rescues that delivery.
CREATE TABLE delivery_keys (
    subscription_id text NOT NULL,
    event_key       text NOT NULL,
    holder          text,
    holder_owner    text,
    holder_until    timestamptz,
    -- Highest delivered version (latest).
    last_version    bigint,
    -- Publish position (created_at, id) of the newest delivered versionless
    -- delivery (latest, events without a version).
    last_pos_at     timestamptz,
    last_pos_id     text,
    -- Last claim of the key (key_interval_ms).
    last_sent_at    timestamptz,
    PRIMARY KEY (subscription_id, event_key)
) WITH (fillfactor = 70);
-- Rescue frees keys whose holder's lease expired.
CREATE INDEX delivery_keys_held_idx ON delivery_keys (holder_until) WHERE holder IS NOT NULL;

-- A key's unfinished deliveries in publish order: the fifo head and the
-- latest candidates.
CREATE INDEX deliveries_key_order_idx ON deliveries (subscription_id, event_key, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');

-- Stats: skipped and superseded counts read only these rows.
CREATE INDEX deliveries_unsent_idx ON deliveries (state) WHERE state IN ('skipped', 'superseded');
