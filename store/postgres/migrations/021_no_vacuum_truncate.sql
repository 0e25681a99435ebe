-- 021: the queue tables are never truncated by VACUUM (issue 28).
-- Truncating the empty pages at a table's end takes an ACCESS EXCLUSIVE
-- lock, and every claim, publish and completion queues behind it (or
-- behind the vacuum waiting for it: wait event Timeout:VacuumTruncate).
-- A queue table shrinks after every burst is worked off, so the server's
-- autovacuum would do that again and again; the pages it would give back
-- are reused by the next burst anyway. herald's own QueueVacuum passes
-- TRUNCATE false for the same reason (store/postgres/vacuum.go).
ALTER TABLE deliveries_active SET (vacuum_truncate = false);
ALTER TABLE delivery_keys SET (vacuum_truncate = false);
ALTER TABLE throttle_starts SET (vacuum_truncate = false);
ALTER TABLE delivered_counter SET (vacuum_truncate = false);
