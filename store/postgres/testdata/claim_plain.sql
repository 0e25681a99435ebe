-- claim_plain: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
WITH ranked AS (
	SELECT c.id, c.subscription_id, c.next_attempt_at,
		row_number() OVER (PARTITION BY c.subscription_id ORDER BY c.next_attempt_at, c.id) AS rnk
	FROM subscriptions s
	CROSS JOIN LATERAL (
		SELECT d.id, d.subscription_id, d.next_attempt_at,
			row_number() OVER (ORDER BY d.next_attempt_at, d.id) AS rnk_in_sub
		FROM deliveries d
		WHERE d.tier = @tier AND d.subscription_id = s.id AND d.state = 'pending'
		  AND d.next_attempt_at <= @now
		ORDER BY d.next_attempt_at, d.id
		LIMIT @share
	) c
	-- fifo and latest subscriptions are claimed per key (ordering.go).
	WHERE s.state = 'enabled' AND s.deleted_at IS NULL AND NOT (s.ordering IN ('fifo', 'latest'))
	  AND NOT (s.rate_limit_max IS NOT NULL OR s.max_in_flight > 0) AND (s.paused_until IS NULL OR s.paused_until <= @now::timestamptz)
), picked AS (
	SELECT id, row_number() OVER (ORDER BY rnk,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id <= @rotate_after END,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id END,
		next_attempt_at, id) AS ord
	FROM ranked
	ORDER BY ord
	LIMIT 4 * @limit
), locked AS (
	SELECT d.id
	FROM picked p JOIN deliveries d ON d.id = p.id
	-- The re-check is spelled so the partial pending index cannot serve
	-- it: on a table without statistics yet, the planner otherwise walks
	-- that index for every candidate instead of one primary-key lookup.
	-- "IN" confines it to the active partition of deliveries.
	WHERE d.state IN ('pending', 'in_flight') AND d.state IS NOT DISTINCT FROM 'pending'
	  AND d.tier = @tier AND d.next_attempt_at <= @now
	ORDER BY p.ord
	LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	UPDATE deliveries d SET
		state = 'in_flight',
		lease_owner = @owner,
		lease_until = greatest(@lease_until::timestamptz, @now::timestamptz
			+ ((CASE WHEN s.timeout_ms > 0 THEN s.timeout_ms ELSE @default_timeout_ms END) + @margin_ms)
			* interval '1 millisecond'),
		updated_at = @now
	FROM subscriptions s
	-- state = 'pending' (the rows are locked, so still pending) confines
	-- the update to the active partition of deliveries at plan time.
	WHERE d.id = ANY (ARRAY(SELECT id FROM locked)) AND d.state = 'pending' AND s.id = d.subscription_id
	RETURNING d.id, d.event_id, d.subscription_id, d.state, d.tier, d.attempt_count,
		d.next_attempt_at, d.event_key, d.event_version, d.last_status, d.last_error, d.last_message,
		d.created_at, d.updated_at, d.event_tenant, d.lease_until
)
SELECT n.candidates, c.*, e.*
FROM (SELECT count(*) AS candidates FROM ranked) n
LEFT JOIN claimed c ON true
-- Each claimed row's event by primary key. A LATERAL … LIMIT 1 is always
-- run per row: joined plainly, a planner without fresh statistics on
-- events (a server with autovacuum off never gathers them) hashed the
-- whole table for every claim.
LEFT JOIN LATERAL (
	SELECT e.id AS e_id, e.type, e.key, e.version, e.data::text AS data, e.created_at AS e_created_at,
		e.tenant AS e_tenant
	FROM events e WHERE e.id = c.event_id AND e.tenant = c.event_tenant LIMIT 1
) e ON true;
