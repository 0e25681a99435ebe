-- 007: counters of the finished states StatsGet reports (dead, skipped,
-- superseded), kept by triggers as rows enter and leave those states, so
-- /metrics, /v1/stats and the worker rebalancer no longer count the
-- finished history on every read (it grows with retention). Triggers see
-- every path that changes a state — completion, retry, redrive, the
-- ordering's skip and supersede, retention deletes — so no code path can
-- forget to keep them. SQLite has one writer: one row per state is enough.
CREATE TABLE delivery_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO delivery_counts (state, n)
SELECT s.state, (SELECT COUNT(*) FROM deliveries d WHERE d.state = s.state)
FROM (SELECT 'dead' AS state UNION ALL SELECT 'skipped' UNION ALL SELECT 'superseded') s;

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

-- Each UPDATE is a no-op for a state without a row (not counted).
CREATE TRIGGER deliveries_count_update AFTER UPDATE OF state ON deliveries
WHEN old.state <> new.state
  AND (old.state IN ('dead', 'skipped', 'superseded') OR new.state IN ('dead', 'skipped', 'superseded'))
BEGIN
    UPDATE delivery_counts SET n = n - 1 WHERE state = old.state;
    UPDATE delivery_counts SET n = n + 1 WHERE state = new.state;
END;
