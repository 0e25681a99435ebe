-- 004: retention. The sweeper deletes finished deliveries and dead letters by
-- age (updated_at) in batches of ~1,000 rows; this partial index finds them
-- without touching the queue (pending and in-flight rows never enter it).
CREATE INDEX deliveries_finished_idx ON deliveries (state, updated_at)
    WHERE state NOT IN ('pending', 'in_flight');
-- Events past their retention, oldest first (append-mostly, cheap to keep).
CREATE INDEX events_created_at_idx ON events (created_at);
