-- claim_locks: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
SET LOCAL plan_cache_mode = force_custom_plan;

SET LOCAL synchronous_commit = off;

INSERT INTO subscription_throttle (subscription_id)
	SELECT s.id FROM subscriptions s
	WHERE (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0) AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND NOT EXISTS (SELECT 1 FROM subscription_throttle x WHERE x.subscription_id = s.id)
	ON CONFLICT DO NOTHING;

SELECT x.subscription_id FROM subscription_throttle x JOIN subscriptions s ON s.id = x.subscription_id
	WHERE (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0) AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND (s.paused_until IS NULL OR s.paused_until <= @now::timestamptz)
	  AND (SELECT d.next_attempt_at FROM deliveries d WHERE d.tier = @tier AND d.subscription_id = s.id
		AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		ORDER BY d.next_attempt_at LIMIT 1) IS NOT NULL ORDER BY x.subscription_id FOR UPDATE OF x;

DELETE FROM throttle_starts t USING (SELECT s.id, ((coalesce(s.rate_limit_per_seconds, 0) * 1000 + @throttle_margin_ms) * interval '1 millisecond') AS w FROM subscription_throttle x JOIN subscriptions s ON s.id = x.subscription_id
	WHERE (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0) AND s.state = 'enabled' AND s.deleted_at IS NULL
	  AND (s.paused_until IS NULL OR s.paused_until <= @now::timestamptz)
	  AND (SELECT d.next_attempt_at FROM deliveries d WHERE d.tier = @tier AND d.subscription_id = s.id
		AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		ORDER BY d.next_attempt_at LIMIT 1) IS NOT NULL) l
	WHERE t.subscription_id = l.id AND t.at <= @now::timestamptz - l.w
	  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = t.delivery_id AND d.state = 'in_flight');
