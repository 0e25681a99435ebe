-- 005: finished deliveries leave the hot table.
--
-- deliveries becomes a table partitioned by state: deliveries_active holds
-- the queue (pending and in_flight rows), deliveries_done everything
-- finished. An UPDATE that finishes a delivery moves its row from one
-- partition to the other (and a retry or redrive moves it back), so every
-- query keeps reading and writing "deliveries" as before, while claims,
-- completions and lease rescue touch only the small active partition and
-- its indexes: the table they churn holds the queue, not the history.
-- Vacuuming it is cheap (the leader does it every few seconds; see
-- QueueVacuum), so it does not bloat however long the node runs.
--
-- A partitioned table's primary key must contain the partition key, hence
-- (id, state); ids are unique by construction (a ULID per delivery), and a
-- lookup by id reads one index entry per partition.
--
-- Concurrency: when a transaction waits for a row that another one moved
-- to the other partition, PostgreSQL raises a serialization failure
-- (40001) instead of following the row; the store retries those (see
-- retryMoved).

CREATE TABLE deliveries_p (
    id              text NOT NULL,
    event_id        text NOT NULL,
    subscription_id text NOT NULL,
    state           text NOT NULL,
    tier            integer NOT NULL,
    attempt_count   integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    lease_owner     text,
    lease_until     timestamptz,
    event_key       text NOT NULL DEFAULT '',
    event_version   bigint,
    last_status     integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    last_message    text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (id, state)
) PARTITION BY LIST (state);

-- fillfactor leaves room on each page for the row versions claims create.
CREATE TABLE deliveries_active PARTITION OF deliveries_p
    FOR VALUES IN ('pending', 'in_flight') WITH (fillfactor = 70);
-- Rows arrive here finished and leave only by retention or a retry.
CREATE TABLE deliveries_done PARTITION OF deliveries_p
    FOR VALUES IN ('delivered', 'dead', 'skipped', 'superseded', 'cancelled');

INSERT INTO deliveries_p SELECT id, event_id, subscription_id, state, tier, attempt_count,
    next_attempt_at, lease_owner, lease_until, event_key, event_version, last_status,
    last_error, last_message, created_at, updated_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_p RENAME TO deliveries;
ALTER INDEX deliveries_p_pkey RENAME TO deliveries_pkey;

-- The same indexes as before (001, 002, 004), now per partition. Partial
-- ones stay empty in the partition whose states they exclude.
CREATE INDEX deliveries_pending_idx
    ON deliveries (tier, subscription_id, next_attempt_at, id)
    WHERE state = 'pending';
CREATE INDEX deliveries_in_flight_idx
    ON deliveries (lease_until)
    WHERE state = 'in_flight';
CREATE INDEX deliveries_dead_idx
    ON deliveries (subscription_id, updated_at)
    WHERE state = 'dead';
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
CREATE INDEX deliveries_subscription_idx ON deliveries (subscription_id, id);
CREATE INDEX deliveries_key_order_idx ON deliveries (subscription_id, event_key, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');
CREATE INDEX deliveries_unsent_idx ON deliveries (state) WHERE state IN ('skipped', 'superseded');
CREATE INDEX deliveries_finished_idx ON deliveries (state, updated_at)
    WHERE state NOT IN ('pending', 'in_flight');
