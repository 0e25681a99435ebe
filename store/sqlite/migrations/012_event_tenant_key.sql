-- 012: an event id is unique within its tenant, not across tenants (issue
-- 20): the idempotency key is (id, tenant), the untenanted space being
-- tenant ''. Deliveries name their event by both (event_tenant is the
-- event's tenant, which an all-tenants subscription's deliveries need:
-- their subscription's tenant does not say it).
--
-- SQLite cannot change a primary key or a foreign key in place, so events
-- and deliveries are rebuilt (create, copy, drop, rename: references to
-- them by name in other tables stay valid). Migrate runs with foreign keys
-- off and checks them all before committing (migrate.go).
CREATE TABLE events_012 (
    id             TEXT NOT NULL,
    type           TEXT NOT NULL,
    key            TEXT NOT NULL DEFAULT '',
    version        INTEGER,
    data           BLOB NOT NULL,
    delivery_count INTEGER NOT NULL, -- answered again to a duplicate publish
    created_at     INTEGER NOT NULL,
    tenant         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (id, tenant)
);
INSERT INTO events_012 (id, type, key, version, data, delivery_count, created_at, tenant)
    SELECT id, type, key, version, data, delivery_count, created_at, tenant FROM events;

CREATE TABLE deliveries_012 (
    id              TEXT PRIMARY KEY,
    event_id        TEXT NOT NULL,
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
    updated_at      INTEGER NOT NULL,
    seq             INTEGER NOT NULL DEFAULT 0,
    event_tenant    TEXT NOT NULL DEFAULT '',
    FOREIGN KEY (event_id, event_tenant) REFERENCES events (id, tenant)
);
-- Event ids were unique until now, so each delivery's event is the one
-- row with its id.
INSERT INTO deliveries_012 (id, event_id, subscription_id, state, tier, attempt_count, next_attempt_at,
        event_key, event_version, lease_owner, lease_until, last_status, last_error, last_message,
        created_at, updated_at, seq, event_tenant)
    SELECT d.id, d.event_id, d.subscription_id, d.state, d.tier, d.attempt_count, d.next_attempt_at,
        d.event_key, d.event_version, d.lease_owner, d.lease_until, d.last_status, d.last_error, d.last_message,
        d.created_at, d.updated_at, d.seq, COALESCE(e.tenant, '')
    FROM deliveries d LEFT JOIN events e ON e.id = d.event_id;

-- Dropping a table drops its indexes and triggers; the delivery counters
-- (007) are not touched: the copy fired no trigger and the drop fires none.
DROP TABLE deliveries;
DROP TABLE events;
ALTER TABLE events_012 RENAME TO events;
ALTER TABLE deliveries_012 RENAME TO deliveries;

CREATE INDEX events_created_at ON events (created_at);
CREATE INDEX events_tenant ON events (tenant, created_at) WHERE tenant <> '';

CREATE INDEX deliveries_pending ON deliveries (tier, subscription_id, next_attempt_at, id)
    WHERE state = 'pending';
CREATE INDEX deliveries_in_flight ON deliveries (tier, lease_until)
    WHERE state = 'in_flight';
CREATE INDEX deliveries_dead ON deliveries (subscription_id, updated_at)
    WHERE state = 'dead';
-- EventGet, retention's "no delivery left" probe and the foreign key.
CREATE INDEX deliveries_event ON deliveries (event_id, event_tenant);
CREATE INDEX deliveries_subscription ON deliveries (subscription_id, id);
CREATE INDEX deliveries_unsent ON deliveries (state) WHERE state IN ('skipped', 'superseded');
CREATE INDEX deliveries_finished ON deliveries (state, updated_at)
    WHERE state NOT IN ('pending', 'in_flight');
CREATE INDEX deliveries_key_order ON deliveries (subscription_id, event_key, seq, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');

CREATE TRIGGER deliveries_count_insert AFTER INSERT ON deliveries
WHEN new.state IN ('dead', 'skipped', 'superseded')
BEGIN
    UPDATE delivery_counts SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER deliveries_count_delete AFTER DELETE ON deliveries
WHEN old.state IN ('dead', 'skipped', 'superseded')
BEGIN
    UPDATE delivery_counts SET n = n - 1 WHERE state = old.state;
END;
CREATE TRIGGER deliveries_count_update_in AFTER UPDATE OF state ON deliveries
WHEN new.state IN ('dead', 'skipped', 'superseded') AND old.state <> new.state
BEGIN
    UPDATE delivery_counts SET n = n + 1 WHERE state = new.state;
END;
CREATE TRIGGER deliveries_count_update_out AFTER UPDATE OF state ON deliveries
WHEN old.state IN ('dead', 'skipped', 'superseded') AND old.state <> new.state
BEGIN
    UPDATE delivery_counts SET n = n - 1 WHERE state = old.state;
END;
