-- 004: retention. The sweeper deletes finished deliveries and dead letters by
-- age (updated_at) in small batches; this index finds them without touching
-- the queue (pending and in-flight rows never enter it). Queries repeat the
-- predicate verbatim so SQLite uses the partial index.
CREATE INDEX deliveries_finished ON deliveries (state, updated_at)
    WHERE state NOT IN ('pending', 'in_flight');
