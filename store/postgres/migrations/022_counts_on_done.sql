-- 022: the finished-state counters' triggers (007) move from deliveries to
-- its finished partition, deliveries_done. Rows in the counted states
-- (dead, skipped, superseded) live only there (005), so on
-- deliveries_active the triggers' WHEN clauses were never true, yet every
-- insert, claim and completion there still set up their trigger state and
-- checked them: 19 µs of PostgreSQL's CPU per one-event insert at 200/s
-- (docs/benchmarks.md, "2026-12-07 (seventh stop)"). The cover is the same:
-- a row entering or leaving a counted state is an INSERT, DELETE or UPDATE
-- of deliveries_done (an UPDATE that moves a row between the partitions
-- fires the DELETE trigger of the one and the INSERT trigger of the other),
-- and deliveries_active is never partitioned further. Catalog changes only:
-- nothing is rewritten.
DROP TRIGGER deliveries_count_insert ON deliveries;
DROP TRIGGER deliveries_count_delete ON deliveries;
DROP TRIGGER deliveries_count_update ON deliveries;
CREATE TRIGGER deliveries_count_insert AFTER INSERT ON deliveries_done
    FOR EACH ROW WHEN (NEW.state IN ('dead', 'skipped', 'superseded'))
    EXECUTE FUNCTION delivery_counts_track();
CREATE TRIGGER deliveries_count_delete AFTER DELETE ON deliveries_done
    FOR EACH ROW WHEN (OLD.state IN ('dead', 'skipped', 'superseded'))
    EXECUTE FUNCTION delivery_counts_track();
CREATE TRIGGER deliveries_count_update AFTER UPDATE OF state ON deliveries_done
    FOR EACH ROW WHEN (OLD.state <> NEW.state
        AND (OLD.state IN ('dead', 'skipped', 'superseded') OR NEW.state IN ('dead', 'skipped', 'superseded')))
    EXECUTE FUNCTION delivery_counts_track();
