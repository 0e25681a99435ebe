-- 007: counters of the finished states StatsGet reports (dead, skipped,
-- superseded), kept by triggers as rows enter and leave those states, so
-- /metrics, /v1/stats and the worker rebalancer no longer count the
-- finished history on every read (it grows with retention, and every node
-- read it every second). Triggers see every path that changes a state —
-- completion, retry, redrive, the ordering's skip and supersede, retention
-- deletes — so no code path can forget to keep them.
--
-- Contention: a counter row is locked from the change until commit. The
-- counts are spread over 16 shard rows (StatsGet sums them) and a
-- transaction always updates the one shard picked by its transaction id,
-- so concurrent completers rarely meet, and one transaction never holds
-- two counter rows (two transactions cannot deadlock on them). The
-- triggers fire only for rows entering or leaving a counted state (the
-- WHEN clauses are checked without calling the function), which delivered
-- outcomes and claims of unordered subscriptions never do.
--
-- deliveries is partitioned by state (005): an UPDATE that moves a row to
-- the other partition fires the DELETE and INSERT triggers, not UPDATE;
-- the UPDATE trigger sees changes inside one partition.
CREATE TABLE delivery_counts (
    shard      int PRIMARY KEY,
    dead       bigint NOT NULL DEFAULT 0,
    skipped    bigint NOT NULL DEFAULT 0,
    superseded bigint NOT NULL DEFAULT 0
);
INSERT INTO delivery_counts (shard) SELECT g FROM generate_series(0, 15) AS g;
UPDATE delivery_counts SET
    dead = (SELECT count(*) FROM deliveries WHERE state = 'dead'),
    skipped = (SELECT count(*) FROM deliveries WHERE state = 'skipped'),
    superseded = (SELECT count(*) FROM deliveries WHERE state = 'superseded')
WHERE shard = 0;

-- search_path is fixed at creation so the function finds this schema's
-- table whatever the session that fires it has set.
CREATE FUNCTION delivery_counts_track() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    d_dead bigint := 0;
    d_skipped bigint := 0;
    d_superseded bigint := 0;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        d_dead := d_dead - (OLD.state = 'dead')::int;
        d_skipped := d_skipped - (OLD.state = 'skipped')::int;
        d_superseded := d_superseded - (OLD.state = 'superseded')::int;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        d_dead := d_dead + (NEW.state = 'dead')::int;
        d_skipped := d_skipped + (NEW.state = 'skipped')::int;
        d_superseded := d_superseded + (NEW.state = 'superseded')::int;
    END IF;
    UPDATE delivery_counts SET dead = dead + d_dead, skipped = skipped + d_skipped,
        superseded = superseded + d_superseded
    WHERE shard = (pg_current_xact_id()::text::bigint % 16)::int;
    RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_count_insert AFTER INSERT ON deliveries
    FOR EACH ROW WHEN (NEW.state IN ('dead', 'skipped', 'superseded'))
    EXECUTE FUNCTION delivery_counts_track();
CREATE TRIGGER deliveries_count_delete AFTER DELETE ON deliveries
    FOR EACH ROW WHEN (OLD.state IN ('dead', 'skipped', 'superseded'))
    EXECUTE FUNCTION delivery_counts_track();
CREATE TRIGGER deliveries_count_update AFTER UPDATE OF state ON deliveries
    FOR EACH ROW WHEN (OLD.state <> NEW.state
        AND (OLD.state IN ('dead', 'skipped', 'superseded') OR NEW.state IN ('dead', 'skipped', 'superseded')))
    EXECUTE FUNCTION delivery_counts_track();
