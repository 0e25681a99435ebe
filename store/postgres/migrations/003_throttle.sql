-- 003: per-subscription throttling (rate_limit, max_in_flight, Retry-After
-- pauses). See store/postgres/throttle.go.

-- A 429/503 with Retry-After pauses the whole subscription; claims on every
-- node skip it until then.
ALTER TABLE subscriptions ADD COLUMN paused_until timestamptz;

-- The subscriptions the claim path has to think about: only these pay for
-- throttling; every other subscription is claimed exactly as before.
CREATE INDEX subscriptions_throttled ON subscriptions (id)
    WHERE rate_limit_max IS NOT NULL OR max_in_flight > 0 OR paused_until IS NOT NULL;

-- One row per throttled subscription, locked (FOR UPDATE) by every claim
-- that may spend its budget, so two nodes cannot both spend the last of it.
CREATE TABLE subscription_throttle (
    subscription_id text PRIMARY KEY
);

-- Request starts of throttled subscriptions, recorded at claim time. A row
-- is kept while it is inside the rate window or its delivery is in flight
-- (the in-flight cap counts the distinct in-flight deliveries it names).
CREATE TABLE throttle_starts (
    subscription_id text NOT NULL,
    at              timestamptz NOT NULL,
    delivery_id     text NOT NULL
);
CREATE INDEX throttle_starts_subscription ON throttle_starts (subscription_id, at);
