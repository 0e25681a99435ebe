-- 008: Retry-After pauses get their own change counter (see
-- store.SubscriptionsVersions). Pauses no longer bump subscriptions_version,
-- so a receiver answering 429 makes fan-out caches reload the pauses alone,
-- not every subscription.
INSERT INTO meta (key, value) VALUES ('pauses_version', 0);
