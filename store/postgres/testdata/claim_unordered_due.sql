-- claim_unordered_due: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}') FROM subscriptions s
	CROSS JOIN LATERAL (SELECT 1 FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		LIMIT 1) n
	WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND NOT (s.ordering IN ('fifo', 'latest'));
