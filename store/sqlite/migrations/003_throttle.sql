-- 003: per-subscription throttling (rate_limit, max_in_flight, Retry-After
-- pauses). See store/sqlite/throttle.go.

-- paused_until: a 429/503 with Retry-After pauses the whole subscription;
-- claims skip it until then (ms since the epoch, NULL when never paused).
ALTER TABLE subscriptions ADD COLUMN paused_until INTEGER;

-- The subscriptions the claim path has to think about: only these pay for
-- throttling; every other subscription is claimed exactly as before.
CREATE INDEX subscriptions_throttled ON subscriptions (id)
    WHERE rate_max IS NOT NULL OR max_in_flight > 0 OR paused_until IS NOT NULL;

-- Request starts of throttled subscriptions, recorded at claim time. A row
-- is kept while it is inside the rate window or its delivery is in flight
-- (the in-flight cap counts the distinct in-flight deliveries it names).
CREATE TABLE throttle_starts (
    subscription_id TEXT NOT NULL,
    at              INTEGER NOT NULL,
    delivery_id     TEXT NOT NULL
);
CREATE INDEX throttle_starts_subscription ON throttle_starts (subscription_id, at);
