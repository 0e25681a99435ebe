-- 019: endpoint health and auto-disable (issue 24; store/health.go).
-- auto_disable is a subscription's own rule as JSON (NULL: the server's
-- defaults; {"consecutive_failures":0,…}: never). subscription_health has
-- one row per attempted subscription, upserted by every completion
-- transaction: the failure streak (reset by a success or a re-enable) and
-- attempt counts of the current and previous UTC day (day is the day
-- number, store.HealthDay). No foreign key: a row of a deleted
-- subscription is harmless and the completion path must not wait on
-- subscription rows.
ALTER TABLE subscriptions ADD COLUMN auto_disable TEXT;

CREATE TABLE subscription_health (
    subscription_id      TEXT PRIMARY KEY,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    failing_since        INTEGER,
    day                  INTEGER NOT NULL,
    attempts             INTEGER NOT NULL DEFAULT 0,
    successes            INTEGER NOT NULL DEFAULT 0,
    prev_attempts        INTEGER NOT NULL DEFAULT 0,
    prev_successes       INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
