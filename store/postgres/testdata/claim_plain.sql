-- claim_plain: rendered by TestClaimSQLGolden (-update rewrites it); do not edit.
WITH ranked AS (
	SELECT c.id, c.tid, c.subscription_id, c.next_attempt_at,
		row_number() OVER (PARTITION BY c.subscription_id ORDER BY c.next_attempt_at, c.id) AS rnk
	FROM subscriptions s
	CROSS JOIN LATERAL (
		SELECT d.id, d.ctid AS tid, d.subscription_id, d.next_attempt_at,
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
	SELECT tid, row_number() OVER (ORDER BY rnk,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id <= @rotate_after END,
		CASE WHEN @rotate_after = '' THEN NULL ELSE subscription_id END,
		next_attempt_at, id) AS ord
	FROM ranked
	ORDER BY ord
	LIMIT 4 * @limit
), locked AS (
	-- The candidates by their tuple ids in the active partition (where
	-- every pending row is), re-checked on their newest versions. The
	-- state check is spelled so that no index can serve it: a planner
	-- whose statistics said the partition was empty (analyze.go) found
	-- the candidates by id through a full scan of an index the check
	-- could use, 5,000 rows read per candidate; TID lookups are costed by
	-- the ids alone, whatever the statistics say.
	SELECT d.ctid AS tid
	FROM picked p JOIN deliveries_active d ON d.ctid = p.tid
	WHERE d.state IS NOT DISTINCT FROM 'pending' AND d.tier = @tier AND d.next_attempt_at <= @now
	ORDER BY p.ord
	LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	-- The locked rows by their tuple ids again (TID lookups, as in
	-- locked). Found by id, a planner whose statistics said the partition
	-- was empty walked the whole backlog for the ids, through an index or
	-- sequentially: 40–70 ms a claim during a burst, while a steady stream
	-- beside it waited 6–7 s (issue 28). Each row's subscription is read
	-- per row, not joined, for the same reason. A row another transaction
	-- changed since this statement's snapshot, and left pending, is locked
	-- but not claimed (its newest version is not in the snapshot): the
	-- claim comes back short, as when it loses a race.
	UPDATE deliveries_active d SET
		state = 'in_flight',
		lease_owner = @owner,
		lease_until = greatest(@lease_until::timestamptz, @now::timestamptz
			+ (coalesce((SELECT CASE WHEN s.timeout_ms > 0 THEN s.timeout_ms END FROM subscriptions s WHERE s.id = d.subscription_id),
				@default_timeout_ms) + @margin_ms) * interval '1 millisecond'),
		updated_at = @now
	WHERE d.ctid = ANY (ARRAY(SELECT tid FROM locked)) AND d.state IS NOT DISTINCT FROM 'pending'
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
