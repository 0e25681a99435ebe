-- 006: publish order is a position the database assigns, not a node's
-- clock (store/ordering.go).
--
-- seq is the delivery's publish position: the column's default takes it
-- from the sequence deliveries_seq when the row is inserted, whichever
-- node (or herald version) inserts it. A sequence value is taken at
-- insert, not at commit, so two publishes whose transactions overlap may
-- commit in the other order than their positions; a publish acknowledged
-- before another began always has the smaller position, whatever the
-- nodes' clocks say. Updates (claims, retries, moves between the
-- partitions of migration 005) keep it.
--
-- Cost on large tables: no row is rewritten. ADD COLUMN with a constant
-- default is a catalog change (PostgreSQL 11+ keeps the default for the
-- existing rows in the catalog), so every existing delivery reads seq 0,
-- and only rows inserted from now on take sequence values (1, 2, …).
-- Ordered by (seq, created_at, id), the existing rows keep exactly their
-- old order, (created_at, id), among themselves, before every new one:
-- that is the backfill. delivery_keys likewise reads last_pos_seq 0. The
-- key-order index is rebuilt on the active partition only (the queue:
-- pending and in-flight rows), so the finished history in deliveries_done
-- is not even read. The ALTERs take short exclusive locks, held until the
-- migration commits.
CREATE SEQUENCE deliveries_seq AS bigint;
ALTER TABLE deliveries ADD COLUMN seq bigint NOT NULL DEFAULT 0;
ALTER TABLE deliveries ALTER COLUMN seq SET DEFAULT nextval('deliveries_seq');
ALTER SEQUENCE deliveries_seq OWNED BY deliveries.seq;
ALTER TABLE delivery_keys ADD COLUMN last_pos_seq bigint NOT NULL DEFAULT 0;

-- A key's unfinished deliveries in publish order: the fifo head and the
-- latest candidates. Those rows all live in deliveries_active, and every
-- query that reads them says state IN ('pending', 'in_flight'), which
-- prunes to that partition; so the index exists there alone (002 and 005
-- had one on both partitions, on (created_at, id)).
DROP INDEX deliveries_key_order_idx;
CREATE INDEX deliveries_key_order_idx ON deliveries_active (subscription_id, event_key, seq, created_at, id)
    WHERE event_key <> '' AND state IN ('pending', 'in_flight');
