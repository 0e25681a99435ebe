-- 006: publish order is a position the store assigns, not a node's clock
-- (store/ordering.go).
--
-- seq is the delivery's publish position, taken from the meta counter
-- delivery_seq by the transaction that inserts it (SQLite has one writer,
-- so positions follow commit order). created_at stays what it was (the
-- inserting node's Now) and only breaks ties between the rows stored
-- before this migration.
--
-- No row is rewritten: ADD COLUMN with a constant default only changes the
-- schema, so every existing delivery reads seq 0. Ordered by (seq,
-- created_at, id), those keep exactly their old order, (created_at, id),
-- among themselves, and come before every delivery stored from now on
-- (seq 1, 2, …). delivery_keys likewise reads last_pos_seq 0, so a
-- position delivered before the migration compares as before with the old
-- rows and is older than every new one. The only work proportional to the
-- table is building the new index: one read pass over deliveries, writing
-- entries for the unfinished keyed rows only (the queue).
ALTER TABLE deliveries ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE delivery_keys ADD COLUMN last_pos_seq INTEGER NOT NULL DEFAULT 0;
INSERT INTO meta (key, value) VALUES ('delivery_seq', 0);

-- A key's unfinished deliveries in publish order (replaces 002's index on
-- (created_at, id)).
DROP INDEX deliveries_key_order;
CREATE INDEX deliveries_key_order ON deliveries (subscription_id, event_key, seq, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');
