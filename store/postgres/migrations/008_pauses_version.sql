-- 008: Retry-After pauses get their own change counter (see
-- store.SubscriptionsVersions). Pauses no longer bump version, so a
-- receiver answering 429 makes fan-out caches reload the pauses alone, not
-- every subscription.
ALTER TABLE subscriptions_version ADD COLUMN pauses_version bigint NOT NULL DEFAULT 0;
