-- claim_discover: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
SELECT s.id, s.ordering, s.key_interval_ms, s.timeout_ms, b.cap, pg.n, pg.last_at, pg.last_id, ks.keys
FROM subscriptions s
CROSS JOIN LATERAL (SELECT CASE WHEN (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0) OR s.paused_until > @now::timestamptz
	THEN CASE WHEN s.paused_until > @now::timestamptz THEN 0 ELSE greatest(0, least(
	CASE WHEN s.rate_limit_max IS NULL THEN 2147483647 ELSE s.rate_limit_max - (SELECT count(*) FROM throttle_starts t
		WHERE t.subscription_id = s.id AND t.at > @now::timestamptz - ((coalesce(s.rate_limit_per_seconds, 0) * 1000 + @throttle_margin_ms) * interval '1 millisecond'))::int END,
	CASE WHEN s.max_in_flight <= 0 THEN 2147483647 ELSE s.max_in_flight - (SELECT count(DISTINCT t.delivery_id)
		FROM throttle_starts t JOIN deliveries d ON d.id = t.delivery_id
		WHERE t.subscription_id = s.id AND d.state = 'in_flight')::int END)) END ELSE -1 END AS cap) b
CROSS JOIN LATERAL (
	SELECT count(*) AS n,
		(array_agg(r.next_attempt_at ORDER BY r.next_attempt_at DESC, r.id DESC))[1] AS last_at,
		(array_agg(r.id ORDER BY r.next_attempt_at DESC, r.id DESC))[1] AS last_id
	FROM (SELECT d.event_key, d.next_attempt_at, d.id FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		  AND (@after_id = '' OR (d.next_attempt_at, d.id) > (@after_at::timestamptz, @after_id))
		ORDER BY d.next_attempt_at, d.id LIMIT @page) r
) pg
CROSS JOIN LATERAL (
	SELECT coalesce(array_agg(g.event_key ORDER BY g.at, g.id), '{}') AS keys
	FROM (SELECT r.event_key, min(r.next_attempt_at) AS at, min(r.id) AS id
		FROM (SELECT d.event_key, d.next_attempt_at, d.id FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= @now::timestamptz
		  AND (@after_id = '' OR (d.next_attempt_at, d.id) > (@after_at::timestamptz, @after_id))
		ORDER BY d.next_attempt_at, d.id LIMIT @page) r GROUP BY r.event_key) g
	WHERE g.event_key = '' OR (
		NOT EXISTS (SELECT 1 FROM delivery_keys k
			WHERE k.subscription_id = s.id AND k.event_key = g.event_key AND (k.holder IS NOT NULL
				OR (s.key_interval_ms > 0 AND k.last_sent_at + s.key_interval_ms * interval '1 millisecond' > @now::timestamptz)))
		AND (s.ordering <> 'fifo' OR coalesce((
			SELECT h.state = 'pending' AND h.tier = @tier AND h.next_attempt_at <= @now::timestamptz
			FROM deliveries h
			WHERE h.subscription_id = s.id AND h.event_key = g.event_key AND h.event_key <> ''
			  AND h.state IN ('pending', 'in_flight')
			ORDER BY h.seq, h.created_at, h.id LIMIT 1), false)))
) ks
WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND (s.ordering IN ('fifo', 'latest'))
  AND (@sub = '' OR s.id = @sub) AND pg.n > 0
  -- Without the throttle locks (no subscription was limited), a limited
  -- subscription is left out, as in claimPlainSQL.
  AND (@limited OR NOT (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0))
ORDER BY s.id;
